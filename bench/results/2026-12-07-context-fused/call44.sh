#!/usr/bin/env bash
# call44 (carry ["devrun"]): call42 found the fused op no faster than its two parts (8k + 512: 99 µs
# against 98; the one paged call over the cache, chunk included, 87–90). Packs: ctx1 = call42's
# (one chunk c for both parts: 8 chunk CTAs of 18 key tiles, each over 2–3 causal q tiles) and
# ctx2 (the chunk's q tiles one a CTA, the prefix's pieces over the slots left: 16 CTAs of ≤ 8 key
# tiles, 115 of 19). The extension built once against ctx2 (the packs' ABI is the same) and loaded
# with each pack's libmuh.so; the most telling first (the device time left is short):
#   1. bench/paged_prefill.py --quick, ctx1 / ctx2 alternately twice (fused);
#   2. muh_gpu_paged_prefill_tests' ContextPrefill cases on ctx2;
#   3. ncu: every kernel of one call of each arm at 8k + 512 (paged_prefill.py --ncu), ctx2, ctx1.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs44; mkdir -p $L/res; trap 'tar czf $OUT/logs44.tgz -C $L .' EXIT
for p in ctx1 ctx2; do [ -d /tmp/$p ] || tar xJf devrun/$p.tar.xz -C /tmp; done
export PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
LD_LIBRARY_PATH=/tmp/ctx2:/usr/local/cuda/lib64 cmake -S python -B /tmp/py44 -DCMAKE_BUILD_TYPE=Release \
  -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=/tmp/ctx2/inst/lib/cmake/muh > $L/py_build.log 2>&1 \
  && cmake --build /tmp/py44 -j16 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log
echo "py build at $(el) s: $(tail -1 $L/py_build.log)"; grep -m3 -E "error" $L/py_build.log
for p in ctx1 ctx2; do
  echo "$p loads $(LD_LIBRARY_PATH=/tmp/$p:/usr/local/cuda/lib64 PYTHONPATH=/tmp/py44 python3 -c "import muh.ops
print([l.split()[-1] for l in open('/proc/self/maps') if 'libmuh.so' in l][:1])" 2>&1 | tail -1)"
done
for r in 1 2; do
  for p in ctx1 ctx2; do
    LD_LIBRARY_PATH=/tmp/$p:/usr/local/cuda/lib64 PYTHONPATH=/tmp/py44 timeout 40 python3 bench/paged_prefill.py \
      --out $L/res --tag $p-$r --iters 30 --quick > $L/paged_$p-$r.log 2>&1
    echo "paged $p $r rc $? at $(el) s"; grep -E "^seed" $L/paged_$p-$r.log | grep -E " 512 " | cut -c1-200
  done
done
LD_LIBRARY_PATH=/tmp/ctx2:/usr/local/cuda/lib64 run paged 60 /tmp/ctx2/muh_gpu_paged_prefill_tests --gtest_filter='*Context*'
for p in ctx2 ctx1; do
  LD_LIBRARY_PATH=/tmp/$p:/usr/local/cuda/lib64 PYTHONPATH=/tmp/py44 timeout 60 /usr/local/cuda/bin/ncu \
    --profile-from-start off --metrics gpu__time_duration.sum python3 bench/paged_prefill.py --ncu seed:8192:512 \
    > $L/ncu_$p.log 2>&1
  echo "ncu $p rc $? at $(el) s"
  grep -E "^arm|^  [a-zA-Z_].*\(|gpu__time_duration" $L/ncu_$p.log | sed -E 's/<[^>]*>//g; s/\([^()]*\) \(/ (/' | cut -c1-100 | head -40
done
echo "done at $(el) s"
