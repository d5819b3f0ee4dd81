#!/usr/bin/env bash
# Session 2026-12-06 #3, device call 3 (issue 20): the fp8 decode by TMA (unswizzled boxes of
# codes, widened in shared memory) and with fp16 MMAs for bf16 q (q moved into fp16's range by a
# power of two per CTA) — binaries built on the CPU machine from this tree (devrun/fp8c.tar.xz).
# fp8 GPU tests (t80: cp.async, t90: TMA), memcheck/racecheck on TMA cases with partial last tiles,
# muh bench decode --kv-dtype auto,fp8_e4m3 (NHD, vLLM), bench/fp8_decode.py (with FlashInfer);
# beside them (nice 19) a build of the Python extension from source, then the Python GPU suite.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logsH; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; cat $L/env.txt
tar xJf devrun/fp8c.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/fp8c:/usr/local/cuda/lib64
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
B=/tmp/bP
( nice -n 19 bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DMUH_HEAD_DIMS='128;256' -DMUH_DTYPES='fp16;bf16' -DMUH_TARGETS='0;90' -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_BENCH=OFF \
  && cmake --build $B -j16 --target muh_py_core muh_py_torch_ops" > $L/pybuild.log 2>&1; echo "pybuild rc=$?" >> $L/pybuild.log ) &
pb=$!
for t in "muh_gpu_decode_fp8_tests:*"; do
  exe=${t%%:*}; timeout 200 /tmp/fp8c/$exe --gtest_filter="${t#*:}" > $L/$exe.log 2>&1
  echo "$exe rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $L/$exe.log | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' $L/$exe.log | head -12
done
grep -E "Failure|max_err" $L/muh_gpu_decode_fp8_tests.log | head -12
f='*t90_fp8_e4m3_bf16_hd128_vllm_g4_ragged:*t90_fp8_e5m2_fp16_hd256_nhd_g12_ragged:*t90_fp8_e4m3_bf16_hd256_vllm_g4_empty_and_long:*t90_fp8_e5m2_bf16_hd128_nhd_g12_variants:*t90_fp8_e4m3_bf16_hd128_vllm_g4_range_limit'
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 1 /tmp/fp8c/muh_gpu_decode_fp8_tests --gtest_filter="$f" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -cE '^\[       OK \]' $L/san-$tool.log) OK; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san-$tool.log | tail -1) at $(el) s"
done
tar czf "$OUT/logsH.tgz" -C $L .
cells="hd128:1:32768 hd128:16:8192 hd128:64:8192 hd128:256:2048 hd256:1:32768 hd256:16:8192 hd256:64:8192 kv1:1:131072"
for lay in nhd vllm; do
  mkdir -p $L/bench-$lay
  timeout 170 /tmp/fp8c/muh bench decode --kv-layout $lay --only $cells --kv-dtype auto,fp8_e4m3,fp8_e5m2 --out $L/bench-$lay > $L/bench-$lay.log 2>&1
  echo "bench $lay rc=$? at $(el) s"; grep -E "batch +[0-9]+ kv|rror" $L/bench-$lay.log | cut -c1-160
done
tar czf "$OUT/logsH.tgz" -C $L .
export PYTHONPATH=/tmp/fi/site PYTHONDONTWRITEBYTECODE=1
timeout 150 python3 bench/fp8_decode.py --lib /tmp/fp8c/libmuh.so --out $L/py --cells 128:16:8192,128:64:8192,128:256:2048,256:16:8192,256:64:8192 > $L/fp8-py.log 2>&1
echo "fp8_decode.py rc=$? at $(el) s"; grep -E "^hd|rror|FAILED" $L/fp8-py.log | cut -c1-240
tar czf "$OUT/logsH.tgz" -C $L .
wait $pb; echo "$(tail -1 $L/pybuild.log) at $(el) s"
if [ -d $B/python ]; then
  export PYTHONPATH=$B/python; unset LD_LIBRARY_PATH
  timeout $(( 575 - $(el) )) python3 -m pytest -q -p no:cacheprovider tests/python/gpu > $L/pytest.log 2>&1
  echo "pytest rc=$? at $(el) s: $(tail -1 $L/pytest.log)"; grep -E "^FAILED|^ERROR" $L/pytest.log | head -20
else grep -m5 -B2 -A6 error $L/pybuild.log; fi
tar czf "$OUT/logsH.tgz" -C $L .
echo "total $(el) s"
