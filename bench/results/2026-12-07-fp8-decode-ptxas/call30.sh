#!/usr/bin/env bash
# call30 (carry ["devrun"]): the fp8 decode's illegal instruction of session 14, before and after.
# Packs (scripts/device_pack.sh, -DMUH_TARGETS="0;90" -DMUH_DTYPES=fp16 -DMUH_KV_FP8=e4m3
# -DMUH_VARIANTS=plain -DMUH_PAGED_PREFILL=OFF -- muh_cli muh_gpu_decode_fp8_tests
# muh_gpu_decode_tests): devrun/fp8dec.tar.xz (b6a09ba, hd 128: before) and devrun/fp8fix2.tar.xz
# (the fix, hd 128 and 256; its commit in devrun/fp8fix2.COMMIT).
#   A. before: the NHD pages-of-8 cases at t90 (expect the illegal instruction), memcheck on the
#      first failing one (the faulting PC: the SASS says 0x22b0.. of the NHD codes kernel);
#   B. after: the page8 / page32 cases, memcheck and racecheck on them, the whole fp8 suite, the
#      16-bit decode suite, `muh verify --quick`;
#   C. the cp.async form's speed: bench/fp8_decode.py (fp16 q, no FlashInfer) at NHD pages of 8
#      (the fixed kernel) and 16 (TMA, unchanged), e4m3 against the 16-bit cache on the same pages.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs30; mkdir -p $L; trap 'tar czf $OUT/logs30.tgz -C $L .' EXIT
for p in fp8dec fp8fix2; do [ -d /tmp/$p ] || tar xJf devrun/$p.tar.xz -C /tmp; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
nvcc --version | tail -1 | tee -a $L/gpu.txt
B=/tmp/fp8dec; A=/tmp/fp8fix2
echo "== A: before (b6a09ba)"
LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64 run before_page8 60 $B/muh_gpu_decode_fp8_tests --gtest_filter='*t90*page8*'
first=$(grep -m1 -E "^\[  FAILED  \]" $L/before_page8.log | sed -E 's/^\[  FAILED  \] //; s/ .*//')
if [ -n "$first" ]; then
  LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64 run before_memcheck 90 compute-sanitizer --tool memcheck --print-limit 3 \
    $B/muh_gpu_decode_fp8_tests --gtest_filter="$first"
  grep -iE "illegal|invalid|misaligned|at 0x|in .*decode" $L/before_memcheck.log | head -8 | cut -c1-240
fi
echo "== B: after"
export LD_LIBRARY_PATH=$A:/usr/local/cuda/lib64
run after_pages 90 $A/muh_gpu_decode_fp8_tests --gtest_filter='*page8*:*page32*'
run after_memcheck 150 compute-sanitizer --tool memcheck --print-limit 4 $A/muh_gpu_decode_fp8_tests \
  --gtest_filter='*t90*g8_page*:*t90*vllm_g4_page32*'
run after_racecheck 150 compute-sanitizer --tool racecheck --print-limit 4 $A/muh_gpu_decode_fp8_tests \
  --gtest_filter='*t90*nhd_g8_page8*:*t90*vllm_g4_page32*'
run after_fp8 200 $A/muh_gpu_decode_fp8_tests --gtest_filter='-*page8*:*page32*'
run after_decode 200 $A/muh_gpu_decode_tests
timeout 150 $A/muh verify --quick > $L/verify.log 2>&1; echo "verify rc $? at $(el) s"; grep -cE " pass *$| pass " $L/verify.log; grep -E "FAIL" $L/verify.log | cut -c1-200 | head -5
echo "== C: speed of the cp.async form"
for pg in 8 16; do
  timeout 150 python3 bench/fp8_decode.py --lib $A/libmuh.so --out $L/bench_p$pg --no-flashinfer --dtype fp16 --page $pg \
    --cells 128:16:8192,128:64:8192,128:256:2048,256:16:8192,256:1:32768 > $L/bench_p$pg.log 2>&1
  echo "page $pg rc $? at $(el) s"; grep -E "^hd" $L/bench_p$pg.log | sed -E 's/  diff .*//'
done
echo "done at $(el) s"
