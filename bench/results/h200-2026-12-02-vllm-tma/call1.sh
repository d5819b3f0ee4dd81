#!/usr/bin/env bash
# Device call 1 (session 5): the sm80 decode agent's vLLM TMA form (page 16) — GPU tests of this
# tree, then the seed grid (16-SM partition and whole GPU, sm80 agent only) for this tree (A),
# the base commit 994603e (E, cp.async vLLM form), and three experiment builds: B = 3 stages,
# C = L2 prefetch 4 tiles ahead, D = 6 warps.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/env.txt"
lean="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90"
cli="$lean -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16 -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
L=/tmp/logs; mkdir -p $L
copy() { rm -rf "$1"; mkdir -p "$1"; tar cf - --exclude=./devrun --exclude='./build*' . | (cd "$1" && tar xf -); }
row='{k16Bit, kHd256, Agent::sm80, 4, 64, 2, 1, 128, true, kSmemCap,'
copy /tmp/sB; sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, 4, 64, 3, 1, 128, true, kSmemCap,/" /tmp/sB/include/muh/tuning/tuning_sm90.hpp
copy /tmp/sD; sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, 6, 96, 2, 1, 192, true, kSmemCap,/" /tmp/sD/include/muh/tuning/tuning_sm90.hpp
grep -c "Agent::sm80, 4, 64, 3, 1, 128" /tmp/sB/include/muh/tuning/tuning_sm90.hpp > $L/sed-check.txt
grep -c "Agent::sm80, 6, 96, 2, 1, 192" /tmp/sD/include/muh/tuning/tuning_sm90.hpp >> $L/sed-check.txt
( cmake -S . -B /tmp/bT $lean -DMUH_HEAD_DIMS="128;256" -DMUH_DTYPES="fp16;bf16" -DMUH_TARGETS="0;75;80;90" -DMUH_VARIANT_HEAD_DIMS=128 -DMUH_BUILD_PYTHON=OFF \
  && cmake --build /tmp/bT -j10 --target muh_gpu_decode_tests muh_gpu_input_guard_tests muh_gpu_mixed_batch_tests muh_gpu_green_context_tests muh_cli ) > $L/build-T.log 2>&1 &
pT=$!
( cmake -S devrun/base -B /tmp/bE $cli && cmake --build /tmp/bE -j3 --target muh_cli ) > $L/build-E.log 2>&1 &
( cmake -S . -B /tmp/bC $cli -DCMAKE_CUDA_FLAGS=-DMUH_EXP_DECODE_L2_PREFETCH=4 && cmake --build /tmp/bC -j3 --target muh_cli ) > $L/build-C.log 2>&1 &
wait $pT; echo "T built rc=$? at $(el) s"
( cmake -S /tmp/sB -B /tmp/bB $cli && cmake --build /tmp/bB -j6 --target muh_cli ) > $L/build-B.log 2>&1 &
( cmake -S /tmp/sD -B /tmp/bD $cli && cmake --build /tmp/bD -j6 --target muh_cli ) > $L/build-D.log 2>&1 &
ls /tmp/bT/tests/muh_gpu_decode_tests || { tail -30 $L/build-T.log; tar czf "$OUT/logs.tgz" -C $L .; exit 1; }
B=/tmp/bT
for t in "muh_gpu_decode_tests:*" "muh_gpu_input_guard_tests:*Decode*" "muh_gpu_mixed_batch_tests:*" "muh_gpu_green_context_tests:*"; do
  exe=${t%%:*}; $B/tests/$exe --gtest_filter="${t#*:}" > $L/$exe.log 2>&1
  echo "$exe rc=$? $(grep -E '^\[  (PASSED|FAILED) \]' $L/$exe.log | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/$exe.log | head -20
done
f='Sweep/DecodeForced.MatchesReference/t90_*_vllm_len1*:Sweep/DecodeForced.MatchesReference/t90_*_vllm_gqa6*:Sweep/DecodeForced.MatchesReference/t90_fp16_hd256_vllm_*'
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 1 $B/tests/muh_gpu_decode_tests --gtest_filter="$f" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -cE '^\[       OK \]' $L/san-$tool.log) OK; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san-$tool.log | tail -1) at $(el) s"
done
tar czf "$OUT/logs.tgz" -C $L .
grid() { mkdir -p $L/g-$1; $2 bench decode --grid seed --emulate bi-v100 ${3:---no-portable} --out $L/g-$1 > $L/grid-$1.log 2>&1; echo "grid $1 rc=$? at $(el) s"; }
grid A $B/muh
wait
grid E /tmp/bE/muh --iters=30  # the base has no --no-portable (its portable rows are dropped below)
for x in C B D; do [ -x /tmp/b$x/muh ] && grid $x /tmp/b$x/muh || { echo "no build $x"; tail -5 $L/build-$x.log; }; done
grid A2 $B/muh
tar czf "$OUT/logs.tgz" -C $L .
for x in A E C B D A2; do
  awk -F'|' '/^\| (16|132) \|/ && $3 !~ /portable/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt
done
awk -F'|' '/^\| (16|132) \|/ && $3 !~ /portable/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-A.log > $L/cells.txt
echo "SMs|cell|floor  best: A (this) | E (base) | C (pf4) | B (3 stages) | D (6 warps) | A2"
paste -d'|' $L/cells.txt $L/best-A.txt $L/best-E.txt $L/best-C.txt $L/best-B.txt $L/best-D.txt $L/best-A2.txt
echo "plan ÷ best, A:"; awk -F'|' '/^\| (16|132) \|/ && $3 !~ /portable/{print $2 $4 $6 $9}' $L/grid-A.log
echo "total $(el) s"
