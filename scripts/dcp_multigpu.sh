#!/usr/bin/env bash
# dcp_multigpu.sh — issue 21's multi-GPU half: the torchrun tests of muh.distributed
# (tests/python/multigpu/test_dcp_torchrun.py) and the decode-context-parallel benchmark
# (python/benchmarks/dcp_decode.py) on 2, 4 and 8 GPUs (those the machine has), plus the
# benchmark's one-GPU baseline. NVLink multicast stays off: the device machines need
# NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (set here for every launch).
#
# usage: scripts/dcp_multigpu.sh [BUILD_DIR]      (default: build; a build with the torch ops,
#        e.g. configured with -DPython_EXECUTABLE=<python with torch> -DMUH_HEAD_DIMS="128;256")
# Environment: OUT (results and logs, default ./device-out), DCP_WORLDS (default "2 4 8"),
#              DCP_BENCH_ARGS (extra arguments for dcp_decode.py, e.g. "--reps 100").
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
case "$B" in /*) ;; *) B="$PWD/$B" ;; esac
export PYTHONPATH="$B/python${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
tag="$(date -u +%Y-%m-%d)-$(git rev-parse --short HEAD 2>/dev/null || echo nogit)"
echo "GPUs: $gpus; PYTHONPATH=$PYTHONPATH; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST"
status=0
# The one-GPU baseline (the whole sequence on one H200).
$PY -m torch.distributed.run --standalone --nproc-per-node 1 python/benchmarks/dcp_decode.py \
    --csv "$OUT/dcp-h200-1gpu-$tag.csv" --json "$OUT/dcp-h200-1gpu-$tag.json" ${DCP_BENCH_ARGS:-} \
    >"$OUT/dcp-bench-1gpu.log" 2>&1 || status=1
tail -n 12 "$OUT/dcp-bench-1gpu.log"
for n in ${DCP_WORLDS:-2 4 8}; do
  if [ "$n" -gt "$gpus" ]; then echo "skip N=$n: only $gpus GPUs"; continue; fi
  echo "== N=$n: tests"
  $PY -m torch.distributed.run --standalone --nproc-per-node "$n" -m pytest -q -p no:cacheprovider \
      tests/python/multigpu/test_dcp_torchrun.py >"$OUT/dcp-tests-${n}gpu.log" 2>&1 || status=1
  grep -E "passed|failed|skipped|error" "$OUT/dcp-tests-${n}gpu.log" | tail -n "$n"
  echo "== N=$n: benchmark"
  $PY -m torch.distributed.run --standalone --nproc-per-node "$n" python/benchmarks/dcp_decode.py \
      --csv "$OUT/dcp-h200-${n}gpu-$tag.csv" --json "$OUT/dcp-h200-${n}gpu-$tag.json" ${DCP_BENCH_ARGS:-} \
      >"$OUT/dcp-bench-${n}gpu.log" 2>&1 || status=1
  grep -vE "^\[|Warning|warn" "$OUT/dcp-bench-${n}gpu.log" | tail -n 16
done
exit $status
