#!/usr/bin/env bash
# call36 (carry ["devrun"]): the vLLM K copies regrouped (quarter warp = 8 slots of one chunk),
# against the same tree without it, both packs built alike (hd 256 fp16, targets 0;90, plain,
# no fp8): kbase = 2d3bb25, knew = 2d3bb25 + the K regroup (the commit after it).
#   1. ncu source page (per SASS instruction: L2 theoretical sectors, excessive) of the vLLM tail
#      kernel, seed 8k + 512, knew — does the K copies' 2x excess of call34 go?
#   2. ncu duration / L2 requests and sectors of the NHD and vLLM tail kernels, both packs;
#   3. timing (prefix_part_ab.py, t90 and the plan, cold L2, median of 30), kbase/knew twice;
#   4. knew: the forced paged-prefill tests (t0, t90), memcheck/racecheck on vLLM many-pages;
#   5. the wide decode row's seed grid once more, off/auto (pack w1), for the device this runs on.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs36; mkdir -p $L; trap 'tar czf $OUT/logs36.tgz -C $L .' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; tail -1 $L/env.txt
for p in kbase knew w1; do [ -d /tmp/$p ] || tar xJf devrun/$p.tar.xz -C /tmp; done
B=/tmp/kbase; N=/tmp/knew; export PYTHONDONTWRITEBYTECODE=1
LD_LIBRARY_PATH=$N:/usr/local/cuda/lib64 timeout 90 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel \
  --launch-skip 1 --launch-count 1 --section SourceCounters --import-source yes -o $L/knew_tail \
  python3 bench/prefix_part_ab.py --lib $N/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_src.log 2>&1
echo "ncu source rc $? at $(el) s"
timeout 60 ncu --import $L/knew_tail.ncu-rep --page source --csv --print-source sass > $L/knew_source_sass.csv 2>/dev/null
echo "source csv $(wc -l < $L/knew_source_sass.csv) lines at $(el) s"; rm -f $L/knew_tail.ncu-rep
M="--metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,smsp__inst_executed.sum"
for side in kbase knew; do
  lib=/tmp/$side
  LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 90 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel --launch-count 2 \
    $M python3 bench/prefix_part_ab.py --lib $lib/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_$side.log 2>&1
  echo "ncu $side rc $? at $(el) s"
  grep -E "KVSource|gpu__time|lts__t_|inst_executed" $L/ncu_$side.log | tr -s ' ' | sed -E 's/.*KVSource\)([0-9]).*/layout \1/' | cut -c1-120
done
for r in 1 2; do
  for side in kbase knew; do
    lib=/tmp/$side
    LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 100 python3 bench/prefix_part_ab.py --lib $lib/libmuh.so \
      --only 8192:512,32768:512,32768:2048 --targets 90,-1 --iters 30 > $L/time_${side}_$r.log 2>&1
    echo "time $side $r rc $? at $(el) s"; grep -E "^(float|bfloat)" $L/time_${side}_$r.log
  done
done
export LD_LIBRARY_PATH=$N:/usr/local/cuda/lib64
run tests 200 $N/muh_gpu_paged_prefill_tests
run memcheck 120 compute-sanitizer --tool memcheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*many_pages*'
run racecheck 150 compute-sanitizer --tool racecheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*many_pages*'
export LD_LIBRARY_PATH=/tmp/w1:/usr/local/cuda/lib64
for n in off1 auto1 off2 auto2; do
  mkdir -p $L/g-$n
  timeout 60 /tmp/w1/muh bench decode --grid seed --emulate bi-v100 --no-portable --wide-row ${n%?} --out $L/g-$n > $L/grid-$n.log 2>&1
  echo "grid $n rc $? at $(el) s"
done
echo "total $(el) s"
