#!/usr/bin/env bash
# Device call 2: warps × stages of the hd-256 sm90 decode row, TMA vLLM form (this tree), seed
# grid with the sm80 agent only. Each tree: this tree with the row edited (S = 1 needs validate's
# sm80 stage minimum relaxed in the experiment copy only).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/env.txt"
cli="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16 -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
L=/tmp/logs2; mkdir -p $L
row='{k16Bit, kHd256, Agent::sm80, 4, 64, 2, 1, 128, true, kSmemCap,'
# name warps tile stages partition
cfgs="A:4:64:2:128 D:6:96:2:192 H:5:80:2:160 F:8:128:1:128 G:12:192:1:192 J:10:160:1:160 K:6:96:1:192"
for c in $cfgs; do
  IFS=: read n w t s p <<< "$c"
  d=/tmp/s$n; rm -rf $d; mkdir -p $d; tar cf - --exclude=./devrun --exclude='./build*' . | (cd $d && tar xf -)
  sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, $w, $t, $s, 1, $p, true, kSmemCap,/" $d/include/muh/tuning/tuning_sm90.hpp
  sed -i 's/p.num_stages >= 2);/p.num_stages >= 1);/' $d/include/muh/tuning/policy.hpp
  echo "$n: $(grep -c "Agent::sm80, $w, $t, $s, 1, $p, true" $d/include/muh/tuning/tuning_sm90.hpp)" >> $L/sed-check.txt
  ( cmake -S $d -B /tmp/b$n $cli && cmake --build /tmp/b$n -j3 --target muh_cli ) > $L/build-$n.log 2>&1 &
done
wait; echo "built at $(el) s"; cat $L/sed-check.txt | tr '\n' ' '; echo
grid() { mkdir -p $L/g-$1; $2 bench decode --grid seed --emulate bi-v100 --no-portable --out $L/g-$1 > $L/grid-$1.log 2>&1; echo "grid $1 rc=$? at $(el) s"; }
order="A D H F G J K A2"
for n in $order; do b=/tmp/b${n%2}/muh; [ -x $b ] && grid $n $b || { echo "no build $n"; tail -5 $L/build-${n%2}.log; }; done
tar czf "$OUT/logs2.tgz" -C $L .
for x in $order; do
  awk -F'|' '/^\| (16|132) \|/ && $3 !~ /portable/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt
  grep -E "SMs sm80.* V1 " $L/grid-$x.log | awk '{print $9}' > $L/v1-$x.txt
done
awk -F'|' '/^\| (16|132) \|/ && $3 !~ /portable/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-A.log > $L/cells.txt
echo "best: SMs|cell|floor|A 4w2s|D 6w2s|H 5w2s|F 8w1s|G 12w1s|J 10w1s|K 6w1s|A2"
paste -d'|' $L/cells.txt $(for x in $order; do echo $L/best-$x.txt; done)
echo "V1 us: A D H F G J K A2"; paste -d' ' $(for x in $order; do echo $L/v1-$x.txt; done) | head -16
echo "total $(el) s"
