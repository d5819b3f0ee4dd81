#!/usr/bin/env bash
# Session 10's call for the NHD fragments and the codes kernels' footprint (two CTAs a SM at hd
# 256) (carry ["devrun13", ".fi"]; ~6 min): pack p11 rebuilt
# (scripts/device_pack.sh p11 -DMUH_TARGETS="0;90;90a" -DMUH_HEAD_DIMS="128;256"
# -DMUH_DTYPES="fp16;bf16" -DMUH_KV_FP8_HEAD_DIMS="128;256" -DMUH_VARIANT_HEAD_DIMS=128 -- muh_cli
# muh_gpu_decode_fp8_tests muh_gpu_decode_tests muh_gpu_mixed_batch_tests muh_gpu_input_guard_tests
# muh_cpu_tests), moved to devrun13/; .fi/ as scripts/flashinfer_bundle.py's header says (the
# flashinfer-python 0.7.2 and apache-tvm-ffi cp312 wheels from PyPI; both packs local, excluded
# from git: rebuild them in a fresh checkout). FlashInfer's decode modules build in the background while
# the tests run; then bench/fp8_decode.py (NHD, bf16 q: muh and FlashInfer over bf16 and e4m3).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs13; mkdir -p $L/grid_vllm $L/grid_nhd $L/fp8dec $L/seed $L/seed16; trap 'tar czf $OUT/logs.tgz -C $L .' EXIT
rm -rf /tmp/p11; tar xJf devrun13/p11.tar.xz -C /tmp
P=/tmp/p11; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
( cd bench && PYTHONPATH=/tmp/fi/site MAX_JOBS=12 timeout 300 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('decode', 'fa2', torch.bfloat16, dt, hd) for hd in (128, 256) for dt in (torch.bfloat16, torch.float8_e4m3fn)])
" > $L/fi-prebuild.log 2>&1; echo "rc $?" >> $L/fi-prebuild.log ) &
fi_pid=$!
run() {  # run NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout $t "$@" > $L/$name.log 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|RACECHECK SUMMARY' $L/$name.log | tail -3 | tr '\n' ' ' | cut -c1-220)"
  grep -E "^\[  FAILED  \]" $L/$name.log | head -8
}
run cpu_frag 30 $P/muh_cpu_tests --gtest_filter='Fp8Fragments*:Fp8Decode*'
run decode_fp8 120 $P/muh_gpu_decode_fp8_tests
F='*t90_fp8_e4m3_fp16_hd256_vllm_g4_ragged:*t80_fp8_e4m3_bf16_hd256_vllm_g4_len1:*t90_fp8_e4m3_fp16_hd256_nhd_g4_ragged:*t90_fp8_e5m2_bf16_hd128_nhd_g4_empty_and_long:*t80_fp8_e4m3_bf16_hd256_nhd_g4_len1:*t80_fp8_e4m3_fp16_hd128_nhd_g4_range_limit:*t90_fp8_e4m3_fp16_hd128_nhd_g4_variants'
run memcheck 60 compute-sanitizer --tool memcheck $P/muh_gpu_decode_fp8_tests --gtest_filter="$F"
run racecheck 60 compute-sanitizer --tool racecheck $P/muh_gpu_decode_fp8_tests --gtest_filter="$F"
run decode16 60 $P/muh_gpu_decode_tests
run mixed 40 $P/muh_gpu_mixed_batch_tests
run guard_fp8 30 $P/muh_gpu_input_guard_tests --gtest_filter='*DecodeGuard*fp8*'
for lay in nhd vllm; do
  timeout 40 ncu -k regex:decode_sm80 --launch-skip 3 -c 1 --set full -o $L/ncu_fp8_$lay \
    $P/muh bench decode --only hd256:1:32768 --kv-layout $lay --splits 1 --kv-dtype fp8_e4m3 --iters 30 > $L/ncu_fp8_$lay.log 2>&1
  echo "ncu $lay rc $? at $(el) s"
  ncu --import $L/ncu_fp8_$lay.ncu-rep --page details > $L/ncu_fp8_$lay.txt 2>&1; rm -f $L/ncu_fp8_$lay.ncu-rep
  grep -E "Duration|Executed Instructions  |Warp Cycles Per Issued" $L/ncu_fp8_$lay.txt | head -3
done
for lay in nhd vllm; do
  timeout 60 $P/muh bench decode --kv-layout $lay --kv-dtype auto,fp8_e4m3 --out $L/grid_$lay \
    --only hd128:64:8192 hd128:256:2048 hd256:16:8192 hd256:64:8192 hd256:1:32768 > $L/grid_$lay.log 2>&1
  echo "grid $lay rc $? at $(el) s"; grep -E "^  hd" $L/grid_$lay.log | cut -c1-110
done
# the seed's grid (vLLM pages, fp16 q, 1 KV head) over fp16 and e4m3 caches: 132 SMs, then the
# 16-SM partition, where the e4m3 plan now takes two CTAs a SM (the sweep forces 16 too)
timeout 60 $P/muh bench decode --grid seed --kv-dtype auto,fp8_e4m3 --out $L/seed > $L/seed.log 2> $L/seed.progress
echo "seed rc $? at $(el) s"
timeout 120 $P/muh bench decode --grid seed --emulate bi-v100 --no-portable --kv-dtype auto,fp8_e4m3 --out $L/seed16 \
  > $L/seed16.log 2> $L/seed16.progress
echo "seed16 rc $? at $(el) s"; grep -E "16 SMs.*256k" $L/seed16.progress | cut -c1-150
# FlashInfer's fp8 decode beside muh's (NHD pages) with what the call has left of DL seconds
DL=${DL:-540}
left=$(( DL - $(el) - 20 )); [ $left -gt 240 ] && left=240
if [ $left -lt 60 ]; then echo "fp8_decode skipped at $(el) s"; kill $fi_pid 2>/dev/null; echo "done at $(el) s"; exit 0; fi
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -1 $L/fi-prebuild.log)"
left=$(( DL - $(el) - 10 )); [ $left -gt 240 ] && left=240
PYTHONPATH=/tmp/fi/site timeout $left python3 bench/fp8_decode.py --lib $P/libmuh.so --out $L/fp8dec > $L/fp8dec.log 2>&1
echo "fp8_decode rc $? at $(el) s"; grep -E "^hd|FAILED|Error" $L/fp8dec.log | cut -c1-200
echo "done at $(el) s"
