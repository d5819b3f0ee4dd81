#!/usr/bin/env bash
# Device call 5: the hd-256 sm90 row 6 warps x 1 stage x 2 CTAs/SM (M) against the committed
# 4 x 2 (A), CLI builds only: the seed grid (sm80 agent) and the default grid's NHD hd-256 cells.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
cli="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16;bf16 -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
L=/tmp/logs5; mkdir -p $L
row='{k16Bit, kHd256, Agent::sm80, 4, 64, 2, 1, 128, true, kSmemCap,'
for c in A:4:64:2:1:128 M:6:96:1:2:192; do
  IFS=: read n w t s k p <<< "$c"; d=/tmp/s$n; rm -rf $d; mkdir -p $d
  tar cf - --exclude=./devrun --exclude='./build*' . | (cd $d && tar xf -)
  sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, $w, $t, $s, $k, $p, true, kSmemCap,/" $d/include/muh/tuning/tuning_sm90.hpp
  sed -i 's/p.num_stages >= 2);/p.num_stages >= 1);/' $d/include/muh/tuning/policy.hpp
  echo "$n: $(grep -c "Agent::sm80, $w, $t, $s, $k, $p, true" $d/include/muh/tuning/tuning_sm90.hpp)" >> $L/sed-check.txt
  ( cmake -S $d -B /tmp/b$n $cli && cmake --build /tmp/b$n -j8 --target muh_cli ) > $L/build-$n.log 2>&1 &
done
wait; echo "built at $(el) s; $(cat $L/sed-check.txt | tr '\n' ' ')"
cells="hd256:1:8192 hd256:1:32768 hd256:16:512 hd256:16:8192 hd256:64:8192 hd256:256:2048"
for n in A M A2; do b=/tmp/b${n%2}/muh; [ -x $b ] || { echo "no $n"; tail -5 $L/build-${n%2}.log; continue; }
  mkdir -p $L/g-$n $L/nhd-$n
  $b bench decode --grid seed --emulate bi-v100 --no-portable --out $L/g-$n > $L/grid-$n.log 2>&1; echo "grid $n rc=$? at $(el) s"
  $b bench decode --only $cells --out $L/nhd-$n > $L/nhd-$n.log 2>&1; echo "nhd $n rc=$? at $(el) s"
done
tar czf "$OUT/logs5.tgz" -C $L .
for x in A M A2; do awk -F'|' '/^\| (16|132) \|/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt; done
awk -F'|' '/^\| (16|132) \|/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-A.log > $L/cells.txt
echo "best: SMs|cell|floor|A 4x2|M 6x1x2|A2"; paste -d'|' $L/cells.txt $L/best-A.txt $L/best-M.txt $L/best-A2.txt
for n in A M A2; do echo "== NHD $n"; grep -E "hd256_16q_4kv batch" $L/nhd-$n.log | cut -c1-100; done
echo "total $(el) s"
