#!/usr/bin/env bash
# Session 12's second call (carry ["devrun18"]; DL=<s>, ~4 min): what call17 left unchecked.
# Pack p18 (p17's configuration, devrun18/COMMIT): libmuh with the fitted fp8 plan constant, muh,
# the paged-prefill and mixed-batch GPU tests. Its recipe (2 cores, minutes when the build dir
# exists, ~1 h fresh):
#   cmake -S . -B /tmp/muh-pack-p11 -G Ninja -DMUH_CUDA_ARCHITECTURES=90 -DMUH_TARGETS="0;90;90a" \
#     -DMUH_HEAD_DIMS="128;256" -DMUH_DTYPES="fp16;bf16" -DMUH_VARIANTS="plain;general" -DMUH_VARIANT_HEAD_DIMS=128 \
#     -DMUH_KV_FP8="e4m3;e5m2" -DMUH_KV_FP8_HEAD_DIMS="128;256" -DMUH_BUILD_TESTS=ON -DMUH_BUILD_PYTHON=OFF
#   cmake --build /tmp/muh-pack-p11 -j2 --target muh muh_cli muh_gpu_paged_prefill_tests muh_gpu_mixed_batch_tests
#   mkdir -p /tmp/p18stage/p18 && cp libmuh.so muh tests/muh_gpu_{paged_prefill,mixed_batch}_tests there, strip,
#   tar cf - -C /tmp/p18stage p18 | xz -T0 -6 > devrun18/p18.tar.xz
#   1. the paged prefill forced cases on the sm80-class target and the chunked-prefill equality
#      (call17's run of them timed out at 120 s beside the Python and FlashInfer builds);
#   2. the mixed-batch tests (the decodes-not-first case now after a 40-token row; the all-short
#      batch as an expanded case), memcheck on the expanded cases;
#   3. flash_attn_varlen_func's mixed route (host lengths) with its corrected bad-input assertion:
#      the Python extension builds meanwhile against the pack's install prefix (p18/inst, session 13:
#      `cmake --install` of the pack's build dir, lib/libmuh.so a link to ../../libmuh.so);
#   4. with what DL leaves, the fp8 seed grid on the 16-SM partition (the plan's 32 / 16 partitions).
set -u
source scripts/devcall.sh  # el, run
DL=${DL:-300}
L=/tmp/logs18; mkdir -p $L/seed16; trap 'tar czf $OUT/logs18.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py18 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py18 -j8 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
run mixed_tests 60 $P/muh_gpu_mixed_batch_tests
left=$(( DL - $(el) - 5 )); [ $left -gt 200 ] && left=200
run paged_tests $left $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t90_*:*Chunked*:*/t0_*causal_split*'
left=$(( DL - $(el) - 5 )); [ $left -gt 45 ] && left=45
[ $left -gt 15 ] && run memcheck_mixed $left compute-sanitizer --tool memcheck $P/muh_gpu_mixed_batch_tests \
  --gtest_filter='*short_row_first_gqa4_bf16_nhd:*decodes_first_q2_q7_gqa6_fp16_vllm'
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
left=$(( DL - $(el) - 5 )); [ $left -gt 60 ] && left=60
[ $left -gt 15 ] && ( cd tests/python/gpu && PYTHONPATH=/tmp/py18 PYTHONDONTWRITEBYTECODE=1 timeout $left python3 -m pytest -q \
  -p no:cacheprovider test_paged_dropins.py -k "host_lengths or refusals" > $L/pytest.log 2>&1; echo "rc $?" >> $L/pytest.log )
echo "pytest at $(el) s: $(tail -3 $L/pytest.log 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
left=$(( DL - $(el) - 5 )); [ $left -gt 110 ] && left=110
[ $left -gt 30 ] && timeout $left $P/muh bench decode --grid seed --emulate bi-v100 --no-portable --kv-dtype auto,fp8_e4m3 \
  --out $L/seed16 > $L/seed16.log 2> $L/seed16.progress
echo "seed16 rc $? at $(el) s"; grep -E "^\| 16 .*fp8_e4m3" $L/seed16.log | cut -c1-120
echo "done at $(el) s"
