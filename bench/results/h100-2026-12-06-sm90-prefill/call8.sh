#!/usr/bin/env bash
# Call 8: the rows as committed last (hd 128: 128×176 with the overlap; the mask as a per-row
# bound) — forced tests, compute-sanitizer on the hd-128 sm_90a cases, compare_torch.py (no
# FlashInfer: its JIT alone costs ~4 minutes of the session's device time).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/s90g.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90g:/usr/local/cuda/lib64
P=/tmp/s90g
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 100 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*' > $OUT/tests.log 2>&1; echo "tests rc $? at $(el) s: $(tail -1 $OUT/tests.log)"
grep -E "^\[  FAILED" $OUT/tests.log | head -5
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool $P/muh_gpu_prefill_tests --gtest_filter='*t90a*hd128*' --gtest_brief=1 > $OUT/san_$tool.log 2>&1
  echo "$tool rc $? at $(el) s: $(grep -E 'SUMMARY|PASSED|FAILED' $OUT/san_$tool.log | tr '\n' ' ')"
done
timeout 200 python3 bench/compare_torch.py --lib $P/libmuh.so --out $OUT --tag final --iters 20 > $OUT/compare.log 2>&1
echo "compare rc $? at $(el) s"; tail -21 $OUT/compare.log | cut -c1-200
