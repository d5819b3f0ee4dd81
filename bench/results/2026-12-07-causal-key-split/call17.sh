#!/usr/bin/env bash
# Session 12's calls (carry ["devrun17", ".fi"]; PART=a, then PART=b on the same warm machine, or
# PART=one — both, trimmed, in one call, where the budget allows one;
# DL=<s> each: 400 and 420 in session 12, where the budget left allowed no more). Pack p17 = p15's configuration (MUH_TARGETS="0;90;90a", hd 128/256,
# fp16/bf16, e4m3/e5m2 at 128/256, general kind at 128, tests on; devrun17/COMMIT) with the 16-bit
# prefill and the mixed-batch GPU tests.
#   a: the causal key split (src/prefill_plan.cpp: a causal chunk over a long prefix takes the
#      sm80 agent's tail split) — the paged and dense forced cases on the sm80-class target, the
#      chunked-prefill equality, the split cases on the portable target, sanitizers; the mixed
#      batches with short rows expanded into decode rows (kernels/mixed_expand.cuh) and their
#      guard, memcheck; call15.sh's unrun checks of attention variants over an fp8 cache in
#      prefill (../2026-12-07-fp8-prefill-variants/). Meanwhile the Python extension builds
#      against the pack's install prefix and FlashInfer's paged prefill modules JIT-compile.
#   b: timed — issue 17's paged cells beside FlashInfer, the mixed-batch cells (verify: the
#      expanded decode rows), the fp8 seed grid on 132 and 16 SMs (the corrected plan's counts),
#      the Python fp8 prefill drop-ins and flash_attn_varlen_func's mixed route (host lengths).
#      Builds what a and b need first where a's are gone.
set -u
source scripts/devcall.sh  # el, run
PART=${PART:-a}; DL=${DL:-560}
L=/tmp/logs17$PART; mkdir -p $L/seed $L/seed16 $L/res; trap 'tar czf $OUT/logs17$PART.tgz -C $L .' EXIT
[ -d /tmp/p17 ] || tar xJf devrun17/p17.tar.xz -C /tmp
P=/tmp/p17; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
[ -f /tmp/py17/done ] || ( cmake -S python -B /tmp/py17 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON \
    -Dmuh_DIR=$P/inst/lib/cmake/muh > $L/py_build.log 2>&1 && cmake --build /tmp/py17 -j6 >> $L/py_build.log 2>&1
  rc=$?; echo "rc $rc" >> $L/py_build.log; [ $rc = 0 ] && touch /tmp/py17/done ) &
py_pid=$!
[ -d /tmp/fi/site ] || { mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi; }
[ -f /tmp/fi/built ] || ( cd bench && PYTHONPATH=/tmp/fi/site MAX_JOBS=6 timeout 420 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, dt, dt, hd) for b in ('fa3', 'fa2') for dt, hd in ((torch.bfloat16, 128), (torch.float16, 256))])
" > $L/fi-prebuild.log 2>&1; rc=$?; echo "rc $rc" >> $L/fi-prebuild.log; [ $rc = 0 ] && touch /tmp/fi/built ) &
fi_pid=$!
# (As run in session 12 the two test runs below were named paged and mixed, and the benches' logs
# of the same names overwrote theirs: the output's summary lines are what is left of them.)
if [ $PART = one ]; then  # a and b in one call (the budget left for one): the checks of a, trimmed
  run paged_tests 120 $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t90_*:*Chunked*'
  run prefill 60 $P/muh_gpu_prefill_tests --gtest_filter='*t90_*:*SplitAt4k*'
  S='*PagedPrefillForced*t90_fp16_hd256_nhd_causal_split_chunk1_p16*:*PagedPrefillForced*t90_bf16_hd128_vllm_causal_split_p16*'
  run memcheck_split 45 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$S"
  run mixed_tests 90 $P/muh_gpu_mixed_batch_tests
  M='*MixedBatchExpand*:*verify_expanded_then_chunk_gqa4_bf16_vllm'
  run memcheck_mixed 45 compute-sanitizer --tool memcheck $P/muh_gpu_mixed_batch_tests --gtest_filter="$M"
  run fp8_variant 60 $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter='*PagedPrefillFp8Variant*'
  F='*PagedPrefillFp8Variant*t90_fp8_e4m3_fp16_hd128_vllm_all_p32:*PagedPrefillFp8Variant*t90_fp8_e5m2_bf16_hd128_nhd_win5_causal_p16'
  run memcheck_fp8 45 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter="$F"
  run racecheck_fp8 45 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter="$F"
fi
if [ $PART = a ]; then
  run paged 150 $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t90_*:*/t0_*split*:*Chunked*:*VsDecode*'
  run prefill 90 $P/muh_gpu_prefill_tests --gtest_filter='*t90_*:*t0_*split*:*SplitAt4k*'
  S='*PagedPrefillForced*t90_fp16_hd256_nhd_causal_split_chunk1_p16*:*PagedPrefillForced*t90_bf16_hd128_vllm_causal_split_p16*:*PagedPrefillForced*t90_fp16_hd128_nhd_causal_split_p16*'
  run memcheck_split 60 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$S"
  run racecheck_split 60 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$S"
  run mixed 120 $P/muh_gpu_mixed_batch_tests
  M='*MixedBatchExpand*:*verify_expanded_then_chunk_gqa4_bf16_vllm:*decodes_first_q7_q16_gqa4_fp16_nhd'
  run memcheck_mixed 60 compute-sanitizer --tool memcheck $P/muh_gpu_mixed_batch_tests --gtest_filter="$M"
  run fp8_variant 90 $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter='*PagedPrefillFp8Variant*'
  F='*PagedPrefillFp8Variant*t90_fp8_e4m3_fp16_hd128_vllm_all_p32:*PagedPrefillFp8Variant*t90_fp8_e5m2_bf16_hd128_nhd_win5_causal_p16:*PagedPrefillFp8Variant*t0_fp8_e4m3_bf16_hd128_nhd_prefix_part_win_alibi_p16'
  run memcheck_fp8 60 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter="$F"
  run racecheck_fp8 60 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter="$F"
