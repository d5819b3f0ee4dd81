#!/usr/bin/env bash
# Call 4: the rows as committed (hd 64/128: intra-warp-group overlap on; hd 256: off), its A/B
# (an experiment switch, MUH_SM90_OVERLAP, each setting a process of its own, twice, one after the
# other), and bench/compare_torch.py with FlashInfer (fa3, fa2) — whose JIT compiles in the
# background from the start.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/s90d.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90d:/usr/local/cuda/lib64
P=/tmp/s90d
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
export PYTHONPATH=/tmp/fi/site PYTHONDONTWRITEBYTECODE=1
( cd bench && timeout 420 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, torch.bfloat16, torch.bfloat16, hd) for b in ('fa3', 'fa2') for hd in (64, 128, 256)])
" > $OUT/fi-prebuild.log 2>&1 ) &
fi_pid=$!
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv > $OUT/gpu.txt
timeout 100 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*' > $OUT/tests_t90a.log 2>&1; echo "tests rc $? at $(el) s"
tail -2 $OUT/tests_t90a.log; grep -E "FAILED|Failure" $OUT/tests_t90a.log | head -10
for ov in 0 1 0 1; do
  MUH_SM90_OVERLAP=$ov timeout 100 $P/muh bench prefill --no-portable --iters 20 > $OUT/bench_ov$ov.log 2>&1
  echo "== overlap $ov at $(el) s"; grep -E "^muh|^gemm" $OUT/bench_ov$ov.log | awk '{print $3, $4, $6, $7, $8, $10, $(NF-1)}'
done
wait $fi_pid; echo "fi prebuild rc=$? at $(el) s"; grep -E "JIT|prebuild" $OUT/fi-prebuild.log | tail -8
left=$(( 575 - $(el) ))
timeout $left python3 bench/compare_torch.py --lib $P/libmuh.so --out $OUT --tag h200-2026-12-06-sm90 --iters 20 --flashinfer > $OUT/compare.log 2>&1
echo "compare rc $? at $(el) s"; tail -24 $OUT/compare.log
