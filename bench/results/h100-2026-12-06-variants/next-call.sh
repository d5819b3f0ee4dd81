#!/usr/bin/env bash
# Session 2026-12-06 #2, device call 5 (issue 20): the general kind's prefill with an early exit
# for tiles with no hook (C = this tree's prefill_sm80_math.cuh) against A = 2bc8ced, both built on
# the CPU machine (sm_90, bf16, hd 128/256, targets 0/90) and carried as devrun/run{A,C}.tar.xz (muh,
# libmuh.so). muh bench prefill --variant ... A C A C.
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
