#!/usr/bin/env bash
# Next session's call A (written at the end of session 7, not yet run; carry ["devrun7", "devrun7v"];
# ~6 min). Pack p7 = 040869a's library (its install prefix, `muh`, nine GPU test binaries; sm_90
# SASS, targets 0;90;90a, hd 64/128/256, fp16/bf16, fp8 e4m3/e5m2 at hd 128/256), built on the CPU
# machine; v2lib = session 5's library (devrun7v). What session 7 could not run (its device time
# went on 14 start attempts that got no machine):
#   1. the fixes of call 1's failures: muh/ops.py's tensor descales (pytest), the t91 vLLM
#      refusal's message (the fp8 GPU tests' refusals and scales test);
#   2. muh verify --quick with its new fp8 paged-prefill rows;
#   3. the decode suites after check::decode_sweep_targets (each kernel once: no t91 cases), and
#      the mixed batches (their decode part now carries PrefillParams::kv; 28 new e4m3 cases), and
#      the paged-prefill input guard over an fp8 cache under memcheck (bad ids read nothing);
#   4. ncu on hd 256 16k non-causal: v2lib against p7 (the sm90 kernel 3-7 % below session 5's
#      at hd 256, cause open: h100-2026-12-06-sm90-persistent/README.md).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun7/p7.tar.xz -C /tmp; tar xJf devrun7v/v2lib.tar.xz -C /tmp
P=/tmp/p7; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/gpu.txt
( cmake -S python -B /tmp/py -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $OUT/py_build.log 2>&1 && cmake --build /tmp/py -j8 >> $OUT/py_build.log 2>&1; echo "rc $? at $(el) s" >> $OUT/py_build.log ) &
py_pid=$!
run() {  # run NAME TIMEOUT CMD...: one line with the gtest / sanitizer summaries (RACECHECK SUMMARY too)
  local name=$1 t=$2; shift 2
  timeout $t "$@" > $OUT/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|RACECHECK SUMMARY|ERROR SUMMARY|PASS|FAIL' $OUT/$name.log | tail -3 | tr '\n' ' ' | cut -c1-220)"
  grep -E "^\[  FAILED  \]" $OUT/$name.log | head -6
}
run fp8_refusals 60 $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter='*t91_*:*t0_*:*Scales*'
run mixed 90 $P/muh_gpu_mixed_batch_tests
run guard_memcheck 90 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_tests --gtest_filter='*Guard*'
run decode_fp8 100 $P/muh_gpu_decode_fp8_tests
run decode_variants 100 $P/muh_gpu_decode_variants_tests
run verify 120 $P/muh verify --quick
wait $py_pid; tail -1 $OUT/py_build.log
( export PYTHONPATH=/tmp/py; timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_fp8_prefill.py \
    tests/python/gpu/test_paged_dropins.py > $OUT/pytest.log 2>&1; echo "pytest rc $? at $(el) s: $(tail -1 $OUT/pytest.log)" )
grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -8
for lib in v2lib p7; do
  LD_LIBRARY_PATH=/tmp/$lib:/usr/local/cuda/lib64 timeout 60 ncu --kernel-name regex:prefill_sm90 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    python3 bench/prefill_cell.py --lib /tmp/$lib/libmuh.so --hd 256 --heads 16 --seq 16384 > $OUT/ncu_$lib.txt 2>&1
  echo "ncu $lib rc $? at $(el) s"; grep -E "gmma|Stall|Issue Slot|Duration|Warp Cycles Per Issued|Eligible" $OUT/ncu_$lib.txt | head -12
done
cd $OUT && tar czf logs.tgz *.log *.txt 2>/dev/null; echo "done at $(el) s"
