#!/usr/bin/env bash
# Call 10: the rows as committed last (hd 64: 192×128, three consumer groups) — every forced
# sm_90a test, memcheck and racecheck on the hd-64 cases, compare_torch.py (no FlashInfer).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/s90i.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90i:/usr/local/cuda/lib64
P=/tmp/s90i
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*' > $OUT/tests.log 2>&1; echo "tests rc $? at $(el) s: $(tail -1 $OUT/tests.log)"
grep -E "^\[  FAILED" $OUT/tests.log | head -5
for tool in memcheck racecheck; do
  timeout 45 compute-sanitizer --tool $tool $P/muh_gpu_prefill_tests --gtest_filter='*t90a*hd64*' --gtest_brief=1 > $OUT/san_$tool.log 2>&1
  echo "$tool rc $? at $(el) s: $(grep -E 'SUMMARY|PASSED|FAILED' $OUT/san_$tool.log | tr '\n' ' ')"
done
timeout 60 python3 bench/compare_torch.py --lib $P/libmuh.so --out $OUT --tag final-hd64 --iters 20 > $OUT/compare.log 2>&1
echo "compare rc $? at $(el) s"; tail -21 $OUT/compare.log | cut -c1-170
