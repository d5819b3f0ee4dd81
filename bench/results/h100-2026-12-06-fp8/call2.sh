#!/usr/bin/env bash
# Session 2026-12-06 #3, device call 2 (issue 20): the fp8 decode's speed — binaries built on the
# CPU machine from this tree (devrun/fp8b.tar.xz: libmuh.so, muh; sm_90 SASS, targets 0/80/90,
# hd 128/256, fp16/bf16, fp8 e4m3/e5m2), nothing compiled here. muh bench decode --kv-dtype
# auto,fp8_e4m3 (NHD, vLLM layouts); bench/fp8_decode.py (muh and FlashInfer, bf16 and e4m3
# caches, one process per cell; call 1's run of it met an illegal address in its first cell).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logsG; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; cat $L/env.txt
tar xJf devrun/fp8b.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/fp8b:/usr/local/cuda/lib64
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
export PYTHONPATH=/tmp/fi/site PYTHONDONTWRITEBYTECODE=1
( cd bench && timeout 200 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('decode','fa2',torch.bfloat16,dt,hd) for hd in (128,256) for dt in (torch.bfloat16, torch.float8_e4m3fn)])
" > $L/fi-prebuild.log 2>&1 ) &
fi_pid=$!
M=/tmp/fp8b/muh
$M --version > $L/version.txt 2>&1; echo "pack runs: rc=$? $(head -1 $L/version.txt)"
cells="hd128:1:32768 hd128:16:8192 hd128:64:8192 hd128:256:2048 hd256:1:32768 hd256:16:8192 hd256:64:8192 kv1:1:131072"
for lay in nhd vllm; do
  mkdir -p $L/bench-$lay
  timeout 170 $M bench decode --kv-layout $lay --only $cells --kv-dtype auto,fp8_e4m3 --out $L/bench-$lay > $L/bench-$lay.log 2>&1
  echo "bench $lay rc=$? at $(el) s"; grep -E "batch +[0-9]+ kv|rror" $L/bench-$lay.log | cut -c1-160
done
tar czf "$OUT/logsG.tgz" -C $L .
wait $fi_pid; echo "fi prebuild rc=$? at $(el) s"
timeout $(( 540 - $(el) )) python3 bench/fp8_decode.py --lib /tmp/fp8b/libmuh.so --out $L/py > $L/fp8-py.log 2>&1
echo "fp8_decode.py rc=$? at $(el) s"; grep -E "^hd|first call|rror|FAILED" $L/fp8-py.log | cut -c1-300
tar czf "$OUT/logsG.tgz" -C $L .
echo "total $(el) s"
