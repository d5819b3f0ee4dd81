#!/usr/bin/env bash
# call32 (carry ["devrun18", "devrun"]): the sm80 agent's vLLM-page copies, fixed, against base.
# call31 found the sm80 key split's vLLM kernel reading 1.74x the L2 sectors of its NHD twin in
# 7x the requests: a 16-byte copy goes out 8 lanes at a time, one L2 request per 128-byte line an
# 8-lane group touches, and on vLLM pages each group of the K copies took 8 chunks of one row
# (8 lines, each sector fetched by two groups) and each of the V copies one dim over 4 pages.
#   base = pack p18 (devrun18: c1a68b7's kernels; the sm80 prefill is main's before these changes)
#   new  = pack vcopy2 (devrun/vcopy2.tar.xz, `scripts/device_pack.sh vcopy2 -DMUH_TARGETS="0;90"
#          -DMUH_HEAD_DIMS="128;256" -DMUH_DTYPES="fp16;bf16" -DMUH_KV_FP8= -DMUH_VARIANTS=plain --
#          muh_gpu_paged_prefill_tests`, = 8e1d2b5): K's 8-lane groups take 8
#          slots of one chunk, V's take a page's 128 contiguous bytes, Sm80LdmOffsets::pick
#   1. ncu (L2 sectors and requests, excessive sectors / wavefronts, duration) of the t90 tail
#      kernel, seed 8k + 512, NHD + vLLM, each side;
#   2. timing, t90 forced and the plan (auto), both layouts: seed 8k/32k + 512 and the 32k + 2048
#      cells (fp16 hd 256 and the serving bf16 hd 128), base and new alternately twice;
#   3. new: every forced t90 paged-prefill case (both layouts; hd 128/256, fp16/bf16), memcheck and
#      racecheck on the vLLM many-pages cases.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs32; mkdir -p $L; trap 'tar czf $OUT/logs32.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
[ -d /tmp/vcopy2 ] || tar xJf devrun/vcopy2.tar.xz -C /tmp
B=/tmp/p18; N=/tmp/vcopy2; export PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
M="--metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__sass_inst_executed_op_local_ld.sum"
for side in base new; do
  lib=$B; [ $side = new ] && lib=$N
  LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 90 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel --launch-count 2 \
    --section SourceCounters $M python3 bench/prefix_part_ab.py --lib $lib/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_$side.log 2>&1
  echo "ncu $side rc $? at $(el) s"
  grep -E "prefill_sm80_paged_tail_kernel|gpu__time|lts__t_|inst_executed|wavefronts|excessive" $L/ncu_$side.log | tr -s ' ' | cut -c1-150
done
for r in 1 2; do
  for side in base new; do
    lib=$B; [ $side = new ] && lib=$N
    LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 100 python3 bench/prefix_part_ab.py --lib $lib/libmuh.so \
      --only 8192:512,32768:512,32768:2048 --targets 90,-1 --iters 30 > $L/time_${side}_$r.log 2>&1
    echo "time $side $r rc $? at $(el) s"; grep -E "^(float|bfloat)" $L/time_${side}_$r.log
  done
done
export LD_LIBRARY_PATH=$N:/usr/local/cuda/lib64
run tests_t90 200 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*'
run memcheck 120 compute-sanitizer --tool memcheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*many_pages*'
run racecheck 150 compute-sanitizer --tool racecheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*many_pages*'
echo "done at $(el) s"
