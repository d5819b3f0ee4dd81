#!/usr/bin/env bash
# For the next session's first device call (prepared 2026-12-06, second session): two A/Bs from
# packs built on the CPU machine (scripts/device_pack.sh; carry: ["devrun"]), nothing compiled:
#   1. issue 20: the general kind's prefill with an exit for hook-free tiles (runC = 660439a's
#      kernels + h100-2026-12-06-variants/next-tile-exit.patch) against runA (2bc8ced):
#      muh bench prefill --variant ... A C A C;
#   2. issue 18: the portable decode agent's 6-head pass (sixB = 14cd977 +
#      cpu-2026-12-06-portable-sass/six-heads.patch) against sixS (14cd977): sixB's decode tests
#      (fp16 hd 256, targets 0/90; the t0 gqa6 cases) and variant tests (GQA 6 added), then the
#      seed grid with the portable cells (--grid seed --emulate bi-v100) S B S B.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logsN; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; cat $L/env.txt
for x in runA runC sixS sixB; do mkdir -p /tmp/p$x && tar xJf devrun/$x.tar.xz -C /tmp/p$x; done
echo "unpacked at $(el) s"; ldd --version 2>&1 | head -1; LD_LIBRARY_PATH=/tmp/prunA/runA:/usr/local/cuda/lib64 /tmp/prunA/runA/muh --help > /dev/null 2>$L/help.err; echo "pack runs: rc=$?"; head -3 $L/help.err
lib() { echo "/tmp/p$1/$1:/usr/local/cuda/lib64:/usr/local/cuda/lib"; }
# 2a. correctness of the 6-head pass first (a failure here voids its timing)
for t in muh_gpu_decode_tests muh_gpu_decode_variants_tests; do
  LD_LIBRARY_PATH=$(lib sixB) timeout 150 /tmp/psixB/sixB/$t > $L/sixB-$t.log 2>&1
  echo "sixB $t rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/sixB-$t.log | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/sixB-$t.log | head -10
done
# 1. prefill variant cost, A C A C
for n in A C A2 C2; do x=run${n%2}
  LD_LIBRARY_PATH=$(lib $x) timeout 40 /tmp/p$x/$x/muh bench prefill --no-portable --variant softcap=50 --variant alibi \
    --variant sinks --variant window=1024 > $L/prefill-$n.log 2>&1; echo "prefill $n rc=$? at $(el) s"; done
tar czf "$OUT/logsN.tgz" -C $L .
# 2b. seed grid with the portable agent's cells, S B S B
for n in S B S2 B2; do x=six${n%2}; [ $(el) -lt 300 ] || break; mkdir -p $L/g-$n
  LD_LIBRARY_PATH=$(lib $x) timeout 120 /tmp/p$x/$x/muh bench decode --grid seed --emulate bi-v100 --out $L/g-$n > $L/grid-$n.log 2>&1
  echo "grid $n rc=$? at $(el) s"; tar czf "$OUT/logsN.tgz" -C $L .; done
tar czf "$OUT/logsN.tgz" -C $L .
echo "total $(el) s"
