#!/usr/bin/env bash
# Device call 3 (session 2026-12-06): the committed change (T = this tree: the lane's ldmatrix
# addresses precomputed; at hd 256 the row 4 x 3 with the one-tile overlap, the rescale vote and
# ex2.approx) — GPU tests and sanitizers; the seed grid and the default grid's NHD cells (hd 256
# and hd 128) against the base addac70 (A, devrun/base.tgz), interleaved A T A T; W = T with the
# hd-256 row at 12 warps x 1 stage (no overlap), seed grid and NHD hd-256 cells, for the
# shape-aware row that issue 18 still needs.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs3; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1
lean="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90"
cli="$lean -DMUH_DTYPES=fp16;bf16 -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_PAGED_PREFILL=OFF -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
rm -rf /tmp/sA /tmp/sW; mkdir -p /tmp/sA /tmp/sW; tar xzf devrun/base.tgz -C /tmp/sA
tar cf - --exclude=./devrun --exclude='./build*' . | (cd /tmp/sW && tar xf -)
sed -i 's/{k16Bit, kHd256, Agent::sm80, 4, 64, 3, 1, 128, true, kSmemCap,/{k16Bit, kHd256, Agent::sm80, 12, 192, 1, 1, 192, true, kSmemCap,/' /tmp/sW/include/muh/tuning/tuning_sm90.hpp
sed -i 's/p.num_stages >= 2);/p.num_stages >= 1);/' /tmp/sW/include/muh/tuning/policy.hpp
echo "W row: $(grep -c 'Agent::sm80, 12, 192, 1, 1, 192, true' /tmp/sW/include/muh/tuning/tuning_sm90.hpp)" > $L/sed-check.txt
( cmake -S /tmp/sA -B /tmp/bA $cli "-DMUH_HEAD_DIMS=128;256" && cmake --build /tmp/bA -j3 --target muh_cli ) > $L/build-A.log 2>&1 &
( cmake -S /tmp/sW -B /tmp/bW $cli -DMUH_HEAD_DIMS=256 && cmake --build /tmp/bW -j3 --target muh_cli ) > $L/build-W.log 2>&1 &
( cmake -S . -B /tmp/bT $lean -DMUH_HEAD_DIMS="128;256" -DMUH_DTYPES="fp16;bf16" -DMUH_TARGETS="0;75;80;90" -DMUH_VARIANT_HEAD_DIMS=128 -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF \
  && cmake --build /tmp/bT -j12 --target muh_gpu_decode_tests muh_gpu_input_guard_tests muh_gpu_mixed_batch_tests muh_gpu_green_context_tests muh_gpu_decode_variants_tests muh_cli ) > $L/build-T.log 2>&1
echo "T built rc=$? at $(el) s; $(cat $L/sed-check.txt)"
echo "T sm80 decode spills: $(grep spill $L/build-T.log | grep -c decode_sm80)"
B=/tmp/bT
ls $B/tests/muh_gpu_decode_tests >/dev/null || { grep -m5 -A5 error $L/build-T.log; tar czf "$OUT/logs3.tgz" -C $L .; exit 1; }
for t in "muh_gpu_decode_tests:*" "muh_gpu_input_guard_tests:*Decode*" "muh_gpu_mixed_batch_tests:*" "muh_gpu_green_context_tests:*" "muh_gpu_decode_variants_tests:*"; do
  exe=${t%%:*}; $B/tests/$exe --gtest_filter="${t#*:}" > $L/$exe.log 2>&1
  echo "$exe rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/$exe.log | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/$exe.log | head -20
done
f='Sweep/DecodeForced.MatchesReference/t90_fp16_hd256_*:Sweep/DecodeForced.MatchesReference/t90_*_hd128_nhd_len1*'
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 1 $B/tests/muh_gpu_decode_tests --gtest_filter="$f" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -cE '^\[       OK \]' $L/san-$tool.log) OK; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san-$tool.log | tail -1) at $(el) s"
done
tar czf "$OUT/logs3.tgz" -C $L .
wait; echo "A, W built at $(el) s: $(ls /tmp/bA/muh /tmp/bW/muh 2>&1 | tr '\n' ' '); W spills $(grep spill $L/build-W.log | grep -c decode_sm80)"
for n in A T A2 T2 W; do b=/tmp/b${n%2}/muh; [ -x $b ] || continue; mkdir -p $L/g-$n
  $b bench decode --grid seed --emulate bi-v100 --no-portable --out $L/g-$n > $L/grid-$n.log 2>&1; echo "grid $n rc=$? at $(el) s"; done
cells="hd256:1:8192 hd256:1:32768 hd256:16:512 hd256:16:8192 hd256:64:8192 hd256:256:2048"
cells128="hd128:1:8192 hd128:1:32768 hd128:16:512 hd128:16:8192 hd128:64:8192 hd128:256:2048"
for n in A T A2 T2 W; do b=/tmp/b${n%2}/muh; [ -x $b ] || continue; [ $(el) -lt 560 ] || break
  c="$cells $cells128"; [ $n = W ] && c="$cells"
  $b bench decode --only $c > $L/nhd-$n.log 2>&1; echo "nhd $n rc=$? at $(el) s"; done
tar czf "$OUT/logs3.tgz" -C $L .
for x in A T A2 T2 W; do awk -F'|' '/^\| (16|132) \|/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt 2>/dev/null; done
awk -F'|' '/^\| (16|132) \|/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-T.log > $L/cells.txt
echo "best: SMs|cell|floor|A|T|A2|T2|W"; paste -d'|' $L/cells.txt $L/best-A.txt $L/best-T.txt $L/best-A2.txt $L/best-T2.txt $L/best-W.txt
for n in A T A2 T2 W; do echo "== NHD $n"; grep -E "_(16q_4kv|32q_8kv) batch" $L/nhd-$n.log | cut -c1-62; done
echo "total $(el) s"
