#!/usr/bin/env bash
# call45 (carry ["devrun"]): the portable decode agent's leaner tile loop (issue 18). GPU tests of
# every portable decode kernel (pack pt = the working tree: target 0 only, hd 64/96/128/256,
# fp16/bf16/fp32, fp8 e4m3/e5m2, plain + general kinds), memcheck/racecheck on a subset,
# `muh verify --quick`; the seed grid on 132 SMs and the 16-SM green partition (portable agent +
# sm80-class agent) from the committed kernel (pack pb = 4fc5665) and the new one (pack pn = the
# working tree) and pack pq (the working tree with PortableVMap::kDims = 1: the address change
# alone), one process each, order pb pn pq (pb pn again while time lasts); pb, pn, pq: the same
# lean config (hd 256 fp16, targets 0;90, plain kind, no fp8, no paged prefill); and
# fma_floor.cu (built here with the device's nvcc): the FFMA + conversion ceiling on 16 SMs.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs45; mkdir -p $L; trap 'tar czf $OUT/logs45.tgz -C $L .' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1
tail -1 $L/env.txt
for p in pt pb pn pq; do tar xJf devrun/$p.tar.xz -C /tmp; done
grid() {  # grid NAME: the seed grid of pack ${NAME%?}
  local p=${1%?}; mkdir -p $L/g-$1
  LD_LIBRARY_PATH=/tmp/$p:/usr/local/cuda/lib64 timeout 110 /tmp/$p/muh bench decode --grid seed --emulate bi-v100 \
    --out $L/g-$1 > $L/grid-$1.log 2>&1
  echo "grid $1 rc $? at $(el) s"
}
P=/tmp/pt
export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64
run decode 150 $P/muh_gpu_decode_tests
grid pb1; grid pn1; grid pq1
# The fp32-math ceiling (fma_floor.cu, README): FFMA + cvt alone on the same 16 SMs, beside the
# floors the grids just measured.
(cd bench/results/2026-12-08-portable-decode && timeout 60 /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90 -I../../../include \
  -I../../../check fma_floor.cu -o /tmp/fma_floor) && timeout 60 /tmp/fma_floor > $L/fma_floor.log 2>&1
echo "fma_floor rc $? at $(el) s"; cat $L/fma_floor.log
for n in pb1 pn1 pq1; do echo "== $n"; grep -E "16 SMs portable" $L/grid-$n.log | cut -c1-130; done
run fp8 100 $P/muh_gpu_decode_fp8_tests
run variants 100 $P/muh_gpu_decode_variants_tests
run guard 80 $P/muh_gpu_input_guard_tests --gtest_filter='*Decode*'
timeout 60 $P/muh verify --quick > $L/verify.log 2>&1; echo "verify rc $? at $(el) s: $(tail -1 $L/verify.log | cut -c1-200)"
f='Sweep/DecodeForced.MatchesReference/*hd96*:Sweep/DecodeForced.MatchesReference/*hd256*'
[ $(el) -lt 420 ] && run memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 1 $P/muh_gpu_decode_tests --gtest_filter="$f"
[ $(el) -lt 470 ] && run racecheck 50 compute-sanitizer --tool racecheck --error-exitcode 1 $P/muh_gpu_decode_tests --gtest_filter="$f"
for n in pb2 pn2; do [ $(el) -lt 440 ] && grid $n; done
echo "total $(el) s"
