#!/usr/bin/env bash
# Session 8's device call (carry ["devrun8"]; ≤ DL s (default 420: the session's device time ran
# low on failed starts), each stage guarded by the time left so the logs of what ran come back).
# Pack p8 = 807f7a3's tree built on the CPU machine (/tmp/v1's lean configuration: sm_90 SASS, targets 0;90;90a, hd 64/128/256, fp16/bf16, fp8 e4m3/e5m2 at hd
# 128/256, both variant kinds at hd 128): libmuh + install prefix, `muh`, eight GPU test binaries.
#   1. the portable agent over an fp8 cache, new this session: decode (c0e71d7) and paged prefill
#      (807f7a3) — their t0 cases (the sm80 agent's fp8 kernels did not change), the fp8 decode
#      input guard at t0, memcheck on a few t0 cases of each;
#   2. session 7's unrun checks (next-callA.sh): the t91 refusal messages and the scales test,
#      mixed batches (their e4m3 cases), pytest of the ops.py descale fix;
#   3. the seed grid with --kv-dtype auto,fp8_e4m3 --emulate bi-v100: the portable and sm80 agents
#      over fp16 and e4m3 caches, side by side;
#   4. muh verify --quick (every compiled policy, the new t0 fp8 rows among them).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
DL=${DL:-420}
left() { [ $(( $(date +%s) - t0 )) -lt $(( $1 * DL / 575 )) ]; }  # left N: fewer than N·DL/575 s have passed
sc() { echo $(( $1 * DL / 575 )); }  # a stage's timeout, scaled like left
tar xJf devrun8/p8.tar.xz -C /tmp
P=/tmp/p8; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $OUT/gpu.txt
( cmake -S python -B /tmp/py -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $OUT/py_build.log 2>&1 && cmake --build /tmp/py -j8 >> $OUT/py_build.log 2>&1; echo "rc $? at $(el) s" >> $OUT/py_build.log ) &
py_pid=$!
run() {  # run NAME TIMEOUT CMD...: one line with the gtest / sanitizer summaries
  local name=$1 t=$2; shift 2
  timeout $t "$@" > $OUT/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|RACECHECK SUMMARY|ERROR SUMMARY|^PASS|^FAIL' $OUT/$name.log | tail -3 | tr '\n' ' ' | cut -c1-220)"
  grep -E "^\[  FAILED  \]" $OUT/$name.log | head -8
}
# 1. the portable agent over fp8 caches
run decode_fp8_t0 $(sc 150) $P/muh_gpu_decode_fp8_tests --gtest_filter='*/t0_*'
run prefill_fp8_t0 $(sc 120) $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter='*/t0_*:*/t91_*:*Scales*'
left 300 && run guard_decode_t0 $(sc 60) $P/muh_gpu_input_guard_tests --gtest_filter='*DecodeGuard*/t0_*'
left 330 && run memcheck_decode_t0_fp8 $(sc 60) compute-sanitizer --tool memcheck $P/muh_gpu_decode_fp8_tests \
  --gtest_filter='*t0_fp8_e4m3_fp16_hd256_*_ragged:*t0_fp8_e5m2_bf16_hd128_*_empty_and_long'
left 360 && run memcheck_prefill_t0_fp8 $(sc 60) compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_fp8_tests \
  --gtest_filter='*t0_fp8_e4m3_fp16_hd256_*_prefix1_chunk1_gqa6_p16:*t0_fp8_e5m2_bf16_hd128_vllm_*chunk511*'
# 2. session 7's checks
left 390 && run mixed $(sc 70) $P/muh_gpu_mixed_batch_tests
left 420 && wait $py_pid; tail -1 $OUT/py_build.log
left 420 && ( export PYTHONPATH=/tmp/py; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_fp8_prefill.py \
    tests/python/gpu/test_paged_dropins.py > $OUT/pytest.log 2>&1; echo "pytest rc $? at $(el) s: $(tail -1 $OUT/pytest.log)" )
grep -E "^FAILED|^ERROR" $OUT/pytest.log 2>/dev/null | head -8
# 3. the seed grid over fp16 and e4m3 caches (stops itself by the call's end)
mkdir -p $OUT/seed
left 460 && { timeout $(( DL - 5 - $(el) )) $P/muh bench decode --grid seed --emulate bi-v100 --kv-dtype auto,fp8_e4m3 \
    --out $OUT/seed > $OUT/seed.log 2> $OUT/seed.progress; echo "seed rc $? at $(el) s"; tail -3 $OUT/seed.progress; }
# 4. verify, if anything is left
left 540 && run verify 30 $P/muh verify --quick
kill $py_pid 2>/dev/null  # (a Python build still running: not needed any more)
echo "done at $(el) s"
