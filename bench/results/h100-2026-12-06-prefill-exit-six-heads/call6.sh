#!/usr/bin/env bash
# Session 2026-12-06 #3, device call 6: the GPU tests of the two patches applied to main — the
# general kind's prefill tile exit (muh_gpu_prefill_variants_tests) and the portable decode
# agent's 6-head pass (muh_gpu_decode_tests, muh_gpu_decode_variants_tests: targets 0/80/90,
# fp16/bf16, hd 128/256, GQA 4/6/12) — binaries built on the CPU machine (devrun/fin.tar.xz).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logsJ; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $L/env.txt 2>&1; cat $L/env.txt
tar xJf devrun/fin.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/fin:/usr/local/cuda/lib64
for t in muh_gpu_prefill_variants_tests muh_gpu_decode_variants_tests muh_gpu_decode_tests; do
  timeout 150 /tmp/fin/$t > $L/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/$t.log | head -2 | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/$t.log | head -10
  tar czf "$OUT/logsJ.tgz" -C $L .
done
f='*t0_fp16_hd256_vllm_g6*:*t0_bf16_hd128_nhd_g6*'
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 /tmp/fin/muh_gpu_decode_variants_tests --gtest_filter="$f" > $L/san-racecheck.log 2>&1
echo "racecheck rc=$? $(grep -cE '^\[       OK \]' $L/san-racecheck.log) OK; $(grep -E 'RACECHECK SUMMARY' $L/san-racecheck.log | tail -1) at $(el) s"
tar czf "$OUT/logsJ.tgz" -C $L .
echo "total $(el) s"
