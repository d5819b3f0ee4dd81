#!/usr/bin/env bash
# call31 (carry ["devrun18", "devrun"]): why the sm80 agent's key split costs 1.36-1.38x on vLLM
# pages what it costs on NHD pages (session 14, bench/results/2026-12-07-ncu-prefill section 2) —
# the seed's 512-token chunks' prefix part — and the first fix's A/B.
#   base = pack p18 (devrun18: c1a68b7's kernels; the sm80 prefill is main's before this change)
#   new  = pack vcopy (devrun/vcopy.tar.xz: `scripts/device_pack.sh vcopy -DMUH_TARGETS="0;90"
#          -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16 -DMUH_KV_FP8= -DMUH_VARIANTS=plain --
#          muh_gpu_paged_prefill_tests`): Sm80LdmOffsets::pick — the dim-major V pattern's offsets
#          in registers, not a 16-byte local array (4 LDL a key tile in P V)
#   1. ncu of prefill_sm80_paged_tail_kernel, t90 forced, seed 8k + 512 (fp16 hd 256, 4 q / 1 kv):
#      base NHD and vLLM, new vLLM; speed of light, memory tables, instruction stats, stall
#      reasons, source counters, shared-memory bank conflicts, L2 sectors and requests;
#   2. timing: 8k + 512 and 32k + 512, t90, both layouts, base and new alternately twice
#      (each run interleaved, cold L2, median of 30);
#   3. new: the forced t90 vLLM paged-prefill cases, memcheck + racecheck on two.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs31; mkdir -p $L; trap 'tar czf $OUT/logs31.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
[ -d /tmp/vcopy ] || tar xJf devrun/vcopy.tar.xz -C /tmp
B=/tmp/p18; N=/tmp/vcopy; export PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
S="--section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section InstructionStats --section WarpStateStats --section SourceCounters"
M="--metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,smsp__sass_inst_executed_op_local_ld.sum"
for side in base new; do
  lib=$B; [ $side = new ] && lib=$N
  LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 120 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel --launch-count 2 $S $M \
    python3 bench/prefix_part_ab.py --lib $lib/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_$side.log 2>&1
  echo "ncu $side rc $? at $(el) s"
  grep -E "prefill_sm80_paged_tail_kernel|^ +Duration|Executed Instructions |bank_conflicts|inst_executed|lts__t_|L2 Hit Rate|Warp Cycles Per Issued|Stall" $L/ncu_$side.log | tr -s ' ' | cut -c1-150 | head -40
done
for r in 1 2; do
  for side in base new; do
    lib=$B; [ $side = new ] && lib=$N
    LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 100 python3 bench/prefix_part_ab.py --lib $lib/libmuh.so \
      --only 8192:512,32768:512 --targets 90 --iters 30 > $L/time_${side}_$r.log 2>&1
    echo "time $side $r rc $? at $(el) s"; grep -E "^float" $L/time_${side}_$r.log
  done
done
export LD_LIBRARY_PATH=$N:/usr/local/cuda/lib64
run tests_vllm 150 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*'
run memcheck 120 compute-sanitizer --tool memcheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*many_pages*'
run racecheck 120 compute-sanitizer --tool racecheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*many_pages*'
echo "done at $(el) s"
