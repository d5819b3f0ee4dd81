#!/usr/bin/env bash
# Call 1: the sm90 agent's first run — forced-policy tests (target 90a), the grid A/B against the
# sm80-class agent (target 90 forced) with the GEMM, and compute-sanitizer on a small set.
set -u
tar xJf devrun/s90a.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90a:/usr/local/cuda/lib64
P=/tmp/s90a
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*' > $OUT/tests_t90a.log 2>&1; echo "tests rc $?" >> $OUT/tests_t90a.log
tail -5 $OUT/tests_t90a.log
grep -E "FAILED|Failure" $OUT/tests_t90a.log | head -20
if grep -q "PASSED" $OUT/tests_t90a.log && ! grep -q "FAILED" $OUT/tests_t90a.log; then
  timeout 200 $P/muh bench prefill --no-portable --iters 20 --target 90 --out $OUT > $OUT/bench.log 2>&1
  cat $OUT/bench.log
  for tool in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool $P/muh_gpu_prefill_tests --gtest_filter='*t90a_bf16_hd128*:*t90a_fp16_hd256*' --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
    echo "$tool rc $?"; tail -3 $OUT/sanitizer_$tool.log
  done
fi
