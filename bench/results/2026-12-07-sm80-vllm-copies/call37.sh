#!/usr/bin/env bash
# call37 (carry ["devrun"]): K tiles chunk-major for vLLM pages (pack kcm: hd 128/256 fp16,
# targets 0;89;90, plain, no fp8) against kbase (2d3bb25: the row-major swizzled K tile; hd 256
# fp16, targets 0;90).
#   1. kcm: every forced paged-prefill case (t0, t89, t90; NHD and vLLM; the key split, chunked ==
#      whole) and the mixed batches; memcheck / racecheck on the vLLM many-pages cases;
#   2. ncu: the vLLM tail kernel's excessive L2 sectors / shared wavefronts (source page), and
#      duration, L2 requests / sectors of both layouts' tail kernels, each pack;
#   3. timing (prefix_part_ab.py, t90 and the plan, cold L2, median of 30), kbase / kcm twice.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs37; mkdir -p $L; trap 'tar czf $OUT/logs37.tgz -C $L .' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1; tail -1 $L/env.txt
for p in kbase kcm; do [ -d /tmp/$p ] || tar xJf devrun/$p.tar.xz -C /tmp; done
B=/tmp/kbase; N=/tmp/kcm; export PYTHONDONTWRITEBYTECODE=1
export LD_LIBRARY_PATH=$N:/usr/local/cuda/lib64
run tests 240 $N/muh_gpu_paged_prefill_tests
run mixed 120 $N/muh_gpu_mixed_batch_tests
run memcheck 150 compute-sanitizer --tool memcheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*vllm*many_pages*'
run racecheck 200 compute-sanitizer --tool racecheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*many_pages*'
LD_LIBRARY_PATH=$N:/usr/local/cuda/lib64 timeout 90 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel \
  --launch-skip 1 --launch-count 1 --section SourceCounters --import-source yes -o $L/kcm_tail \
  python3 bench/prefix_part_ab.py --lib $N/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_src.log 2>&1
echo "ncu source rc $? at $(el) s"
timeout 60 ncu --import $L/kcm_tail.ncu-rep --page source --csv --print-source sass > $L/kcm_source_sass.csv 2>/dev/null
echo "source csv $(wc -l < $L/kcm_source_sass.csv) lines at $(el) s"; rm -f $L/kcm_tail.ncu-rep
M="--metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
for side in kbase kcm; do
  lib=/tmp/$side
  LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 90 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel --launch-count 2 \
    $M python3 bench/prefix_part_ab.py --lib $lib/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_$side.log 2>&1
  echo "ncu $side rc $? at $(el) s"
  grep -E "gpu__time|lts__t_|inst_executed|wavefronts" $L/ncu_$side.log | tr -s ' ' | cut -c1-120
done
for r in 1 2; do
  for side in kbase kcm; do
    lib=/tmp/$side
    LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 100 python3 bench/prefix_part_ab.py --lib $lib/libmuh.so \
      --only 8192:512,32768:512,32768:2048 --targets 90,-1 --iters 30 > $L/time_${side}_$r.log 2>&1
    echo "time $side $r rc $? at $(el) s"; grep -E "^(float|bfloat)" $L/time_${side}_$r.log
  done
done
echo "total $(el) s"
