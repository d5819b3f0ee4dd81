#!/usr/bin/env bash
# Session 2026-12-06 #2, device call 5 (issue 20): the general kind's prefill with an early exit
# for tiles with no hook (C = this tree's prefill_sm80_math.cuh) against A = 2bc8ced, both built on
# the CPU machine (sm_90, bf16, hd 128/256, targets 0/90) and carried as devrun/run{A,C}.tar.xz (muh,
# libmuh.so). muh bench prefill --variant ... A C A C.
# The tarballs (not committed: 11 MB each), on the CPU machine (~8 min each on 2 cores):
#   lean='-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=128;256
#         -DMUH_DTYPES=bf16 -DMUH_TARGETS=0;90 -DMUH_PAGED_PREFILL=OFF -DMUH_BUILD_TESTS=OFF
#         -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF'
#   A: git archive 660439a into /tmp/srcA; cmake -S /tmp/srcA -B /tmp/bldA $lean; ninja -C /tmp/bldA muh
#   C: the same with next-tile-exit.patch applied; then per tree
#   mkdir runX && cp BUILD/muh BUILD/libmuh.so runX/ && strip runX/* && tar cf - runX | xz > devrun/runX.tar.xz
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=$OUT/logs5; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; cat $L/env.txt
for x in A C; do mkdir -p /tmp/run$x; tar xJf devrun/run$x.tar.xz -C /tmp/run$x; done; echo "unpacked at $(el) s"
for n in A C A2 C2; do d=/tmp/run${n%2}/run${n%2}
  LD_LIBRARY_PATH=$d:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} timeout 40 $d/muh bench prefill --no-portable --variant softcap=50 --variant alibi --variant sinks --variant window=1024 > $L/bench-$n.log 2>&1
  echo "bench $n rc=$? at $(el) s"; done
tail -3 $L/bench-A.log
echo "total $(el) s"
