#!/usr/bin/env bash
# Device call 4: the committed change (HeadsOnN's QKᵀ in 4 accumulator sets) — GPU tests and
# sanitizers; the seed grid (--no-portable) and the default grid's hd-256 NHD cells against the
# base commit 1535bc1 (A), same run, interleaved A T A T; hd-128 NHD cells of T alone.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/env.txt"
lean="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90"
cli="$lean -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16;bf16 -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
L=/tmp/logs4; mkdir -p $L
rm -rf /tmp/sA; mkdir -p /tmp/sA; tar xzf devrun/base.tgz -C /tmp/sA
( cmake -S /tmp/sA -B /tmp/bA $cli && cmake --build /tmp/bA -j3 --target muh_cli ) > $L/build-A.log 2>&1 &
( cmake -S . -B /tmp/bT $lean -DMUH_HEAD_DIMS="128;256" -DMUH_DTYPES="fp16;bf16" -DMUH_TARGETS="0;75;80;90" -DMUH_VARIANT_HEAD_DIMS=128 -DMUH_BUILD_PYTHON=OFF \
  && cmake --build /tmp/bT -j13 --target muh_gpu_decode_tests muh_gpu_input_guard_tests muh_gpu_mixed_batch_tests muh_gpu_green_context_tests muh_gpu_decode_variants_tests muh_cli ) > $L/build-T.log 2>&1
echo "T built rc=$? at $(el) s"
grep -h "spill" $L/build-T.log | grep "decode_sm80" | sed 's/.*KVLayoutE\(.\)\(.*\)EEvNS1_10DecodeArgs.*\x27, \(.*\)/sm80 decode L\1 \2: \3/' | sort | uniq -c | head
B=/tmp/bT
ls $B/tests/muh_gpu_decode_tests >/dev/null || { tail -30 $L/build-T.log; tar czf "$OUT/logs4.tgz" -C $L .; exit 1; }
for t in "muh_gpu_decode_tests:*" "muh_gpu_input_guard_tests:*Decode*" "muh_gpu_mixed_batch_tests:*" "muh_gpu_green_context_tests:*" "muh_gpu_decode_variants_tests:*"; do
  exe=${t%%:*}; $B/tests/$exe --gtest_filter="${t#*:}" > $L/$exe.log 2>&1
  echo "$exe rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/$exe.log | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/$exe.log | head -20
done
f='Sweep/DecodeForced.MatchesReference/t90_*_hd256_vllm_*:Sweep/DecodeForced.MatchesReference/t90_*_hd128_nhd_len1*'
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 1 $B/tests/muh_gpu_decode_tests --gtest_filter="$f" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -cE '^\[       OK \]' $L/san-$tool.log) OK; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san-$tool.log | tail -1) at $(el) s"
done
tar czf "$OUT/logs4.tgz" -C $L .
wait; echo "A built at $(el) s: $(ls /tmp/bA/muh)"
for n in A T A2 T2; do b=/tmp/b${n%2}/muh; mkdir -p $L/g-$n
  $b bench decode --grid seed --emulate bi-v100 --no-portable --out $L/g-$n > $L/grid-$n.log 2>&1; echo "grid $n rc=$? at $(el) s"; done
cells="hd256:1:8192 hd256:1:32768 hd256:16:512 hd256:16:8192 hd256:64:8192 hd256:256:2048"
cells128="hd128:1:8192 hd128:1:32768 hd128:16:512 hd128:16:8192 hd128:64:8192 hd128:256:2048"
for n in A T A2 T2; do b=/tmp/b${n%2}/muh; mkdir -p $L/nhd-$n
  c="$cells"; [ ${n%2} = T ] && c="$cells $cells128"
  $b bench decode --only $c --out $L/nhd-$n > $L/nhd-$n.log 2>&1; echo "nhd $n rc=$? at $(el) s"; done
tar czf "$OUT/logs4.tgz" -C $L .
for x in A T A2 T2; do awk -F'|' '/^\| (16|132) \|/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt; done
awk -F'|' '/^\| (16|132) \|/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-A.log > $L/cells.txt
echo "best: SMs|cell|floor|A|T|A2|T2"; paste -d'|' $L/cells.txt $L/best-A.txt $L/best-T.txt $L/best-A2.txt $L/best-T2.txt
for n in A T A2 T2; do echo "== NHD $n"; grep -E "_(16q_4kv|32q_8kv) batch" $L/nhd-$n.log | cut -c1-90; done
echo "total $(el) s"
