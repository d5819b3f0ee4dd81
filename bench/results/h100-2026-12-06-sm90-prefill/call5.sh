#!/usr/bin/env bash
# Call 5: the persistent sm90 agent (one CTA per SM walking q tiles; the K/V ring running on
# across tiles, the next tile's first K/V loaded during the epilogue) — forced tests, then the
# grid against the peers (compare_torch.py --flashinfer; FlashInfer's JIT in the background from
# the start), then ncu on two cells that miss.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/s90e.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90e:/usr/local/cuda/lib64
P=/tmp/s90e
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
export PYTHONPATH=/tmp/fi/site PYTHONDONTWRITEBYTECODE=1
( cd bench && timeout 400 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, torch.bfloat16, torch.bfloat16, hd) for b in ('fa3', 'fa2') for hd in (64, 128, 256)])
" > $OUT/fi-prebuild.log 2>&1 ) &
fi_pid=$!
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv > $OUT/gpu.txt; cat $OUT/gpu.txt
timeout 150 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*' > $OUT/tests_t90a.log 2>&1; echo "tests rc $? at $(el) s"
tail -2 $OUT/tests_t90a.log; grep -E "FAILED|Failure" $OUT/tests_t90a.log | head -10
if grep -q "FAILED\|Failure" $OUT/tests_t90a.log || ! grep -q PASSED $OUT/tests_t90a.log; then kill $fi_pid; exit 1; fi
timeout 60 $P/muh bench prefill --no-portable --iters 20 --target 90 > $OUT/bench.log 2>&1
echo "bench at $(el) s"; grep -E "^muh|^t90|^gemm" $OUT/bench.log | awk '{print $1, $5, $6, $7, $8, $9, $(NF-1)}'
wait $fi_pid; echo "fi prebuild rc=$? at $(el) s"; grep -E "prebuild" $OUT/fi-prebuild.log | tail -2
timeout 200 python3 bench/compare_torch.py --lib $P/libmuh.so --out $OUT --tag h200-2026-12-06-sm90-persistent --iters 20 --flashinfer > $OUT/compare.log 2>&1
echo "compare rc $? at $(el) s"; tail -21 $OUT/compare.log
for cell in "--hd 128 --heads 32 --seq 4096 --causal" "--hd 256 --heads 16 --seq 4096"; do
  name=$(echo $cell | tr -d ' -')
  timeout 90 ncu --kernel-name regex:prefill_sm90 --launch-count 1 --section WarpStateStats --section ComputeWorkloadAnalysis \
    --section SpeedOfLight --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    python3 bench/prefill_cell.py --lib $P/libmuh.so $cell > $OUT/ncu_$name.txt 2>&1
  echo "ncu $name rc $? at $(el) s"; grep -E "gmma|Stall|Issue Slot|Compute \(SM\)|Duration" $OUT/ncu_$name.txt | head -14
done
