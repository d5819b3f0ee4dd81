#!/usr/bin/env bash
# Call 2 (after call 1: every test passed, the persistent schedule 1.0-1.19x the same library's
# one-CTA-per-tile path, but that path 3-9 % below the previous session's kernel, most at hd 256).
# Since: a CTA's Q goes first where its buffer is free; each tile's coordinates through shared
# memory; the persistent schedule over paged NHD K/V too (the producer warp guards each tile's
# block-table row). Packs (devrun3): p3 (this tree: tests, library and its install), abA (lean
# library, bf16 hd 64/128/256, targets 0/90/90a: producer 40 / consumers 232 registers, as p3),
# abB (the same with producer 24 / consumers 240), v2lib (the previous session's library).
# FlashInfer's JIT in the background; the tests; compute-sanitizer on the persistent cases; then
# compare_torch.py on p3 with FlashInfer, and A, B, v2 each a process of its own.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
for p in p3 abA abB v2lib; do tar xJf devrun3/$p.tar.xz -C /tmp; done
P=/tmp/p3 L=/tmp/logs; mkdir -p $L
export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee $L/gpu.txt
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
( cd bench && PYTHONPATH=/tmp/fi/site timeout 330 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, torch.bfloat16, torch.bfloat16, hd) for b in ('fa3', 'fa2') for hd in (64, 128, 256)])
" > $L/fi-prebuild.log 2>&1; echo "rc $?" >> $L/fi-prebuild.log ) &
fi_pid=$!
run() {  # run NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout $t "$@" > $L/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|ERROR SUMMARY' $L/$name.log | tr '\n' ' ' | cut -c1-160) last: $(grep -E '^\[ RUN' $L/$name.log | tail -1 | cut -c1-120)"
  grep -E "^\[  FAILED  \]" $L/$name.log | head -8
}
run prefill 90 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*:*Persistent*:*SplitAt4k*'
run paged 100 $P/muh_gpu_paged_prefill_tests --gtest_filter='*t91*:*Persistent*:*Chunked*'
run guard 60 $P/muh_gpu_input_guard_tests
run mixed 60 $P/muh_gpu_mixed_batch_tests
run san_memcheck 60 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_tests --gtest_filter='*Persistent*bf16_hd128*'
run san_memcheck2 60 compute-sanitizer --tool memcheck $P/muh_gpu_prefill_tests --gtest_filter='*Persistent*bf16_hd256*'
run san_racecheck 60 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_tests --gtest_filter='*Persistent*bf16_hd256*'
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -1 $L/fi-prebuild.log)"
cmp() {  # cmp NAME LIBDIR [--flashinfer]
  local name=$1 lib=$2; shift 2
  LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 PYTHONPATH=/tmp/fi/site timeout 120 python3 bench/compare_torch.py --lib $lib/libmuh.so \
    --out $L/$name --tag $name --iters 20 "$@" > $L/compare_$name.log 2>&1
  echo "== $name rc $? at $(el) s"
  grep -E "TFLOP/s; max" $L/compare_$name.log | sed "s/(TFLOP.*//" | awk '{printf "%s %s %s muh %s %s %s; ", $1, $4, $6, $8, $9, $10}'; echo
}
cmp p3 /tmp/p3 --flashinfer
cmp A /tmp/abA
cmp B /tmp/abB
cmp v2 /tmp/v2lib
tar cJf $OUT/logs.tar.xz -C /tmp logs
