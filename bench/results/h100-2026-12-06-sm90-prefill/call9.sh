#!/usr/bin/env bash
# Call 9: hd 64 with three consumer groups (192 q rows, 16 warps, 160 registers a consumer
# thread; no overlap) A/B'd against the row's 128 rows (MUH_SM90_HD64_192, an experiment switch,
# each setting a process of its own, twice, in turn): forced tests, compare_torch.py (no FlashInfer).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/s90h.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/s90h:/usr/local/cuda/lib64
P=/tmp/s90h
nvidia-smi --query-gpu=name --format=csv,noheader
MUH_SM90_HD64_192=1 timeout 60 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*hd64*' > $OUT/tests_192.log 2>&1; echo "tests 192 rc $? at $(el) s: $(tail -1 $OUT/tests_192.log)"
grep -E "^\[  FAILED" $OUT/tests_192.log | head -5
if grep -q "PASSED" $OUT/tests_192.log && ! grep -q FAILED $OUT/tests_192.log; then
  for x in 0 1 0 1; do
    MUH_SM90_HD64_192=$x timeout 60 python3 bench/compare_torch.py --lib $P/libmuh.so --out $OUT/c$x --tag x --iters 20 --sm80-target -1 > $OUT/compare_$x.log 2>&1
    echo "== 192 $x at $(el) s: $(grep -E '^hd64 h32/32' $OUT/compare_$x.log | grep TFLOP | awk '{print $8}' | tr '\n' ' ') | hd128 4k: $(grep -E '^hd128 h32/32 seq 4096 b4 non' $OUT/compare_$x.log | awk '{print $8}')"
  done
fi
