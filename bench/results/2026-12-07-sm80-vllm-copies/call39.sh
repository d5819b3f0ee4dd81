#!/usr/bin/env bash
# call39 (carry ["devrun"]): V tiles in 16-key runs for vLLM pages (pack vrun: hd 128/256 fp16,
# targets 0;89;90, plain, no fp8; sm80_load_v_runs) against kpy (the V tile dim-major; hd 256 fp16,
# targets 0;90;90a).
#   1. vrun: every forced paged-prefill case (t0, t89, t90; NHD and vLLM pages of 8–528 slots, 24
#      new) and the mixed batches; memcheck / racecheck on the vLLM many-pages cases;
#   2. ncu: the vLLM tail kernel's source page (the V copy's shared wavefronts), and duration,
#      L2 requests / sectors, shared wavefronts of both packs' vLLM tail kernels;
#   3. timing (prefix_part_ab.py, t90, cold L2, median of 30), kpy / vrun twice, pages of 16; once
#      at pages of 64 (the runs' copies are 4 sectors a quarter warp there, the dim-major one line).
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs39; mkdir -p $L; trap 'tar czf $OUT/logs39.tgz -C $L .' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; tail -1 $L/env.txt
for p in kpy vrun; do [ -d /tmp/$p ] || tar xJf devrun/$p.tar.xz -C /tmp; done
B=/tmp/kpy; N=/tmp/vrun; export PYTHONDONTWRITEBYTECODE=1
export LD_LIBRARY_PATH=$N:/usr/local/cuda/lib64
run tests 240 $N/muh_gpu_paged_prefill_tests
run mixed 120 $N/muh_gpu_mixed_batch_tests
run memcheck 150 compute-sanitizer --tool memcheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*vllm*many_pages*'
run racecheck 150 compute-sanitizer --tool racecheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*many_pages*'
timeout 90 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel \
  --launch-skip 1 --launch-count 1 --section SourceCounters --import-source yes -o $L/vrun_tail \
  python3 bench/prefix_part_ab.py --lib $N/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_src.log 2>&1
echo "ncu source rc $? at $(el) s"
timeout 60 ncu --import $L/vrun_tail.ncu-rep --page source --csv --print-source sass > $L/vrun_source_sass.csv 2>/dev/null
echo "source csv $(wc -l < $L/vrun_source_sass.csv) lines at $(el) s"; rm -f $L/vrun_tail.ncu-rep
M="--metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
for side in kpy vrun; do
  lib=/tmp/$side
  LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 90 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel --launch-count 2 \
    $M python3 bench/prefix_part_ab.py --lib $lib/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_$side.log 2>&1
  echo "ncu $side rc $? at $(el) s"
  grep -E "gpu__time|lts__t_|inst_executed|wavefronts" $L/ncu_$side.log | tr -s ' ' | cut -c1-120
done
for r in 1 2; do
  for side in kpy vrun; do
    lib=/tmp/$side
    LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 100 python3 bench/prefix_part_ab.py --lib $lib/libmuh.so \
      --only 8192:512,32768:512,32768:2048 --targets 90 --iters 30 > $L/time_${side}_$r.log 2>&1
    echo "time $side $r rc $? at $(el) s"; grep -E "^(float|bfloat)" $L/time_${side}_$r.log
  done
done
for side in kpy vrun; do
  lib=/tmp/$side
  LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 60 python3 bench/prefix_part_ab.py --lib $lib/libmuh.so \
    --only 8192:512,32768:512 --targets 90 --iters 30 --page 64 > $L/time64_${side}.log 2>&1
  echo "time p64 $side rc $? at $(el) s"; grep -E "^(float|bfloat)" $L/time64_${side}.log
done
echo "total $(el) s"
