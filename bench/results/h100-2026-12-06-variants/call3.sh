#!/usr/bin/env bash
# Session 2026-12-06 #2, device call 3 (issue 20): the Python GPU suite after the decode variants
# moved to the sm80 agent (vLLM drop-in alibi, flash_attn_varlen_func's paged window/sinks), and
# the variants' cost in prefill (muh bench prefill --variant ...) and decode (bench decode
# --variant, as call 2) — this working tree (committed).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs3; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; cat $L/env.txt
B=/tmp/bY
( cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS="128;256" -DMUH_DTYPES="fp16;bf16" \
    -DMUH_TARGETS="0;90" -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_BENCH=OFF \
  && cmake --build $B -j16 --target muh_cli muh_py_core muh_py_torch_ops ) > $L/build.log 2>&1
echo "built rc=$? at $(el) s"
[ -x $B/muh ] || { grep -m5 -B2 -A8 error $L/build.log; tar czf "$OUT/logs3.tgz" -C $L .; exit 1; }
export PYTHONPATH=$B/python PYTHONDONTWRITEBYTECODE=1
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/python/gpu > $L/pytest.log 2>&1
echo "pytest rc=$? at $(el) s: $(tail -1 $L/pytest.log)"; grep -E "^FAILED|^ERROR" $L/pytest.log | head -20
tar czf "$OUT/logs3.tgz" -C $L .
timeout 200 $B/muh bench prefill --no-portable --variant softcap=50 --variant alibi --variant sinks --variant window=1024 --out $L > $L/bench-prefill.log 2>&1
echo "bench prefill rc=$? at $(el) s"; grep -E "^(muh|whole|v:)" $L/bench-prefill.log | cut -c1-120
run() { n=$1; shift; timeout 100 $B/muh bench decode "$@" > $L/bench-$n.log 2>&1; echo "bench $n rc=$? at $(el) s"; grep -E "batch +[0-9]+ kv" $L/bench-$n.log | cut -c1-110; }
run plainA --only hd128:1:4096 hd128:1:131072 hd128:16:8192 hd256:16:8192 hd128:1:32768
run window --variant window=4095 --only hd128:1:131072 hd128:16:131072
run all --variant softcap=30,sinks,alibi --only hd128:1:4096 hd128:1:131072 hd128:16:8192 hd256:16:8192 hd128:1:32768
run plainB --only hd128:1:4096 hd128:1:131072 hd128:16:8192 hd256:16:8192 hd128:1:32768
tar czf "$OUT/logs3.tgz" -C $L .
echo "total $(el) s"
