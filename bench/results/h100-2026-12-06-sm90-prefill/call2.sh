#!/usr/bin/env bash
# Call 2: the sm90 agent with the intra-warp-group overlap (QKᵀ of tile i beside PV of tile i − 1)
# and the exact rescale skip — forced tests, `muh bench prefill` against sm_90's row, and
# bench/compare_torch.py (SDPA FLASH / CUDNN / EFFICIENT, the GEMM, muh with target 90 forced).
set -u
tar xJf devrun/s90b.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90b:/usr/local/cuda/lib64
P=/tmp/s90b
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 120 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*' > $OUT/tests_t90a.log 2>&1; echo "tests rc $?" >> $OUT/tests_t90a.log
tail -3 $OUT/tests_t90a.log; grep -E "FAILED|Failure" $OUT/tests_t90a.log | head -20
if grep -q "PASSED" $OUT/tests_t90a.log && ! grep -q "FAILED" $OUT/tests_t90a.log; then
  timeout 150 $P/muh bench prefill --no-portable --iters 20 --target 90 --out $OUT > $OUT/bench.log 2>&1
  grep -E "^muh|^t90|^gemm" $OUT/bench.log
  timeout 280 python3 bench/compare_torch.py --lib $P/libmuh.so --out $OUT --tag h100-call2 --iters 20 > $OUT/compare.log 2>&1
  tail -22 $OUT/compare.log
fi
