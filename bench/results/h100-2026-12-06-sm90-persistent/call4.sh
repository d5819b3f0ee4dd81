#!/usr/bin/env bash
# Call 4 (written at the end of session 6, not yet run; carry ["devrun3"]): racecheck after every
# consumer thread (not one lane a warp) arrives on the Q buffer's "free" barrier (f5cdebe; calls
# 1-2 reported 120-157 racecheck errors: the slot and staged-O reads of the other lanes against
# the next tile's writes). Pack p4 (f5cdebe's kernels: library, prefill and paged tests) and
# v2lib (session 5's library). Racecheck on the persistent cases with one Q buffer (dense hd 256)
# and two (paged hd 128) — its RACECHECK SUMMARY is the line to read, not ERROR SUMMARY — then
# every persistent case, then ncu on hd 256 16k non-causal, v2 against p4 (this kernel is 3-7 %
# below v2 there, cause open: README).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
for p in p4 v2lib; do tar xJf devrun3/$p.tar.xz -C /tmp; done
P=/tmp/p4; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for f in "muh_gpu_prefill_tests *Persistent*bf16_hd256*" "muh_gpu_paged_prefill_tests *Persistent*bf16_hd128*"; do
  set -- $f
  timeout 60 compute-sanitizer --tool racecheck $P/$1 --gtest_filter="$2" > $OUT/race_$1.log 2>&1
  echo "$1 $2 rc $? at $(el) s: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED)' $OUT/race_$1.log | tr '\n' ' ')"
done
timeout 60 $P/muh_gpu_prefill_tests --gtest_filter='*t90a*:*Persistent*:*SplitAt4k*' > $OUT/prefill.log 2>&1
echo "prefill rc $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $OUT/prefill.log | tr '\n' ' ')"
timeout 200 $P/muh_gpu_paged_prefill_tests --gtest_filter='*Persistent*:*t91*' > $OUT/paged.log 2>&1
echo "paged rc $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $OUT/paged.log | tr '\n' ' ')"
for lib in v2lib p4; do
  LD_LIBRARY_PATH=/tmp/$lib:/usr/local/cuda/lib64 timeout 90 ncu --kernel-name regex:prefill_sm90 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    python3 bench/prefill_cell.py --lib /tmp/$lib/libmuh.so --hd 256 --heads 16 --seq 16384 > $OUT/ncu_$lib.txt 2>&1
  echo "ncu $lib rc $? at $(el) s"; grep -E "gmma|Stall|Issue Slot|Duration|Warp Cycles Per Issued|Eligible" $OUT/ncu_$lib.txt | head -12
done
