#!/usr/bin/env bash
# Session 2026-12-06 #2, device call 1: pairs.patch (issue 18; two warps per ring at hd 256, the
# TMA heads-on-N kernel) — first GPU run. P = b34c5a6 + pairs.patch: decode tests at hd 256
# (fp16/bf16, targets 0/90), input guard, green context, sanitizers (memcheck, racecheck,
# synccheck) on t90 hd-256 cases; seed grid and NHD hd-256 cells against T = b34c5a6 (devrun/head.tgz), T P T P.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs1; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1
cat $L/env.txt
lean="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16;bf16 -DMUH_TARGETS=0;90 -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
cli="$lean -DMUH_VARIANTS=plain -DMUH_PAGED_PREFILL=OFF -DMUH_BUILD_TESTS=OFF"
rm -rf /tmp/sT /tmp/sP; mkdir -p /tmp/sT /tmp/sP
tar xzf devrun/head.tgz -C /tmp/sT; tar xzf devrun/head.tgz -C /tmp/sP   # b34c5a6 (git archive HEAD)
(cd /tmp/sP && { patch -p1 < bench/results/h200-2026-12-06-tile-pipeline/pairs.patch || git apply bench/results/h200-2026-12-06-tile-pipeline/pairs.patch; }) > $L/patch.log 2>&1; echo "patch rc=$?"
( cmake -S /tmp/sT -B /tmp/bT $cli && cmake --build /tmp/bT -j5 --target muh_cli ) > $L/build-T.log 2>&1 &
( cmake -S /tmp/sP -B /tmp/bP $lean -DMUH_VARIANT_HEAD_DIMS=256 \
  && cmake --build /tmp/bP -j11 --target muh_gpu_decode_tests muh_gpu_input_guard_tests muh_gpu_green_context_tests muh_cli ) > $L/build-P.log 2>&1
echo "P built rc=$? at $(el) s; sm80 decode spills: $(grep spill $L/build-P.log | grep decode_sm80 | grep -vc ' 0 bytes spill')"
B=/tmp/bP
ls $B/tests/muh_gpu_decode_tests >/dev/null || { grep -m5 -A5 error $L/build-P.log; tar czf "$OUT/logs1.tgz" -C $L .; exit 1; }
for t in "muh_gpu_decode_tests:*" "muh_gpu_input_guard_tests:*Decode*" "muh_gpu_green_context_tests:*"; do
  exe=${t%%:*}; timeout 200 $B/tests/$exe --gtest_filter="${t#*:}" > $L/$exe.log 2>&1
  echo "$exe rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/$exe.log | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/$exe.log | head -20
done
f='Sweep/DecodeForced.MatchesReference/t90_*_hd256_*'
$B/tests/muh_gpu_decode_tests --gtest_list_tests --gtest_filter="$f" | grep -c '^  ' > $L/san-cases.txt
for tool in racecheck synccheck memcheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 1 $B/tests/muh_gpu_decode_tests --gtest_filter="$f" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -cE '^\[       OK \]' $L/san-$tool.log)/$(cat $L/san-cases.txt) OK; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san-$tool.log | tail -1) at $(el) s"
done
tar czf "$OUT/logs1.tgz" -C $L .
wait; echo "T built at $(el) s: $(ls /tmp/bT/muh 2>&1)"
for n in T P T2 P2; do b=/tmp/b${n%2}/muh; [ -x $b ] || continue; [ $(el) -lt 480 ] || break; mkdir -p $L/g-$n
  $b bench decode --grid seed --emulate bi-v100 --no-portable --out $L/g-$n > $L/grid-$n.log 2>&1; echo "grid $n rc=$? at $(el) s"; done
cells="hd256:1:8192 hd256:1:32768 hd256:16:512 hd256:16:8192 hd256:64:8192 hd256:256:2048"
for n in T P; do b=/tmp/b${n%2}/muh; [ -x $b ] || continue; [ $(el) -lt 540 ] || break
  $b bench decode --only $cells > $L/nhd-$n.log 2>&1; echo "nhd $n rc=$? at $(el) s"; done
for x in T P T2 P2; do awk -F'|' '/^\| (16|132) \|/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt 2>/dev/null; done
awk -F'|' '/^\| (16|132) \|/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-T.log > $L/cells.txt
echo "best: SMs|cell|floor|T|P|T2|P2"; paste -d'|' $L/cells.txt $L/best-T.txt $L/best-P.txt $L/best-T2.txt $L/best-P2.txt
for n in T P; do echo "== NHD $n"; grep -E "_(16q_4kv|32q_8kv) batch" $L/nhd-$n.log | cut -c1-62; done
tar czf "$OUT/logs1.tgz" -C $L .
echo "total $(el) s"
