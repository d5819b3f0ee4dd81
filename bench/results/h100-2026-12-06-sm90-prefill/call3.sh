#!/usr/bin/env bash
# Call 3: K and V freed apart (K_i after QKᵀ_i, V_i after PV_i), and the ping-pong of the two
# consumer groups A/B'd (an experiment switch, MUH_SM90_PINGPONG, read at the first launch;
# each setting a process of its own, one after the other on this machine). Forced tests first
# (hd 64 / 128 / 256, the new GQA-6 case), under both settings.
set -u
tar xJf devrun/s90c.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90c:/usr/local/cuda/lib64
P=/tmp/s90c
for pp in 0 1; do
  MUH_SM90_PINGPONG=$pp timeout 100 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*' > $OUT/tests_t90a_pp$pp.log 2>&1; echo "tests pp$pp rc $?"
  tail -2 $OUT/tests_t90a_pp$pp.log; grep -E "FAILED|Failure" $OUT/tests_t90a_pp$pp.log | head -10
done
if ! grep -q "FAILED" $OUT/tests_t90a_pp*.log; then
  for pp in 0 1 0 1; do
    MUH_SM90_PINGPONG=$pp timeout 100 $P/muh bench prefill --no-portable --iters 20 > $OUT/bench_pp$pp.log 2>&1
    echo "== pp $pp"; grep -E "^muh|^gemm" $OUT/bench_pp$pp.log | awk '{print $3, $4, $5, $6, $7, $8, $(NF-1)}'
  done
fi
