#!/usr/bin/env bash
# Call 1 (session 7; carry ["devrun5"]): pack p5 = the working tree with the fp8 paged prefill
# (libmuh.so with its install prefix, muh, the prefill / paged / fp8 paged GPU tests; sm_90 SASS,
# targets 0;90;90a, hd 64/128/256, fp16/bf16, fp8 hd 128/256), built on the CPU machine. The sm90
# kernel is f5cdebe's (never run): its racecheck first, on the persistent cases with one Q buffer
# (dense bf16 hd 256) and two (paged NHD bf16 hd 128) — RACECHECK SUMMARY is racecheck's line.
# Then the fp8 paged prefill tests, the 16-bit paged and prefill suites on the sm80 agent's target
# (its body changed: a template parameter, the widening step, the epilogue's scale), memcheck and
# racecheck on fp8 cases, `muh bench paged --kv-dtype fp8_e4m3` (fp8 against the 16-bit cache and
# dense, same process), and the Python drop-ins over fp8 caches. (ncu on hd 256 16k, v2lib against
# p5: call2.sh, when the budget allows.)
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
for p in p5 v2lib; do [ -f devrun5/$p.tar.xz ] && tar xJf devrun5/$p.tar.xz -C /tmp; done
P=/tmp/p5; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/gpu.txt
( cmake -S python -B /tmp/py -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $OUT/py_build.log 2>&1 && cmake --build /tmp/py -j8 >> $OUT/py_build.log 2>&1; echo "rc $? at $(el) s" >> $OUT/py_build.log ) &
py_pid=$!
run() {  # run NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout $t "$@" > $OUT/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|RACECHECK SUMMARY|ERROR SUMMARY' $OUT/$name.log | tr '\n' ' ' | cut -c1-200)"
  grep -E "^\[  FAILED  \]" $OUT/$name.log | head -6
}
run race_dense_hd256 100 compute-sanitizer --tool racecheck $P/muh_gpu_prefill_tests --gtest_filter='*Persistent*bf16_hd256*'
run race_paged_hd128 100 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_tests --gtest_filter='*Persistent*bf16_hd128*'
run fp8 120 $P/muh_gpu_paged_prefill_fp8_tests
run paged_t90 120 $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t90_*:*VsDecode*:*Guard*:*BadTables*'
run prefill 90 $P/muh_gpu_prefill_tests --gtest_filter='*t90_*:*t90a*:*Persistent*:*SplitAt4k*'
for tool in memcheck racecheck; do
  run ${tool}_fp8 90 compute-sanitizer --tool $tool $P/muh_gpu_paged_prefill_fp8_tests \
    --gtest_filter='*t90_fp8_e4m3_bf16_hd128_*many_pages_varlen_gqa6_p16:*t90_fp8_e5m2_fp16_hd256_*noncausal_split_p16'
done
timeout 120 $P/muh bench paged --kv-dtype fp8_e4m3 --iters 30 > $OUT/bench_paged_fp8.log 2>&1
echo "bench paged rc $? at $(el) s"; cat $OUT/bench_paged_fp8.log
wait $py_pid; tail -1 $OUT/py_build.log
( export PYTHONPATH=/tmp/py; timeout 120 python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_fp8_prefill.py \
    tests/python/gpu/test_paged_dropins.py > $OUT/pytest.log 2>&1; echo "pytest rc $? at $(el) s: $(tail -1 $OUT/pytest.log)" )
grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -10
[ -s $OUT/ncu_p5.txt ] && echo yes > /tmp/ncu_done
cd $OUT && tar czf logs.tgz *.log *.txt 2>/dev/null; echo "done at $(el) s"
