#!/usr/bin/env bash
# Call 6: the committed kernels (hd 128 build with paged K/V and the general variant kind,
# targets 0/80/90/90a) — every GPU suite the new target touches: prefill (all targets, the GQA-6
# case), the variants and paged suites at sm_90a (refused with a clear Status, the walk passing),
# decode forced at sm_90a (sm_90's row), mixed batches, the input guard; compute-sanitizer on the
# sm90 agent; `muh verify --quick`.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/s90v.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90v:/usr/local/cuda/lib64
P=/tmp/s90v
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() {  # run NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout $t "$@" > $OUT/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|SUMMARY|^PASS|^FAIL' $OUT/$name.log | tr '\n' ' ' | cut -c1-220)"
  grep -E "^\[  FAILED  \]" $OUT/$name.log | head -5
}
run prefill 200 $P/muh_gpu_prefill_tests
run variants_t90a 120 $P/muh_gpu_prefill_variants_tests --gtest_filter='*t91*'
run paged_t90a 120 $P/muh_gpu_paged_prefill_tests --gtest_filter='*t91*'
run decode_t90a 120 $P/muh_gpu_decode_tests --gtest_filter='*t91*'
run mixed 90 $P/muh_gpu_mixed_batch_tests
run guard 90 $P/muh_gpu_input_guard_tests
for tool in memcheck racecheck synccheck; do
  run san_$tool 90 compute-sanitizer --tool $tool $P/muh_gpu_prefill_tests --gtest_filter='*t90a_bf16*' --gtest_brief=1
done
run verify 150 $P/muh verify --quick
tail -5 $OUT/verify.log
