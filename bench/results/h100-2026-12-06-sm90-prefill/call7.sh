#!/usr/bin/env bash
# Call 7: the mask as a per-row bound (one compare per element), and 176-key tiles at hd 128 A/B'd
# (MUH_SM90_BN176, an experiment switch; each setting a process of its own, twice, in turn).
# Forced tests both ways, `muh bench prefill` both ways, compare_torch.py (no FlashInfer).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/s90f.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90f:/usr/local/cuda/lib64
P=/tmp/s90f
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 100 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*' > $OUT/tests.log 2>&1; echo "tests rc $? at $(el) s: $(tail -1 $OUT/tests.log)"
MUH_SM90_BN176=1 timeout 100 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*hd128*' > $OUT/tests_bn176.log 2>&1; echo "tests bn176 rc $? at $(el) s: $(tail -1 $OUT/tests_bn176.log)"
grep -E "^\[  FAILED" $OUT/tests*.log | head -5
for x in 0 1 0 1; do
  MUH_SM90_BN176=$x timeout 60 $P/muh bench prefill --no-portable --iters 20 > $OUT/bench_bn176_$x.log 2>&1
  echo "== bn176 $x: $(grep -E '^muh' $OUT/bench_bn176_$x.log | awk '{printf "%s ", $(NF-1)}')"
done
timeout 200 python3 bench/compare_torch.py --lib $P/libmuh.so --out $OUT --tag call7 --iters 20 > $OUT/compare.log 2>&1
echo "compare rc $? at $(el) s"; tail -21 $OUT/compare.log | cut -c1-200
