#!/usr/bin/env bash
# Not run (written at the end of session 13 for the next one; carry ["devrun18", ".fi"] after
# rebuilding the pack at the current commit — recipe in ../2026-12-07-causal-key-split/call18.sh,
# plus muh_gpu_prefill_tests; DL=<s>, ~5 min):
#   1. PagedPrefillSm90Maps: does the driver take the 5-D V map (bd38c76's speedup rests on it; the
#      launch would fall back to a TMA a panel unseen) — first, and it decides how to read 3;
#   2. the sm90 agent's paged and dense cases (as call21);
#   3. issue 17's whole table beside FlashInfer on whatever device comes (H200 wanted: session 13's
#      figures are all H100's), then the mixed-batch cells.
set -u
source scripts/devcall.sh  # el, run
DL=${DL:-420}
L=/tmp/logs22; mkdir -p $L/res; trap 'tar czf $OUT/logs22.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py22 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py22 -j6 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
[ -d /tmp/fi/site ] || { mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi; }
( cd bench && PYTHONPATH=/tmp/fi/site MAX_JOBS=8 timeout 360 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, dt, dt, hd) for b in ('fa3', 'fa2') for dt, hd in ((torch.bfloat16, 128), (torch.float16, 256))])
" > $L/fi-prebuild.log 2>&1; echo "rc $?" >> $L/fi-prebuild.log ) &
fi_pid=$!
run vmap 30 $P/muh_gpu_paged_prefill_tests --gtest_filter='*PagedPrefillSm90Maps*'
run paged_t91 120 $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t91_*'
run dense_t90a 50 $P/muh_gpu_prefill_tests --gtest_filter='*/t90a_*:*PrefillPersistent*'
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
export PYTHONPATH=/tmp/py22
for c in serving32k serving0; do
  timeout 50 python3 bench/paged_prefill_probe.py --cell $c > $L/probe_$c.log 2>&1
  echo "probe $c rc $? at $(el) s"; grep " us " $L/probe_$c.log
done
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -2 $L/fi-prebuild.log | tr '\n' ' ')"
left=$(( DL - $(el) - 60 )); [ $left -gt 200 ] && left=200
[ $left -gt 40 ] && PYTHONPATH=/tmp/py22:/tmp/fi/site timeout $left python3 bench/paged_prefill.py --out $L/res --tag p22 \
  --iters 30 --quick --serving --flashinfer > $L/paged.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks|^JIT|^prebuild" $L/paged.log | tail -10 | cut -c1-220
left=$(( DL - $(el) - 5 )); [ $left -gt 60 ] && left=60
[ $left -gt 30 ] && timeout $left python3 bench/paged_prefill.py --out $L/res --tag p22 --iters 30 --mixed \
  --lib $P/libmuh.so > $L/mixed.log 2>&1
echo "mixed bench rc $? at $(el) s"; grep -vE "^clocks" $L/mixed.log | tail -6
echo "done at $(el) s"
