#!/usr/bin/env bash
# Device call 3: the smem carveout hypothesis (cudaFuncAttributePreferredSharedMemoryCarveout = 100 in the experiment copies marked c) beside warps × stages of the hd-256 sm90 decode row, TMA vLLM form (this tree), seed
# grid with the sm80 agent only. Each tree: this tree with the row edited (S = 1 needs validate's
# sm80 stage minimum relaxed in the experiment copy only).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/env.txt"
cli="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16 -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
L=/tmp/logs3; mkdir -p $L
row='{k16Bit, kHd256, Agent::sm80, 4, 64, 2, 1, 128, true, kSmemCap,'
# name warps tile stages partition
cfgs="A:4:64:2:128 Ac:4:64:2:128 Hc:5:80:2:160 G:12:192:1:192 Gc:12:192:1:192 Fc:8:128:1:128"
for c in $cfgs; do
  IFS=: read n w t s p <<< "$c"
  d=/tmp/s$n; rm -rf $d; mkdir -p $d; tar cf - --exclude=./devrun --exclude='./build*' . | (cd $d && tar xf -)
  sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, $w, $t, $s, 1, $p, true, kSmemCap,/" $d/include/muh/tuning/tuning_sm90.hpp
  sed -i 's/p.num_stages >= 2);/p.num_stages >= 1);/' $d/include/muh/tuning/policy.hpp
  case $n in *c) sed -i 's/^  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);/  cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);\n&/' $d/include/muh/kernels/launch_status.hpp
     echo "$n carveout: $(grep -c PreferredSharedMemoryCarveout $d/include/muh/kernels/launch_status.hpp)" >> $L/sed-check.txt ;; esac
  echo "$n: $(grep -c "Agent::sm80, $w, $t, $s, 1, $p, true" $d/include/muh/tuning/tuning_sm90.hpp)" >> $L/sed-check.txt
  ( cmake -S $d -B /tmp/b$n $cli && cmake --build /tmp/b$n -j3 --target muh_cli ) > $L/build-$n.log 2>&1 &
done
wait; echo "built at $(el) s"; cat $L/sed-check.txt | tr '\n' ' '; echo
grid() { mkdir -p $L/g-$1; $2 bench decode --grid seed --emulate bi-v100 --no-portable --out $L/g-$1 > $L/grid-$1.log 2>&1; echo "grid $1 rc=$? at $(el) s"; }
order="A Ac Hc G Gc Fc A2"
for n in $order; do b=/tmp/b${n%2}/muh; [ -x $b ] && grid $n $b || { echo "no build $n"; tail -5 $L/build-${n%2}.log; }; done
tar czf "$OUT/logs3.tgz" -C $L .
for x in $order; do
  awk -F'|' '/^\| (16|132) \|/ && $3 !~ /portable/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt
  grep -E "SMs sm80.* V1 " $L/grid-$x.log | awk '{print $9}' > $L/v1-$x.txt
done
awk -F'|' '/^\| (16|132) \|/ && $3 !~ /portable/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-A.log > $L/cells.txt
echo "best: SMs|cell|floor|A 4w2s|Ac|Hc 5w2s|G 12w1s|Gc|Fc 8w1s|A2"
paste -d'|' $L/cells.txt $(for x in $order; do echo $L/best-$x.txt; done)
echo "V1 us: $order"; paste -d' ' $(for x in $order; do echo $L/v1-$x.txt; done) | head -16
echo "total $(el) s"
