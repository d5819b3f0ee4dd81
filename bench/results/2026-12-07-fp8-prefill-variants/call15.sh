#!/usr/bin/env bash
# The next session's first call (carry ["devrun15"]; ~5 min): the checks of the attention
# variants over an fp8 paged cache in prefill (README.md), and the timing of the fp8 seed plan's new counts
# (src/plan.cpp's fp8_token_seconds after 2026-12-06-fp8-nhd-fragments/call13). Pack p15 =
# /tmp/muh-pack-p11's configuration of session 11 (MUH_TARGETS="0;90;90a", hd 128/256, fp16/bf16,
# e4m3/e5m2 at 128/256, general kind at 128, tests on; devrun15/COMMIT says which commit), its
# install prefix for the Python extension, `muh` and three GPU test binaries.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs15; mkdir -p $L/seed $L/seed16; trap 'tar czf $OUT/logs15.tgz -C $L .' EXIT
[ -d /tmp/p15 ] || tar xJf devrun15/p15.tar.xz -C /tmp
P=/tmp/p15; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py15 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py15 -j12 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
run fp8_prefill 150 $P/muh_gpu_paged_prefill_fp8_tests
F='*PagedPrefillFp8Variant*t90_fp8_e4m3_fp16_hd128_vllm_all_p32:*PagedPrefillFp8Variant*t90_fp8_e5m2_bf16_hd128_nhd_win5_causal_p16:*PagedPrefillFp8Variant*t0_fp8_e4m3_bf16_hd128_nhd_prefix_part_win_alibi_p16'
run memcheck 60 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter="$F"
run racecheck 60 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter="$F"
run variants_paged 90 $P/muh_gpu_prefill_variants_tests --gtest_filter='*aged*'
run decode_fp8 120 $P/muh_gpu_decode_fp8_tests
# The fp8 seed plan: 132 SMs, then the 16-SM partition (the sweep forces the counts around the plan's).
timeout 60 $P/muh bench decode --grid seed --kv-dtype auto,fp8_e4m3 --out $L/seed > $L/seed.log 2> $L/seed.progress
echo "seed rc $? at $(el) s"; grep -E "fp8_e4m3" $L/seed.log | cut -c1-120
timeout 120 $P/muh bench decode --grid seed --emulate bi-v100 --no-portable --kv-dtype auto,fp8_e4m3 --out $L/seed16 \
  > $L/seed16.log 2> $L/seed16.progress
echo "seed16 rc $? at $(el) s"; grep -E "^\| 16 .*fp8_e4m3" $L/seed16.log | cut -c1-120
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
DL=${DL:-540}
left=$(( DL - $(el) - 10 )); [ $left -gt 200 ] && left=200
[ $left -gt 20 ] && ( cd tests/python/gpu && PYTHONPATH=/tmp/py15 timeout $left python3 -m pytest -q -p no:cacheprovider \
  test_fp8_prefill.py > $L/pytest_fp8_prefill.log 2>&1; echo "rc $?" >> $L/pytest_fp8_prefill.log )
echo "pytest at $(el) s: $(tail -3 $L/pytest_fp8_prefill.log | tr '\n' ' ' | cut -c1-300)"
echo "done at $(el) s"
