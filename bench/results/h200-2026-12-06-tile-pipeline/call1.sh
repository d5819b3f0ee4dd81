#!/usr/bin/env bash
# Device call 1 (session 2026-12-06): the hd-256 sm80 decode tile pipeline, A/B in one run.
# A = addac70 (devrun/base.tgz, row 4 x 2); B = this tree with the row at 4 x 2 (the lane's
# ldmatrix addresses precomputed, LaneChunks; no overlap); D = this tree, row 4 x 3, tile j + 1's
# QK^T beside tile j's softmax + PV (MUH_DECODE_OVERLAP_MIN_D=256); E = D + the O rescale skipped
# when no lane's max moved (MUH_DECODE_SKIP_RESCALE); F = E + ex2.approx (MUH_DECODE_EXP2_APPROX).
# Seed grid (fp16) for all, twice interleaved; the default grid's hd-256 NHD cells (bf16) for
# A B D E; muh verify --quick for D E F; ncu of B and E on the 16-SM-like CTA.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs1; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1
row='{k16Bit, kHd256, Agent::sm80, 4, 64, 3, 1, 128, true, kSmemCap,'
for c in ${VARIANTS:-A:2:fp16,bf16: B:2:fp16,bf16: D:3:fp16,bf16:-DMUH_DECODE_OVERLAP_MIN_D=256 \
         E:3:fp16,bf16:-DMUH_DECODE_OVERLAP_MIN_D=256+-DMUH_DECODE_SKIP_RESCALE=1 \
         F:3:fp16:-DMUH_DECODE_OVERLAP_MIN_D=256+-DMUH_DECODE_SKIP_RESCALE=1+-DMUH_DECODE_EXP2_APPROX=1}; do
  IFS=: read n s dts flags <<< "$c"; d=/tmp/s$n; rm -rf $d; mkdir -p $d
  if [ $n = A ]; then tar xzf devrun/base.tgz -C $d; else
    tar cf - --exclude=./devrun --exclude='./build*' . | (cd $d && tar xf -)
    sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, 4, 64, $s, 1, 128, true, kSmemCap,/" $d/include/muh/tuning/tuning_sm90.hpp
  fi
  echo "$n: row 4 x $s: $(grep -c "Agent::sm80, 4, 64, $s, 1, 128, true" $d/include/muh/tuning/tuning_sm90.hpp) flags ${flags//+/ }" >> $L/sed-check.txt
  cli="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=${dts/,/;} -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_PAGED_PREFILL=OFF -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
  ( cmake -S $d -B /tmp/b$n $cli "-DCMAKE_CUDA_FLAGS=${flags//+/ }" && cmake --build /tmp/b$n -j${JOBS:-4} --target muh_cli ) > $L/build-$n.log 2>&1 &
done
wait; echo "built at $(el) s"; cat $L/sed-check.txt
for n in A B D E F; do echo "$n: $(grep -c 'error' $L/build-$n.log) errors, $(grep spill $L/build-$n.log | grep -c decode_sm80) sm80 decode spills"; done
V="A B D E F"
for r in 1 2; do for n in $V; do b=/tmp/b$n/muh; [ -x $b ] || continue
  $b bench decode --grid seed --emulate bi-v100 --no-portable > $L/grid-$n$r.log 2>&1; echo "grid $n$r rc=$? at $(el) s"
done; done
cells="hd256:1:8192 hd256:1:32768 hd256:16:512 hd256:16:8192 hd256:64:8192 hd256:256:2048"
for n in A B D E; do b=/tmp/b$n/muh; [ -x $b ] || continue
  $b bench decode --only $cells > $L/nhd-$n.log 2>&1; echo "nhd $n rc=$? at $(el) s"
done
tar czf "$OUT/logs1.tgz" -C $L .
for n in D E F; do b=/tmp/b$n/muh; [ -x $b ] || continue
  timeout 60 $b verify --quick > $L/verify-$n.log 2>&1; echo "verify $n rc=$? at $(el) s: $(grep -ciE 'fail' $L/verify-$n.log) fail lines"; tail -4 $L/verify-$n.log
done
tar czf "$OUT/logs1.tgz" -C $L .
for n in B E; do b=/tmp/b$n/muh; [ $(el) -lt 470 ] || break
  timeout 90 ncu --clock-control none -k regex:decode_sm80_tma -s 3 -c 1 --set full --import-source no -o $L/ncu-$n \
    $b bench decode --only hd256:1:32768 --kv-layout vllm --splits 16 > $L/ncu-run-$n.log 2>&1; echo "ncu $n rc=$? at $(el) s"
  ncu -i $L/ncu-$n.ncu-rep --page details > $L/details-$n.txt 2>&1
  grep -E "Duration|Eligible Warps|Issued Warp|No Eligible|Registers Per|Warp Cycles Per Issued" $L/details-$n.txt | head -8
done
rm -f $L/*.ncu-rep; tar czf "$OUT/logs1.tgz" -C $L .
for x in A1 B1 D1 E1 F1 A2 B2 D2 E2 F2; do awk -F'|' '/^\| (16|132) \|/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt 2>/dev/null; done
awk -F'|' '/^\| (16|132) \|/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-B1.log > $L/cells.txt
echo "best: SMs|cell|floor|A1|B1|D1|E1|F1|A2|B2|D2|E2|F2"
paste -d'|' $L/cells.txt $L/best-A1.txt $L/best-B1.txt $L/best-D1.txt $L/best-E1.txt $L/best-F1.txt $L/best-A2.txt $L/best-B2.txt $L/best-D2.txt $L/best-E2.txt $L/best-F2.txt
for n in A B D E; do echo "== NHD $n"; grep -E "_16q_4kv batch" $L/nhd-$n.log | cut -c1-90; done
echo "total $(el) s"
