#!/usr/bin/env bash
# Session 2026-12-06 #2, device call 2 (issue 20): the sm80 decode agent's variant hooks and the
# window-relative partitions — this working tree. GPU tests: decode variants (every target 0/80/90,
# fp16/bf16, hd 128/256, both layouts, GQA 4 and 12), plain decode (regression of the launch
# refactor), input guard; memcheck/racecheck on variant cases; muh bench decode --variant.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs2; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; cat $L/env.txt
B=/tmp/bV
( cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS="128;256" -DMUH_DTYPES="fp16;bf16" \
    -DMUH_TARGETS="0;80;90" -DMUH_VARIANT_HEAD_DIMS="128;256" -DMUH_PAGED_PREFILL=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF \
  && cmake --build $B -j16 --target muh_gpu_decode_variants_tests muh_gpu_decode_tests muh_gpu_input_guard_tests muh_cli ) > $L/build.log 2>&1
echo "built rc=$? at $(el) s; decode spills: $(grep spill $L/build.log | grep -c decode_sm80)"
ls $B/tests/muh_gpu_decode_variants_tests >/dev/null || { grep -m5 -B2 -A8 error $L/build.log; tar czf "$OUT/logs2.tgz" -C $L .; exit 1; }
for t in "muh_gpu_decode_variants_tests:*" "muh_gpu_decode_tests:*" "muh_gpu_input_guard_tests:*Decode*"; do
  exe=${t%%:*}; timeout 240 $B/tests/$exe --gtest_filter="${t#*:}" > $L/$exe.log 2>&1
  echo "$exe rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/$exe.log | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/$exe.log | head -20
done
grep -E "Failure|max_err|differ" $L/muh_gpu_decode_variants_tests.log | head -20
f='*t90_fp16_hd256_vllm_g4_all_with_empty_seq:*t90_bf16_hd128_nhd_g12_all_with_empty_seq:*t80_fp16_hd128_nhd_g4_win5:*t80_bf16_hd256_vllm_g12_sinks'
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 1 $B/tests/muh_gpu_decode_variants_tests --gtest_filter="$f" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -cE '^\[       OK \]' $L/san-$tool.log) OK; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san-$tool.log | tail -1) at $(el) s"
done
tar czf "$OUT/logs2.tgz" -C $L .
M=$B/muh
run() { n=$1; shift; timeout 120 $M bench decode "$@" > $L/bench-$n.log 2>&1; echo "bench $n rc=$? at $(el) s"; grep -E "batch +[0-9]+ kv" $L/bench-$n.log | cut -c1-150; }
run plainA --only hd128:1:4096 hd128:1:131072 hd128:16:8192 hd256:16:8192 hd128:1:32768
run window --variant window=4095 --only hd128:1:131072 hd128:1:4096
run all --variant softcap=30,sinks,alibi --only hd128:1:4096 hd128:1:131072 hd128:16:8192 hd256:16:8192 hd128:1:32768
run plainB --only hd128:1:4096 hd128:1:131072 hd128:16:8192 hd256:16:8192 hd128:1:32768
run window2 --variant window=4095 --only hd128:1:131072 hd128:16:131072
tar czf "$OUT/logs2.tgz" -C $L .
echo "total $(el) s"
