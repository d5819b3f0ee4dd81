#!/usr/bin/env bash
# Call 1: the sm90 agent over paged NHD K/V (TMA boxes from the block table) and the plan's
# no_key_split rule. A lean build made on the CPU machine (hd 64/128/256, fp16/bf16, targets
# 0/90/90a, paged prefill, the general variant kind and fp8 decode at hd 128), carried as
# devrun/v1.tar.xz with its install prefix; the Python modules are built here against that install.
# Tests: paged prefill (forced sm_90a now runs the agent; sm_90 and portable forced cases are
# unchanged code and left out), prefill at sm_90a, variants at sm_90a, mixed batches, input guard,
# the decode fp8 / variants suites (tests/gpu/decode_splits.hpp, not yet run on a GPU); sanitizers
# on the paged sm_90a cases; the Python GPU suite; then bench/paged_prefill.py with FlashInfer
# (JIT from the start, in the background) and bench/compare_torch.py (the contiguous kernel's
# producer changed).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/v1.tar.xz -C /tmp
export LD_LIBRARY_PATH=/tmp/v1:/tmp/v1inst/lib:/usr/local/cuda/lib64
P=/tmp/v1
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv > $OUT/gpu.txt; cat $OUT/gpu.txt
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
( cd bench && PYTHONPATH=/tmp/fi/site MAX_JOBS=10 timeout 400 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, dt, dt, hd) for b in ('fa3', 'fa2') for dt, hd in ((torch.bfloat16, 128), (torch.float16, 256))])
" > $OUT/fi-prebuild.log 2>&1 ) &
fi_pid=$!
( cmake -S python -B /tmp/py -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=/tmp/v1inst/lib/cmake/muh \
    > $OUT/py_build.log 2>&1 && cmake --build /tmp/py -j6 >> $OUT/py_build.log 2>&1; echo "rc $? at $(el) s" >> $OUT/py_build.log ) &
py_pid=$!
run() {  # run NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout $t "$@" > $OUT/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|SUMMARY' $OUT/$name.log | tr '\n' ' ' | cut -c1-200)"
  grep -E "^\[  FAILED  \]" $OUT/$name.log | head -8
}
run paged 200 $P/muh_gpu_paged_prefill_tests --gtest_filter='-*/t0_*:*/t90_*' --gtest_brief=1
run prefill_t91 100 $P/muh_gpu_prefill_tests --gtest_filter='*t91*' --gtest_brief=1
run variants_t91 100 $P/muh_gpu_prefill_variants_tests --gtest_filter='*t91*' --gtest_brief=1
run mixed 100 $P/muh_gpu_mixed_batch_tests --gtest_brief=1
run guard 60 $P/muh_gpu_input_guard_tests --gtest_brief=1
run decode_fp8 100 $P/muh_gpu_decode_fp8_tests --gtest_brief=1
run decode_variants 100 $P/muh_gpu_decode_variants_tests --gtest_brief=1
for tool in memcheck racecheck synccheck; do
  run san_$tool 60 compute-sanitizer --tool $tool $P/muh_gpu_paged_prefill_tests --gtest_filter='*t91_bf16_hd128_nhd*' --gtest_brief=1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san_$tool.log | tail -1
done
wait $py_pid; tail -2 $OUT/py_build.log
export PYTHONPATH=/tmp/py
timeout 180 python3 -m pytest -q --maxfail=5 tests/python/gpu -p no:cacheprovider > $OUT/pytest_gpu.log 2>&1; echo "pytest rc $? at $(el) s"; tail -3 $OUT/pytest_gpu.log
wait $fi_pid; echo "fi prebuild rc $? at $(el) s"; grep -E "JIT|prebuild" $OUT/fi-prebuild.log | tail -5
export PYTHONPATH=/tmp/py:/tmp/fi/site
left=$(( 560 - $(el) )); [ $left -gt 200 ] && left=200
timeout $left python3 bench/paged_prefill.py --out $OUT --tag sm90-paged --iters 20 --flashinfer > $OUT/paged_bench.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks" $OUT/paged_bench.log | tail -30
left=$(( 590 - $(el) ))
[ $left -gt 40 ] && timeout $left python3 bench/compare_torch.py --lib $P/libmuh.so --out $OUT --tag sm90-paged-contig --iters 10 > $OUT/compare.log 2>&1
echo "compare rc $? at $(el) s"; tail -24 $OUT/compare.log
