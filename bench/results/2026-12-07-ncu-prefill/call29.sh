#!/usr/bin/env bash
# Not run (written at the end of session 14 for the next one; carry ["devrun"]; ~2 min): the fp8
# decode failure of section 5. Pack: `scripts/device_pack.sh fp8dec -DMUH_TARGETS="0;90"
# -DMUH_HEAD_DIMS=128 -DMUH_DTYPES=fp16 -DMUH_KV_FP8=e4m3 -DMUH_KV_FP8_HEAD_DIMS=128
# -DMUH_VARIANTS=plain -DMUH_PAGED_PREFILL=OFF -- muh_cli muh_gpu_decode_fp8_tests
# muh_gpu_decode_tests` (devrun/fp8dec.tar.xz, built at the commit in devrun/fp8dec.COMMIT).
#   1. the new page8 cases alone (NHD pages of 8, GQA 4 / 12 / 8): which fail, which pass — GQA 8
#      (the heads on N) and GQA 12 (on the rows) tell the codes-fragments kernel from the rest;
#   2. memcheck on the first failing one: the faulting kernel, PC and the instruction's class;
#   3. the rest of the fp8 suite and `muh verify --quick` (a clean run past the decode rows).
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs29; mkdir -p $L; trap 'tar czf $OUT/logs29.tgz -C $L .' EXIT
[ -d /tmp/fp8dec ] || tar xJf devrun/fp8dec.tar.xz -C /tmp
P=/tmp/fp8dec; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name --format=csv,noheader | tee $L/gpu.txt
run page8 60 $P/muh_gpu_decode_fp8_tests --gtest_filter='*page8*'
grep -E "^\[ +(OK|FAILED) +\]" $L/page8.log | sed -E 's/.*MatchesReferenceAndV1\///; s/ \(.*//' | sort | uniq -c | head -20
first=$(grep -m1 -E "^\[  FAILED  \]" $L/page8.log | sed -E 's/^\[  FAILED  \] //; s/ .*//')
[ -n "$first" ] && run memcheck 90 compute-sanitizer --tool memcheck --print-limit 4 $P/muh_gpu_decode_fp8_tests \
  --gtest_filter="$first"
grep -E "Illegal|Invalid|Misaligned|at 0x|by thread|in .*decode" $L/memcheck.log | head -12 | cut -c1-220
run fp8_rest 120 $P/muh_gpu_decode_fp8_tests --gtest_filter='-*page8*'
timeout 90 $P/muh verify --quick > $L/verify.log 2>&1; echo "verify rc $? at $(el) s"; tail -2 $L/verify.log
echo "done at $(el) s"
