#!/usr/bin/env bash
# The next session's first call (written in session 9, never run: the device gave no machine
# after call 2). Carry ["devrun11"]; pack p11 = /tmp/v1's lean build at 89b0d74 (sm_90 SASS,
# targets 0/90/90a, hd 64/128/256, fp16/bf16, fp8 e4m3/e5m2 at hd 128/256, variants at hd 128;
# local to this workspace and excluded from git — rebuild it the same way if it is gone):
# HeadsOnNCodes (the sm80 decode agent's fp8 tile math from the codes' own ldmatrix fragments on
# vLLM pages with the heads on N) and the fp8-aware decode plan. Stages in order of need, each
# skipped when the call's DL seconds would not hold it. Everything goes into ONE tarball.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
DL=${DL:-540}
fits() { [ $(( $(el) + $1 )) -le $DL ]; }
L=/tmp/logs11; mkdir -p $L; trap 'tar czf $OUT/logs.tgz -C $L .' EXIT
tar xJf devrun11/p11.tar.xz -C /tmp
P=/tmp/p11; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
run() {  # run NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  fits $t || { echo "$name skipped at $(el) s"; return; }
  timeout $t "$@" > $L/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|RACECHECK SUMMARY|^PASS|^FAIL' $L/$name.log | tail -3 | tr '\n' ' ' | cut -c1-220)"
  grep -E "^\[  FAILED  \]" $L/$name.log | head -8
}
# 1. the new kernels against the CPU reference: every fp8 decode case (t0 / t80 cp.async / t90 TMA)
run decode_fp8 90 $P/muh_gpu_decode_fp8_tests  # (DecodeFp8CApi: the _quant workspace query)
# 2. the seed's cells on 132 SMs over fp16 and e4m3 (V1, the plan, the best split count, the floor)
if fits 80; then
  timeout 80 $P/muh bench decode --grid seed --kv-dtype auto,fp8_e4m3 --out $L/seed > $L/seed.log 2> $L/seed.progress
  echo "seed rc $? at $(el) s"; grep -E "fp8|k " $L/seed.progress | cut -c1-150 | tail -20
fi
# 3. sanitizers on a few HeadsOnNCodes cases (TMA: t90; cp.async: t80; partial tiles, NaN codes)
F='*t90_fp8_e4m3_fp16_hd256_vllm_g4_ragged:*t90_fp8_e5m2_bf16_hd128_vllm_g4_empty_and_long:*t80_fp8_e4m3_bf16_hd256_vllm_g4_len1:*t80_fp8_e4m3_fp16_hd128_vllm_g4_range_limit'
run memcheck 40 compute-sanitizer --tool memcheck $P/muh_gpu_decode_fp8_tests --gtest_filter="$F"
run racecheck 50 compute-sanitizer --tool racecheck $P/muh_gpu_decode_fp8_tests --gtest_filter="$F"
# 4. ncu of one V1 launch each: vLLM pages (the fragments) and NHD pages (still the widening
#    pass), against call 2's 671 (e4m3, vLLM, widening) and 272 (fp16) instructions a warp-tile
for lay in vllm nhd; do
  fits 40 || break
  timeout 40 ncu -k regex:decode_sm80 --launch-skip 3 -c 1 --set full -o $L/ncu_fp8_$lay \
    $P/muh bench decode --only hd256:1:32768 --kv-layout $lay --splits 1 --kv-dtype fp8_e4m3 --iters 30 > $L/ncu_fp8_$lay.log 2>&1
  echo "ncu $lay rc $? at $(el) s"
  ncu --import $L/ncu_fp8_$lay.ncu-rep --page details > $L/ncu_fp8_$lay.txt 2>&1
  grep -E "Duration|Executed Instructions  |Executed Ipc A|Warp Cycles Per Issued" $L/ncu_fp8_$lay.txt | head -5
done
# 5. the other suites the kernel file serves
run mixed 30 $P/muh_gpu_mixed_batch_tests
run decode16 60 $P/muh_gpu_decode_tests
run guard_fp8 30 $P/muh_gpu_input_guard_tests --gtest_filter='*DecodeGuard*fp8*'
# 6. the default grid's cells over both caches, vLLM pages (fragments) then NHD (widening pass)
for lay in vllm nhd; do
  fits 70 || break
  timeout 70 $P/muh bench decode --kv-layout $lay --kv-dtype auto,fp8_e4m3 --out $L/grid_$lay \
    --only hd128:64:8192 hd128:256:2048 hd256:16:8192 hd256:64:8192 hd256:1:32768 > $L/grid_$lay.log 2>&1
  echo "grid $lay rc $? at $(el) s"; tail -14 $L/grid_$lay.log | cut -c1-180
done
echo "done at $(el) s"
