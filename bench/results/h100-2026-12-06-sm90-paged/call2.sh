#!/usr/bin/env bash
# Call 2: call 1 hung — the producer's setmaxnreg went from 24 to 32 registers and the consumers'
# setmaxnreg.inc (240) then waited forever: the CTA's pool is its launch allocation (168 x 384),
# not the SM's 64K. Back to 24, the arithmetic now a static_assert. The same lean build (devrun/v2);
# the tests first (paged at sm_90a and unforced, prefill at sm_90a, variants at sm_90a, mixed,
# input guard), memcheck on the paged sm_90a cases, then bench/paged_prefill.py (no FlashInfer:
# its JIT alone is ~4 min) and the Python GPU suite, the Python modules built against the install
# in the background. Every log goes into one archive (the tool returns a few files only).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/v2.tar.xz -C /tmp
export LD_LIBRARY_PATH=/tmp/v1:/tmp/v1inst/lib:/usr/local/cuda/lib64
P=/tmp/v1 L=/tmp/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=/tmp/v1inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py -j12 >> $L/py_build.log 2>&1; echo "rc $? at $(el) s" >> $L/py_build.log ) &
py_pid=$!
run() {  # run NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout $t "$@" > $L/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' $L/$name.log | tr '\n' ' ' | cut -c1-160) last: $(grep -E '^\[ RUN' $L/$name.log | tail -1 | cut -c1-120)"
  grep -E "^\[  FAILED  \]" $L/$name.log | head -6
}
run paged 120 $P/muh_gpu_paged_prefill_tests --gtest_filter='-*/t0_*:*/t90_*'
run prefill_t90a 60 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*:*t91*'
run variants_t91 60 $P/muh_gpu_prefill_variants_tests --gtest_filter='*t90a*:*t91*'
run mixed 60 $P/muh_gpu_mixed_batch_tests
run guard 60 $P/muh_gpu_input_guard_tests
run san_memcheck 60 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_tests --gtest_filter='*t91_bf16_hd128_nhd*'
grep -E "ERROR SUMMARY" $L/san_memcheck.log | tail -1
wait $py_pid; tail -1 $L/py_build.log
export PYTHONPATH=/tmp/py
left=$(( 480 - $(el) )); [ $left -gt 150 ] && left=150
timeout $left python3 bench/paged_prefill.py --out $L --tag sm90-paged --iters 20 > $L/paged_bench.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks" $L/paged_bench.log | tail -30
left=$(( 560 - $(el) ))
[ $left -gt 20 ] && timeout $left python3 -m pytest -q --maxfail=5 tests/python/gpu -p no:cacheprovider > $L/pytest_gpu.log 2>&1
echo "pytest rc $? at $(el) s"; tail -3 $L/pytest_gpu.log
tar cJf $OUT/logs.tar.xz -C /tmp logs; cp $L/paged_bench.log $OUT/ 2>/dev/null; ls $L/*.csv 2>/dev/null && cp $L/*.csv $OUT/