fi
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log 2>/dev/null)"
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -1 $L/fi-prebuild.log 2>/dev/null); JIT failures: $(grep -c 'JIT FAILED' $L/fi-prebuild.log 2>/dev/null)"
[ $PART = a ] && { echo "done at $(el) s"; exit 0; }
if [ $PART = one ]; then  # b's timed parts without the seed grids (their turn comes last, if any time is left)
  left=$(( DL - $(el) - 120 )); [ $left -gt 150 ] && left=150
  [ $left -gt 40 ] && PYTHONPATH=/tmp/py17:/tmp/fi/site timeout $left python3 bench/paged_prefill.py --out $L/res --tag p17 \
    --iters 30 --quick --serving --flashinfer > $L/paged.log 2>&1
  echo "paged bench rc $? at $(el) s"; grep -vE "^clocks|^JIT|^prebuild" $L/paged.log | tail -10 | cut -c1-200
  left=$(( DL - $(el) - 60 )); [ $left -gt 90 ] && left=90
  [ $left -gt 30 ] && PYTHONPATH=/tmp/py17 timeout $left python3 bench/paged_prefill.py --out $L/res --tag p17 --iters 30 \
    --mixed --lib $P/libmuh.so > $L/mixed.log 2>&1
  echo "mixed bench rc $? at $(el) s"; grep -vE "^clocks" $L/mixed.log | tail -6
  left=$(( DL - $(el) - 5 )); [ $left -gt 60 ] && left=60
  [ $left -gt 15 ] && ( cd tests/python/gpu && PYTHONPATH=/tmp/py17 timeout $left python3 -m pytest -q -p no:cacheprovider \
    test_paged_dropins.py::test_flash_attn_varlen_paged_with_host_lengths_runs_the_mixed_plan test_fp8_prefill.py \
    > $L/pytest.log 2>&1; echo "rc $?" >> $L/pytest.log )
  echo "pytest at $(el) s: $(tail -3 $L/pytest.log 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
  left=$(( DL - $(el) - 3 )); [ $left -gt 50 ] && left=50
  [ $left -gt 20 ] && timeout $left $P/muh bench decode --grid seed --kv-dtype auto,fp8_e4m3 --out $L/seed > $L/seed.log 2> $L/seed.progress
  echo "seed rc $? at $(el) s"; grep -E "fp8_e4m3" $L/seed.log | cut -c1-120
  echo "done at $(el) s"; exit 0
fi
left=$(( DL - $(el) - 200 )); [ $left -gt 150 ] && left=150
[ $left -gt 40 ] && PYTHONPATH=/tmp/py17:/tmp/fi/site timeout $left python3 bench/paged_prefill.py --out $L/res --tag p17 \
  --iters 30 --quick --serving --flashinfer > $L/paged.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks|^JIT|^prebuild" $L/paged.log | tail -10 | cut -c1-200
left=$(( DL - $(el) - 150 )); [ $left -gt 90 ] && left=90
[ $left -gt 30 ] && PYTHONPATH=/tmp/py17 timeout $left python3 bench/paged_prefill.py --out $L/res --tag p17 --iters 30 \
  --mixed --lib $P/libmuh.so > $L/mixed.log 2>&1
echo "mixed bench rc $? at $(el) s"; grep -vE "^clocks" $L/mixed.log | tail -6
left=$(( DL - $(el) - 90 )); [ $left -gt 50 ] && left=50
[ $left -gt 20 ] && timeout $left $P/muh bench decode --grid seed --kv-dtype auto,fp8_e4m3 --out $L/seed > $L/seed.log 2> $L/seed.progress
echo "seed rc $? at $(el) s"; grep -E "fp8_e4m3" $L/seed.log | cut -c1-120
left=$(( DL - $(el) - 40 )); [ $left -gt 90 ] && left=90
[ $left -gt 20 ] && timeout $left $P/muh bench decode --grid seed --emulate bi-v100 --no-portable --kv-dtype auto,fp8_e4m3 \
  --out $L/seed16 > $L/seed16.log 2> $L/seed16.progress
echo "seed16 rc $? at $(el) s"; grep -E "^\| 16 .*fp8_e4m3" $L/seed16.log | cut -c1-120
left=$(( DL - $(el) - 8 )); [ $left -gt 45 ] && left=45
[ $left -gt 15 ] && ( cd tests/python/gpu && PYTHONPATH=/tmp/py17 timeout $left python3 -m pytest -q -p no:cacheprovider \
  test_fp8_prefill.py test_paged_dropins.py::test_flash_attn_varlen_paged_with_host_lengths_runs_the_mixed_plan \
  > $L/pytest_fp8_prefill.log 2>&1; echo "rc $?" >> $L/pytest_fp8_prefill.log )
echo "pytest at $(el) s: $(tail -3 $L/pytest_fp8_prefill.log 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
echo "done at $(el) s"
