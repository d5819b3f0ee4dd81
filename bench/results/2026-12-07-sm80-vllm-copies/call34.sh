#!/usr/bin/env bash
# call34 (carry ["devrun18"]): which SASS instructions of the sm80 key split's vLLM kernel make
# the 2,129,920 excessive L2 sectors (calls 31-33) — ncu's source page (SASS, per instruction),
# seed 8k + 512, t90, pack p18, as CSV read on the CPU machine.
set -u
source scripts/devcall.sh  # el
L=/tmp/logs34; mkdir -p $L; trap 'tar czf $OUT/logs34.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
export PYTHONDONTWRITEBYTECODE=1 LD_LIBRARY_PATH=/tmp/p18:/usr/local/cuda/lib64
timeout 90 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel --launch-skip 1 --launch-count 1 \
  --section SourceCounters --import-source yes -o $L/vllm_tail \
  python3 bench/prefix_part_ab.py --lib /tmp/p18/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_run.log 2>&1
echo "ncu rc $? at $(el) s"; tail -2 $L/ncu_run.log | cut -c1-200
timeout 60 ncu --import $L/vllm_tail.ncu-rep --page source --csv --print-source sass > $L/source_sass.csv 2>$L/source_err.log
echo "source rc $? at $(el) s: $(wc -l < $L/source_sass.csv) lines"; head -1 $L/source_sass.csv | cut -c1-600
rm -f $L/vllm_tail.ncu-rep.tmp; echo "done at $(el) s"
