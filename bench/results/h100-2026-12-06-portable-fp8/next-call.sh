#!/usr/bin/env bash
# The next session's first call (written at the end of session 8, not yet run; carry ["devrun8"];
# ~5 min; pack p8 = 807f7a3's build, local to this workspace and excluded from git — rebuild it as
# call1.sh's header says if it is gone). What session 8's call could not reach:
#   1. the rest of the portable agent's fp8 paged-prefill cases (bf16 t0) and the t91 refusal
#      messages (session 7's fix);
#   2. pytest of the descale fix (the extension is built from this tree: the fix is in);
#   3. muh verify --quick (the t0 fp8 rows of decode and paged prefill among them).
# Everything goes into ONE tarball: the tool returns only a few files a call.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs9; mkdir -p $L; trap 'tar czf $OUT/logs.tgz -C $L .' EXIT
tar xJf devrun8/p8.tar.xz -C /tmp
P=/tmp/p8; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py -j8 >> $L/py_build.log 2>&1; echo "rc $? at $(el) s" >> $L/py_build.log ) &
py_pid=$!
run() {  # run NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout $t "$@" > $L/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|^PASS|^FAIL' $L/$name.log | tail -3 | tr '\n' ' ' | cut -c1-220)"
  grep -E "^\[  FAILED  \]" $L/$name.log | head -8
}
run prefill_fp8_bf16_t0 150 $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter='*/t0_*bf16*:*/t91_*'
wait $py_pid; tail -1 $L/py_build.log
( export PYTHONPATH=/tmp/py; timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_fp8_prefill.py \
    tests/python/gpu/test_paged_dropins.py > $L/pytest.log 2>&1; echo "pytest rc $? at $(el) s: $(tail -1 $L/pytest.log)" )
grep -E "^FAILED|^ERROR" $L/pytest.log | head -8
run verify 150 $P/muh verify --quick
echo "done at $(el) s"
