#!/usr/bin/env bash
# call33 (carry ["devrun18", "devrun"]): the src-size form's share. call32 (H200) found the K/V
# regrouping changed neither the 2,129,920 excessive L2 sectors of the sm80 key split's vLLM kernel
# (30 %; NHD: 32,768) nor much of its time — exactly one more V tile's sectors per key tile: the V
# copies all went out as LDGSTS.ZFILL (a src-size operand), as NHD's copies do not.
#   base = pack p18 (devrun18); new = pack vcopy3 (devrun/vcopy3.tar.xz, `scripts/device_pack.sh
#          vcopy3 -DMUH_TARGETS="0;90" -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16 -DMUH_KV_FP8=
#          -DMUH_VARIANTS=plain -- muh_gpu_paged_prefill_tests`, devrun/vcopy3.COMMIT = 888c756): whole
#          V groups by the 16-or-0-byte form, on top of call32's changes.
#   1. ncu of the t90 tail kernels (NHD, vLLM), seed 8k + 512, new;
#   2. timing base / new alternately twice: seed 8k / 32k + 512 and 32k + 2048, t90;
#   3. new: the forced t90 vLLM cases, memcheck on the many-pages ones, racecheck on two.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs33; mkdir -p $L; trap 'tar czf $OUT/logs33.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
[ -d /tmp/vcopy3 ] || tar xJf devrun/vcopy3.tar.xz -C /tmp
B=/tmp/p18; N=/tmp/vcopy3; export PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
M="--metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,smsp__inst_executed.sum"
LD_LIBRARY_PATH=$N:/usr/local/cuda/lib64 timeout 60 ncu --kernel-name regex:prefill_sm80_paged_tail_kernel --launch-count 2 \
  --section SourceCounters $M python3 bench/prefix_part_ab.py --lib $N/libmuh.so --only 8192:512 --targets 90 --iters 0 > $L/ncu_new.log 2>&1
echo "ncu new rc $? at $(el) s"
grep -E "prefill_sm80_paged_tail_kernel|gpu__time|lts__t_|inst_executed|excessive" $L/ncu_new.log | tr -s ' ' | cut -c1-150
for r in 1 2; do
  for side in base new; do
    lib=$B; [ $side = new ] && lib=$N
    LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 timeout 60 python3 bench/prefix_part_ab.py --lib $lib/libmuh.so \
      --only 8192:512,32768:512,32768:2048 --targets 90 --iters 30 > $L/time_${side}_$r.log 2>&1
    echo "time $side $r rc $? at $(el) s"; grep -E "^float16" $L/time_${side}_$r.log
  done
done
export LD_LIBRARY_PATH=$N:/usr/local/cuda/lib64
run tests_vllm 90 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*'
run memcheck 60 compute-sanitizer --tool memcheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm*many_pages*'
run racecheck 60 compute-sanitizer --tool racecheck --print-limit 4 $N/muh_gpu_paged_prefill_tests --gtest_filter='*t90*vllm_many_pages_varlen_gqa6_p16*'
echo "done at $(el) s"
