#!/usr/bin/env bash
# Session 2026-12-06 #3, device call 9 (review): bad device-side indices over an fp8 KV cache —
# muh_gpu_input_guard_tests with its new fp8 cases (targets 80/90, both layouts, V1/V2, bad block
# ids and seq_lens), memcheck on a few of them (TMA and cp.async); and the refactored decode
# tests (shared sinks/slopes, max_abs_diff) once more. Binaries built on the CPU machine.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
tar xJf devrun/gd.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/gd:/usr/local/cuda/lib64
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
for t in muh_gpu_input_guard_tests muh_gpu_decode_fp8_tests muh_gpu_decode_variants_tests; do
  timeout 100 /tmp/gd/$t > "$OUT/$t.log" 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/$t.log" | head -2 | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' "$OUT/$t.log" | head -8
done
f='*t90_vllm_page16_splits1_block_id_2p30_fp8*:*t90_nhd_page16_splits3_seq_len_past_table_fp8*:*t80_vllm_page16_splits3_block_id_num_pages_fp8*:*t80_nhd_page16_splits1_block_id_minus_1_fp8*'
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 /tmp/gd/muh_gpu_input_guard_tests --gtest_filter="$f" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? $(grep -cE '^\[       OK \]' "$OUT/memcheck.log") OK; $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) at $(el) s"
