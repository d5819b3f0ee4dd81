#!/usr/bin/env bash
# Session 2026-12-06 #3, device call 1 (issue 20): the fp8 KV-cache decode (sm80 agent, codes
# widened in shared memory) — this working tree. Build (sm_90 SASS, targets 0/80/90, hd 128/256,
# fp16/bf16, fp8 e4m3+e5m2), GPU tests: decode fp8 (every target with an sm80 row, both layouts,
# GQA 4/12, V1 + V2 at 2..7 splits, planned, graph), plain decode (regression), cache ops (fp8
# writes); memcheck/racecheck on fp8 cases; muh bench decode --kv-dtype auto,fp8_e4m3 (NHD and
# vLLM layouts); bench/fp8_decode.py (muh and FlashInfer, bf16 and e4m3 caches, one process).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logsF; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; cat $L/env.txt
# FlashInfer's JIT (bench/fp8_decode.py) compiles in the background while muh builds.
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
export PYTHONPATH=/tmp/fi/site PYTHONDONTWRITEBYTECODE=1
( cd bench && timeout 300 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('decode','fa2',torch.bfloat16,dt,hd) for hd in (128,256) for dt in (torch.bfloat16, torch.float8_e4m3fn)])
" > $L/fi-prebuild.log 2>&1 ) &
fi_pid=$!
B=/tmp/bF
( cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DMUH_HEAD_DIMS="128;256" -DMUH_DTYPES="fp16;bf16" -DMUH_TARGETS="0;80;90" -DMUH_VARIANT_HEAD_DIMS=128 \
    -DMUH_PAGED_PREFILL=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF \
  && cmake --build $B -j16 --target muh_gpu_decode_fp8_tests muh_gpu_decode_tests muh_gpu_cache_ops_tests muh_cli ) > $L/build.log 2>&1
echo "built rc=$? at $(el) s; fp8 decode spills: $(grep -A1 'Sm80Traits.*KVDType)[12]' $L/build.log | grep -c 'bytes spill')"
[ -x $B/tests/muh_gpu_decode_fp8_tests ] || { grep -m8 -B2 -A8 error $L/build.log; tar czf "$OUT/logsF.tgz" -C $L .; exit 1; }
for t in "muh_gpu_decode_fp8_tests:*" "muh_gpu_cache_ops_tests:*" "muh_gpu_decode_tests:*"; do
  exe=${t%%:*}; timeout 200 $B/tests/$exe --gtest_filter="${t#*:}" > $L/$exe.log 2>&1
  echo "$exe rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/$exe.log | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/$exe.log | head -12
done
grep -E "Failure|max_err" $L/muh_gpu_decode_fp8_tests.log | head -12
f='*t90_fp8_e4m3_bf16_hd128_vllm_g4_ragged:*t80_fp8_e5m2_fp16_hd256_nhd_g12_scaled:*t90_fp8_e4m3_fp16_hd256_vllm_g4_empty_and_long:*t90_fp8_e5m2_bf16_hd128_nhd_g12_variants'
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 1 $B/tests/muh_gpu_decode_fp8_tests --gtest_filter="$f" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -cE '^\[       OK \]' $L/san-$tool.log) OK; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san-$tool.log | tail -1) at $(el) s"
done
tar czf "$OUT/logsF.tgz" -C $L .
cells="hd128:1:32768 hd128:16:8192 hd128:64:8192 hd128:256:2048 hd256:1:32768 hd256:16:8192 hd256:64:8192 kv1:1:131072"
for lay in nhd vllm; do
  timeout 150 $B/muh bench decode --kv-layout $lay --only $cells --kv-dtype auto,fp8_e4m3 --out $L/bench-$lay > $L/bench-$lay.log 2>&1
  echo "bench $lay rc=$? at $(el) s"; grep -E "batch +[0-9]+ kv" $L/bench-$lay.log | cut -c1-150
done
tar czf "$OUT/logsF.tgz" -C $L .
wait $fi_pid; echo "fi prebuild rc=$? at $(el) s"; tail -6 $L/fi-prebuild.log
if [ $(el) -lt 470 ]; then
  timeout $(( 560 - $(el) )) python3 bench/fp8_decode.py --lib $B/libmuh.so --out $L/py > $L/fp8-py.log 2>&1
  echo "fp8_decode.py rc=$? at $(el) s"; grep -E "^hd|flashinfer|Error|error" $L/fp8-py.log | cut -c1-260
fi
tar czf "$OUT/logsF.tgz" -C $L .
echo "total $(el) s"
