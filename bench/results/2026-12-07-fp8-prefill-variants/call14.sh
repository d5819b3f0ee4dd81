#!/usr/bin/env bash
# Session 11's call for the attention variants over an fp8 paged cache in prefill (carry
# ["devrun12"]; ~4 min; not run in session 11). Pack p12, built on the CPU machine: cmake -S . -B
# /tmp/muh-pack-p12 -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90
# -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF -DMUH_TARGETS="0;90" -DMUH_HEAD_DIMS=128
# -DMUH_DTYPES="fp16;bf16" -DMUH_KV_FP8_HEAD_DIMS=128 -DMUH_VARIANT_HEAD_DIMS=128 -DMUH_BUILD_TESTS=ON
# -DCMAKE_INSTALL_PREFIX=/tmp/p12stage/p12/inst; build muh muh_cli muh_gpu_paged_prefill_fp8_tests
# muh_gpu_prefill_variants_tests muh_gpu_paged_prefill_tests muh_gpu_mixed_batch_tests (~15 min on 2
# cores); cmake --install; p12/ = libmuh.so, muh, the four tests (stripped) and inst/ with its
# lib/libmuh.so a link to ../../libmuh.so (one copy: 22 MB as .tar.xz) → devrun12/p12.tar.xz. Then the Python extension against the install prefix
# and the fp8 prefill drop-in tests (tests/python/gpu/test_fp8_prefill.py) with DL's time left.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs14; mkdir -p $L; trap 'tar czf $OUT/logs14.tgz -C $L .' EXIT
[ -d /tmp/p12 ] || tar xJf devrun12/p12.tar.xz -C /tmp
P=/tmp/p12; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py12 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py12 -j12 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
run fp8_prefill 150 $P/muh_gpu_paged_prefill_fp8_tests
F='*PagedPrefillFp8Variant*t90_fp8_e4m3_fp16_hd128_vllm_all_p32:*PagedPrefillFp8Variant*t90_fp8_e5m2_bf16_hd128_nhd_win5_causal_p16:*PagedPrefillFp8Variant*t0_fp8_e4m3_bf16_hd128_nhd_prefix_part_win_alibi_p16'
run memcheck 60 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter="$F"
run racecheck 60 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter="$F"
run variants_paged 90 $P/muh_gpu_prefill_variants_tests --gtest_filter='*aged*'
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
DL=${DL:-300}
left=$(( DL - $(el) - 10 )); [ $left -gt 150 ] && left=150
[ $left -gt 20 ] && ( cd tests/python/gpu && PYTHONPATH=/tmp/py12 timeout $left python3 -m pytest -q -p no:cacheprovider \
  test_fp8_prefill.py > $L/pytest_fp8_prefill.log 2>&1; echo "rc $?" >> $L/pytest_fp8_prefill.log )
echo "pytest at $(el) s: $(tail -3 $L/pytest_fp8_prefill.log | tr '\n' ' ' | cut -c1-300)"
echo "done at $(el) s"
