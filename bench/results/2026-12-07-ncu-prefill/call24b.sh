#!/usr/bin/env bash
# call24's cells again for the stall reasons, which WarpStateStats does not print in the CLI's
# details page: the per-reason metrics (warps stalled on a reason per issued instruction, averaged
# over every warp — producer warps included) and the tensor pipe's activity (carry ["devrun18"]).
set -u
source scripts/devcall.sh  # el
L=/tmp/logs24b; mkdir -p $L; trap 'tar czf $OUT/logs24b.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|sm__pipe_tensor_op_hmma_cycles_active\.avg\.pct_of_peak_sustained_active|sm__inst_executed_pipe_tensor_op_gmma\.avg\.pct_of_peak_sustained_active|sm__pipe_tensor_op_gmma_cycles_active\.avg\.pct_of_peak_sustained_active|gpu__time_duration\.sum|sm__throughput\.avg\.pct_of_peak_sustained_elapsed"
for cell in "128 32 1024 --causal" "128 32 4096 --causal" "256 16 4096 --causal" "256 16 16384" "128 32 16384 --causal"; do
  set -- $cell
  n=hd$1_h$2_s$3${4:+_causal}
  timeout 60 ncu --kernel-name regex:prefill_sm90 --launch-skip 1 --launch-count 1 --metrics "$M" \
    python3 bench/prefill_cell.py --lib $P/libmuh.so --hd $1 --heads $2 --seq $3 ${4:-} --repeat 2 > $L/stall_$n.log 2>&1
  echo "== $n rc $? at $(el) s"
  grep -E "gmma|duration|sm__throughput|stalled" $L/stall_$n.log | awk '{v=$NF; if (v+0 >= 0.05 || $1 ~ /gmma|duration|throughput/) print "  " $1, v}' \
    | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//'
done
echo "done at $(el) s"
