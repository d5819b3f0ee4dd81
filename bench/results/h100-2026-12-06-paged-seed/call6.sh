#!/usr/bin/env bash
# Device call 6 (session 2026-12-06): `muh bench paged --emulate bi-v100` (issue 17's seed cells
# of chunked prefill over vLLM pages, whole GPU and a 16-SM partition; committed in aa208be and
# never run on a GPU until now). Lean CLI build: hd 256, fp16, targets 0/90.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $OUT/env.txt 2>&1
B=/tmp/bQ
( cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_TARGETS="0;90" -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF \
  && cmake --build $B -j16 --target muh_cli ) > $OUT/build6.log 2>&1
echo "built rc=$? at $(el) s"
timeout 170 $B/muh bench paged --emulate bi-v100 --out $OUT > $OUT/paged6.log 2>&1
echo "bench paged rc=$? at $(el) s"; tail -40 $OUT/paged6.log
