#!/usr/bin/env bash
# Call 5 (warm machine of calls 2-4): the contiguous kernel before (devrun/s90i: the session-4
# rows, call 10's pack) and after this session's producer change (devrun/v2), A B A B, each a
# compare_torch.py process of its own (muh column only; the SDPA backends in the same processes).
set -u
tar xJf devrun/s90i.tar.xz -C /tmp; [ -f /tmp/v1/libmuh.so ] || tar xJf devrun/v2.tar.xz -C /tmp
for r in 1 2; do
  for lib in s90i v1; do
    LD_LIBRARY_PATH=/tmp/$lib:/usr/local/cuda/lib64 timeout 60 python3 bench/compare_torch.py --lib /tmp/$lib/libmuh.so \
      --out /tmp/ab_$lib$r --tag ab --iters 20 > $OUT/ab_${lib}_$r.log 2>&1
    echo "== $lib run $r rc $?"; grep -E "^hd[0-9]+ h[0-9/]+ seq [0-9]+ (b[0-9]+ )?(non-)?causal: muh [0-9]+ \|" $OUT/ab_${lib}_$r.log | awk '{print $1,$2,$4,$5,$7}' | tr '\n' ';'; echo
  done
done
