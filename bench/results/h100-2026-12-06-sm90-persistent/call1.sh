#!/usr/bin/env bash
# Call 1: the sm90 agent's persistent schedule (a CTA per SM taking q tiles from a counter in the
# plan's workspace; the K/V ring and two Q buffers — one at hd 256 — running on from tile to
# tile). Pack devrun/p1 (this change, built on the CPU machine: targets 0/90/90a, hd 64/128/256,
# fp16/bf16, paged, variants) and devrun/v2 (the previous session's final build, for the A/B).
# FlashInfer's JIT in the background from the start; the GPU tests; compute-sanitizer on the new
# schedule; then compare_torch.py with FlashInfer on p1 (its "muh-whole" column: the same library
# without a workspace, one CTA per q tile, interleaved in the same process), and on v2.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xJf devrun/p1.tar.xz -C /tmp; tar xJf devrun/v2.tar.xz -C /tmp
P=/tmp/p1 L=/tmp/logs; mkdir -p $L
export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee $L/gpu.txt
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
( cd bench && PYTHONPATH=/tmp/fi/site timeout 400 python3 -c "
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
run prefill 200 $P/muh_gpu_prefill_tests
run paged 150 $P/muh_gpu_paged_prefill_tests --gtest_filter='-*/t0_*:*/t90_*'
run variants_t91 60 $P/muh_gpu_prefill_variants_tests --gtest_filter='*t90a*:*t91*'
run mixed 60 $P/muh_gpu_mixed_batch_tests
run guard 60 $P/muh_gpu_input_guard_tests
run san_memcheck 90 compute-sanitizer --tool memcheck $P/muh_gpu_prefill_tests --gtest_filter='*Persistent*bf16_hd128*:*Persistent*fp16_hd64*'
run san_racecheck 90 compute-sanitizer --tool racecheck $P/muh_gpu_prefill_tests --gtest_filter='*Persistent*bf16_hd128*'
run san_synccheck 60 compute-sanitizer --tool synccheck $P/muh_gpu_prefill_tests --gtest_filter='*Persistent*bf16_hd256*'
run san_paged 60 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_tests --gtest_filter='*t91_bf16_hd128_nhd*'
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -1 $L/fi-prebuild.log)"
export PYTHONPATH=/tmp/fi/site
timeout 240 python3 bench/compare_torch.py --lib $P/libmuh.so --out $L --tag persistent --iters 20 --flashinfer > $L/compare_p1.log 2>&1
echo "compare p1 rc $? at $(el) s"; grep -E "^hd[0-9]+ h[0-9/]+ seq [0-9]+ (non-)?causal: muh" $L/compare_p1.log
left=$(( 560 - $(el) )); [ $left -gt 150 ] && left=150
[ $left -gt 40 ] && LD_LIBRARY_PATH=/tmp/v1:/usr/local/cuda/lib64 timeout $left python3 bench/compare_torch.py --lib /tmp/v1/libmuh.so --out /tmp/v2out --tag before --iters 20 > $L/compare_v2.log 2>&1
echo "compare v2 rc $? at $(el) s"; grep -E "^hd[0-9]+ h[0-9/]+ seq [0-9]+ (non-)?causal: muh" $L/compare_v2.log | awk '{print $1,$2,$4,$5,$7,$8}'
tar cJf $OUT/logs.tar.xz -C /tmp logs
