#!/usr/bin/env bash
# Session 2026-12-06 #2, device call 4 (issue 20): the general kind's prefill cost. A = c77c4d1
# (devrun/headA.tgz: the hooks decided per score), B = this tree (decided once per tile: a tile
# with no hook on returns before the per-score loop). Prefill variant tests on B; muh bench
# prefill --variant ... A B A B.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs4; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; cat $L/env.txt
rm -rf /tmp/sA; mkdir -p /tmp/sA; tar xzf devrun/headA.tgz -C /tmp/sA
lean="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=128;256 -DMUH_DTYPES=bf16 -DMUH_TARGETS=0;90 -DMUH_PAGED_PREFILL=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
( cmake -S /tmp/sA -B /tmp/bA $lean -DMUH_BUILD_TESTS=OFF && cmake --build /tmp/bA -j6 --target muh_cli ) > $L/build-A.log 2>&1 &
( cmake -S . -B /tmp/bB $lean && cmake --build /tmp/bB -j10 --target muh_cli muh_gpu_prefill_variants_tests ) > $L/build-B.log 2>&1
echo "B built rc=$? at $(el) s; prefill sm80 variant spills: $(grep -A1 'prefill_sm80_variant' $L/build-B.log | grep -c 'bytes spill')"
wait; echo "A built at $(el) s: $(ls /tmp/bA/muh 2>&1)"
timeout 150 /tmp/bB/tests/muh_gpu_prefill_variants_tests > $L/prefill_variants.log 2>&1
echo "prefill variants rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/prefill_variants.log | tr '\n' ' ') at $(el) s"
grep -E '^\[  FAILED  \]' $L/prefill_variants.log | head
for n in A B A2 B2; do b=/tmp/b${n%2}/muh; [ -x $b ] || continue; [ $(el) -lt 520 ] || break
  timeout 60 $b bench prefill --no-portable --variant softcap=50 --variant alibi --variant sinks --variant window=1024 --out $L > $L/bench-$n.log 2>&1
  rc=$?; mv $L/bench_prefill.csv $L/bench-$n.csv 2>/dev/null; echo "bench $n rc=$rc at $(el) s"; done
tar czf "$OUT/logs4.tgz" -C $L .
echo "ms per cell: kind | A | B | A2 | B2"
paste -d'|' <(grep -E '^(muh|whole|v:)' $L/bench-A.log | awk '{printf "%s hd%s %s %s %s\n",$1,$0 ~ /hd128/ ? 128 : 256, $0 ~ /seq 1024/ ? "1k" : ($0 ~ /seq 4096/ ? "4k" : "16k"), ($0 ~ /non-causal/ ? "nc" : "c"), ""}') \
  <(grep -E '^(muh|whole|v:)' $L/bench-A.log | grep -o '[0-9.]* ms') <(grep -E '^(muh|whole|v:)' $L/bench-B.log | grep -o '[0-9.]* ms') \
  <(grep -E '^(muh|whole|v:)' $L/bench-A2.log | grep -o '[0-9.]* ms') <(grep -E '^(muh|whole|v:)' $L/bench-B2.log | grep -o '[0-9.]* ms')
echo "total $(el) s"
