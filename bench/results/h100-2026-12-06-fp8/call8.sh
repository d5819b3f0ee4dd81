#!/usr/bin/env bash
# Session 2026-12-06 #3, device call 8: the fp8 vLLM V block by TMA as [D/8][128 B] rows (was
# [D][16 B]: a box of D rows of 16 bytes) — the same bytes in shared memory. fp8 tests, then
# muh bench decode --kv-layout vllm --kv-dtype auto,fp8_e4m3 on call 4's cells (the vLLM rows
# there: 1.63-1.65x at hd128, 1.41x at hd256), and NHD beside it (unchanged code: a control).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
tar xJf devrun/vb.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/vb:/usr/local/cuda/lib64
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
timeout 100 /tmp/vb/muh_gpu_decode_fp8_tests > "$OUT/fp8-tests.log" 2>&1
echo "fp8 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/fp8-tests.log" | head -2 | tr '\n' ' ') at $(el) s"
cells="hd128:1:32768 hd128:16:8192 hd128:64:8192 hd128:256:2048 hd256:1:32768 hd256:16:8192 hd256:64:8192"
for lay in vllm nhd; do
  mkdir -p "$OUT/b-$lay"
  timeout 100 /tmp/vb/muh bench decode --kv-layout $lay --only $cells --kv-dtype auto,fp8_e4m3 --out "$OUT/b-$lay" > "$OUT/bench-$lay.log" 2>&1
  echo "bench $lay rc=$? at $(el) s"; grep -E "batch +[0-9]+ kv" "$OUT/bench-$lay.log" | cut -c1-140
done
