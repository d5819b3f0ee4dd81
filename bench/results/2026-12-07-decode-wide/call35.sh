#!/usr/bin/env bash
# call35 (carry ["devrun", "devrun18"]): the wide decode row (1ce25f9, pack devrun/w1: hd 256,
# fp16/bf16, targets 0;90, plain kind, no fp8, no paged prefill) — GPU tests (every forced decode
# policy with the new *_wide cases, DecodeWide.*, the green-context test, the decode input guard,
# mixed batches), memcheck/racecheck on the wide cases, `muh verify --quick`, and the seed grid on
# 132 SMs and a 16-SM green partition with the plan's wide row off (= the committed 4 x 3 row) and
# auto, interleaved off/auto three times (one binary). Then issue 17's call34 (pack p18).
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs35; mkdir -p $L; trap 'tar czf $OUT/logs35.tgz -C $L .' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1
cat $L/env.txt | tail -1
tar xJf devrun/w1.tar.xz -C /tmp && P=/tmp/w1
export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64
run decode 240 $P/muh_gpu_decode_tests
run green 60 $P/muh_gpu_green_context_tests
run guard 120 $P/muh_gpu_input_guard_tests --gtest_filter='*Decode*'
run mixed 120 $P/muh_gpu_mixed_batch_tests
f='Sweep/DecodeForced.MatchesReference/*_wide:DecodeWide.*'
run memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 1 $P/muh_gpu_decode_tests --gtest_filter="$f"
run racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 1 $P/muh_gpu_decode_tests --gtest_filter="$f"
timeout 120 $P/muh verify --quick > $L/verify.log 2>&1; echo "verify rc $? at $(el) s: $(tail -1 $L/verify.log | cut -c1-200)"
for n in off1 auto1 off2 auto2 off3 auto3; do
  mkdir -p $L/g-$n
  timeout 120 $P/muh bench decode --grid seed --emulate bi-v100 --no-portable --wide-row ${n%?} --out $L/g-$n > $L/grid-$n.log 2>&1
  echo "grid $n rc $? at $(el) s"
done
for n in off1 auto1; do echo "== $n"; grep -E '^\| (16|132) \|' $L/grid-$n.log | cut -d'|' -f2,4,6,7,9; done
tar czf $OUT/logs35.tgz -C $L .
# Issue 17 (call34): ncu's source page of the sm80 key split's vLLM kernel, pack p18.
[ $(el) -lt 420 ] || { echo "no time left for call34 at $(el) s"; exit 0; }
L34=/tmp/logs34; mkdir -p $L34
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
LD_LIBRARY_PATH=/tmp/p18:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1 timeout 90 ncu \
  --kernel-name regex:prefill_sm80_paged_tail_kernel --launch-skip 1 --launch-count 1 \
  --section SourceCounters --import-source yes -o $L34/vllm_tail \
  python3 bench/prefix_part_ab.py --lib /tmp/p18/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L34/ncu_run.log 2>&1
echo "ncu rc $? at $(el) s"; tail -2 $L34/ncu_run.log | cut -c1-200
timeout 60 ncu --import $L34/vllm_tail.ncu-rep --page source --csv --print-source sass > $L34/source_sass.csv 2>$L34/source_err.log
echo "source rc $? at $(el) s: $(wc -l < $L34/source_sass.csv) lines"
rm -f $L34/vllm_tail.ncu-rep.tmp; tar czf $OUT/logs34.tgz -C $L34 .
echo "total $(el) s"
