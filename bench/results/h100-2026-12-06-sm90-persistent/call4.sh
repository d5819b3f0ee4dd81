#!/usr/bin/env bash
# Call 4: racecheck after every consumer thread (not one lane a warp) arrives on the Q buffer's
# "free" barrier (calls 1-2 reported 120-157 racecheck errors: the slot and staged-O reads of the
# other lanes against the next tile's writes). Pack p4 (this tree). Racecheck on the persistent
# cases with one Q buffer (dense hd 256) and two (paged hd 128), then the dense persistent cases.
set -u
tar xJf devrun3/p4.tar.xz -C /tmp; P=/tmp/p4; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name --format=csv,noheader
for f in "muh_gpu_prefill_tests *Persistent*bf16_hd256*" "muh_gpu_paged_prefill_tests *Persistent*bf16_hd128*"; do
  set -- $f
  timeout 45 compute-sanitizer --tool racecheck $P/$1 --gtest_filter="$2" > $OUT/race_$1.log 2>&1
  echo "$1 $2 rc $?: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED)' $OUT/race_$1.log | tr '\n' ' ')"
done
timeout 30 $P/muh_gpu_prefill_tests --gtest_filter='*Persistent*' > $OUT/persistent.log 2>&1
echo "persistent rc $?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/persistent.log | tr '\n' ' ')"
