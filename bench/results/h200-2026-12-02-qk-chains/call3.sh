#!/usr/bin/env bash
# Device call 3: the HeadsOnN tile's QK chain. A committed; D 4 QK accumulator sets; E 8 sets and
# the V fragments loaded before the softmax; F = D with 4 x 3; G = D with 6 x 2 (partition 192).
# Seed grid (fp16) for all; the default grid's hd-256 NHD cells (bf16) for A, D, E.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs3; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm --format=csv > $L/env.txt 2>&1
row='{k16Bit, kHd256, Agent::sm80, 4, 64, 2, 1, 128, true, kSmemCap,'
for c in A:4:64:2:128:fp16,bf16 D:4:64:2:128:fp16,bf16 E:4:64:2:128:fp16,bf16 F:4:64:3:128:fp16 G:6:96:2:192:fp16; do
  IFS=: read n w t s p dts <<< "$c"; d=/tmp/s$n; rm -rf $d; mkdir -p $d
  tar cf - --exclude=./devrun --exclude='./build*' . | (cd $d && tar xf -)
  sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, $w, $t, $s, 1, $p, true, kSmemCap,/" $d/include/muh/tuning/tuning_sm90.hpp
  [ -f devrun/$n.patch ] && patch -d $d -p1 < devrun/$n.patch >> $L/sed-check.txt 2>&1
  echo "$n: $(grep -c "Agent::sm80, $w, $t, $s, 1, $p, true" $d/include/muh/tuning/tuning_sm90.hpp)" >> $L/sed-check.txt
  cli="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=${dts/,/;} -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
  ( cmake -S $d -B /tmp/b$n $cli && cmake --build /tmp/b$n -j3 --target muh_cli ) > $L/build-$n.log 2>&1 &
done
wait; echo "built at $(el) s; $(cat $L/sed-check.txt | tr '\n' ' ')"
grep -h "spill" $L/build-*.log | grep -c decode_sm80 > $L/spills.txt; for n in A D E F G; do echo "$n spills: $(grep spill $L/build-$n.log | grep -c decode_sm80)"; done
for n in A D E F G; do b=/tmp/b$n/muh; [ -x $b ] || { echo "no $n"; tail -5 $L/build-$n.log; continue; }
  $b bench decode --grid seed --emulate bi-v100 --no-portable > $L/grid-$n.log 2>&1; echo "grid $n rc=$? at $(el) s"
done
cells="hd256:1:8192 hd256:1:32768 hd256:16:512 hd256:16:8192 hd256:64:8192 hd256:256:2048"
for n in A D E A2; do b=/tmp/b${n%2}/muh; [ -x $b ] || continue
  $b bench decode --only $cells > $L/nhd-$n.log 2>&1; echo "nhd $n rc=$? at $(el) s"
done
echo "== seed grid best (A D E F G)"
for x in A D E F G; do awk -F'|' '/^\| (16|132) \|/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt; done
awk -F'|' '/^\| (16|132) \|/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-A.log > $L/cells.txt
paste -d'|' $L/cells.txt $L/best-A.txt $L/best-D.txt $L/best-E.txt $L/best-F.txt $L/best-G.txt
for n in A D E A2; do echo "== NHD $n"; grep -E "hd256_16q_4kv batch" $L/nhd-$n.log | cut -c1-90; done
tar czf "$OUT/logs3.tgz" -C $L .
echo "total $(el) s"
