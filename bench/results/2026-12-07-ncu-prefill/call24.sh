#!/usr/bin/env bash
# Session 14's third call (carry ["devrun18"]; DL=<s>; pack p18 at devrun18/COMMIT):
#   1. issue 22: where the sm90 agent's time goes on the grid's cells that miss FlashInfer's fa3 —
#      ncu's SpeedOfLight, ComputeWorkloadAnalysis, WarpStateStats (stall reasons, per-warp
#      averages over the whole kernel: producer and consumer warps together) and SchedulerStats
#      on one launch of each (bench/prefill_cell.py through the C ABI, bf16, 16k tokens);
#   2. issue 17: every kernel context_attention_fwd launches on the seed's cells that stay at
#      0.57–0.64x dense (and NHD's and dense's arms beside it), with its duration
#      (bench/paged_prefill.py --ncu).
set -u
source scripts/devcall.sh  # el
DL=${DL:-240}
L=/tmp/logs24; mkdir -p $L; trap 'tar czf $OUT/logs24.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py24 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py24 -j6 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
for cell in "128 32 1024 --causal" "128 32 4096 --causal" "256 16 4096 --causal" "256 16 16384" "128 32 16384 --causal"; do
  set -- $cell
  n=hd$1_h$2_s$3${4:+_causal}
  timeout 60 ncu --kernel-name regex:prefill_sm90 --launch-skip 1 --launch-count 1 $S \
    python3 bench/prefill_cell.py --lib $P/libmuh.so --hd $1 --heads $2 --seq $3 ${4:-} --repeat 2 > $L/ncu_$n.log 2>&1
  echo "ncu $n rc $? at $(el) s: $(grep -E 'Duration|Compute \(SM\) Throughput' $L/ncu_$n.log | head -2 | tr -s ' ' | tr '\n' ' ')"
done
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
for cell in seed:8192:512 seed:32768:2048 serving:0:2048; do
  [ $(( DL - $(el) )) -gt 30 ] || break
  PYTHONPATH=/tmp/py24 timeout 60 ncu --profile-from-start off --metrics gpu__time_duration.sum \
    python3 bench/paged_prefill.py --ncu $cell > $L/timeline_${cell//:/_}.log 2>&1
  echo "timeline $cell rc $? at $(el) s"
  grep -E "^arm|^  [a-z_].*\(|gpu__time_duration" $L/timeline_${cell//:/_}.log | sed -E 's/\(int, int, int\)|Context.*Device [0-9]+//' | cut -c1-150
done
echo "done at $(el) s"
