#!/usr/bin/env bash
# Device call 4: the committed candidate (hd-256 sm90 row 12 warps x 1 stage + vLLM TMA): GPU
# tests, sanitizers, the seed grid with the portable agent (the results), and NHD cells of the
# default grid against the old row (A: 4 warps x 2 stages) and D (6 x 2), same run.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/env.txt"
lean="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90"
cli="$lean -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16;bf16 -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
L=/tmp/logs4; mkdir -p $L
row='{k16Bit, kHd256, Agent::sm80, 12, 192, 1, 1, 192, true, kSmemCap,'
for c in A:4:64:2:128 D:6:96:2:192; do
  IFS=: read n w t s p <<< "$c"; d=/tmp/s$n; rm -rf $d; mkdir -p $d
  tar cf - --exclude=./devrun --exclude='./build*' . | (cd $d && tar xf -)
  sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, $w, $t, $s, 1, $p, true, kSmemCap,/" $d/include/muh/tuning/tuning_sm90.hpp
  echo "$n: $(grep -c "Agent::sm80, $w, $t, $s, 1, $p, true" $d/include/muh/tuning/tuning_sm90.hpp)" >> $L/sed-check.txt
  ( cmake -S $d -B /tmp/b$n $cli && cmake --build /tmp/b$n -j3 --target muh_cli ) > $L/build-$n.log 2>&1 &
done
( cmake -S . -B /tmp/bT $lean -DMUH_HEAD_DIMS="128;256" -DMUH_DTYPES="fp16;bf16" -DMUH_TARGETS="0;75;80;90" -DMUH_VARIANT_HEAD_DIMS=128 -DMUH_BUILD_PYTHON=OFF \
  && cmake --build /tmp/bT -j10 --target muh_gpu_decode_tests muh_gpu_input_guard_tests muh_gpu_mixed_batch_tests muh_gpu_green_context_tests muh_gpu_decode_variants_tests muh_cli ) > $L/build-T.log 2>&1
echo "T built rc=$? at $(el) s; $(cat $L/sed-check.txt | tr '\n' ' ')"
grep -h "spill" $L/build-T.log | grep "decode_sm80" | sed 's/.*KVLayoutE\(.\)\(.*\)EEvNS1_10DecodeArgs.*\x27, \(.*\)/sm80 decode L\1 \2: \3/' | sort | uniq -c | head
B=/tmp/bT
ls $B/tests/muh_gpu_decode_tests >/dev/null || { tail -30 $L/build-T.log; tar czf "$OUT/logs4.tgz" -C $L .; exit 1; }
for t in "muh_gpu_decode_tests:*" "muh_gpu_input_guard_tests:*Decode*" "muh_gpu_mixed_batch_tests:*" "muh_gpu_green_context_tests:*" "muh_gpu_decode_variants_tests:*"; do
  exe=${t%%:*}; $B/tests/$exe --gtest_filter="${t#*:}" > $L/$exe.log 2>&1
  echo "$exe rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/$exe.log | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/$exe.log | head -20
done
f='Sweep/DecodeForced.MatchesReference/t90_*_hd256_*:Sweep/DecodeForced.MatchesReference/t90_*_vllm_len1*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 1 $B/tests/muh_gpu_decode_tests --gtest_filter="$f" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -cE '^\[       OK \]' $L/san-$tool.log) OK; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san-$tool.log | tail -1) at $(el) s"
done
tar czf "$OUT/logs4.tgz" -C $L .
mkdir -p $L/seed; $B/muh bench decode --grid seed --emulate bi-v100 --out $L/seed > $L/grid-seed.log 2>&1; echo "seed grid rc=$? at $(el) s"
tar czf "$OUT/logs4.tgz" -C $L .
wait
cells="hd256:1:8192 hd256:1:32768 hd256:16:512 hd256:16:8192 hd256:64:8192 hd256:256:2048"
for n in T A D; do b=/tmp/b$n/muh; mkdir -p $L/nhd-$n
  $b bench decode --only $cells --out $L/nhd-$n > $L/nhd-$n.log 2>&1; echo "nhd $n rc=$? at $(el) s"; done
tar czf "$OUT/logs4.tgz" -C $L .
grep -E "^\| (16|132) \|" $L/grid-seed.log | cut -c1-150
for n in T A D; do echo "== NHD $n"; grep -E "hd256" $L/nhd-$n.log | grep -v "^muh\|wrote" | head -8; done
echo "total $(el) s"
