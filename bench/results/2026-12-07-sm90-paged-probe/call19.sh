#!/usr/bin/env bash
# Session 13's first call, after call18.sh in the same command (carry ["devrun18"]; it leaves the
# pack in /tmp/p18 and the Python extension in /tmp/py18): the sm90 agent's gathered producer for
# paged NHD K/V (cp.async by the whole producer warp group, prefill_sm90.cuh's Sm90KvGather; the
# pack's default) — its forced and persistent-schedule cases, racecheck and memcheck on three —
# and where the paged form loses against the contiguous one on issue 17's serving cells (TMA
# boxes: 0.78x at 8 x (32k + 2048), 0.83x at 8 x (0 + 2048), session 12).
# bench/paged_prefill_probe.py times dense, paged in random and in identity order at page 16, and
# pages of 64 and 128 (one TMA box a key tile and panel, as dense), each paged arm in both
# producer forms; then ncu reads one launch of each arm of the 32k cell (sections below).
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs19; mkdir -p $L; trap 'tar czf $OUT/logs19.tgz -C $L .' EXIT
export LD_LIBRARY_PATH=/tmp/p18:/usr/local/cuda/lib64 PYTHONPATH=/tmp/py18 PYTHONDONTWRITEBYTECODE=1
DL=${DL:-330}
P=/tmp/p18
run paged_t91 100 $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t91_*'
G='*PagedPrefillPersistent*t91_bf16_hd128_nhd_causal_split_p16*:*PagedPrefillForced*t91_fp16_hd256_nhd_noncausal_prefix_p16*:*PagedPrefillForced*t91_bf16_hd128_nhd_causal_split_chunk1_p16*'
run racecheck_gather 50 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$G"
run memcheck_gather 40 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$G"
for c in serving32k serving0; do
  timeout 70 python3 bench/paged_prefill_probe.py --cell $c > $L/probe_$c.log 2>&1
  echo "probe $c rc $? at $(el) s"; grep " us " $L/probe_$c.log; grep -c "bitwise True" $L/probe_$c.log
done
# Where the vLLM layout's context_attention_fwd (prefix part, chunk part, merge) spends its time
# against the one dense call: each arm's kernels (torch.profiler) on the seed's quick cells.
timeout 50 python3 bench/paged_prefill.py --quick --kernels > $L/kernels.log 2>&1
echo "kernels rc $? at $(el) s"; grep -E "in kernels" $L/kernels.log | head -18
left=$(( DL - $(el) - 5 )); [ $left -gt 150 ] && left=150
# The check pass (the reference and one call an arm: 10 launches) skipped; one launch an arm.
[ $left -gt 40 ] && timeout $left ncu -k regex:prefill_sm90 --launch-skip 10 --launch-count 9 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section LaunchStats --section Occupancy python3 bench/paged_prefill_probe.py --cell serving32k --ncu > $L/ncu.log 2>&1
echo "ncu rc $? at $(el) s"
grep -E "prefill_sm90_kernel<|Duration|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Issued Ipc|DRAM Throughput" $L/ncu.log | cut -c1-150 | head -50
echo "done at $(el) s"
