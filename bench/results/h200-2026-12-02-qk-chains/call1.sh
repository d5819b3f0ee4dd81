#!/usr/bin/env bash
# Device call 1 (session 2026-12-02 #6): where the hd-256 sm80 decode CTA spends its time.
# ncu (full set + per-SASS stall samples) of the vLLM TMA kernel at 2048 tokens per CTA, one CTA
# per SM (hd256 16q/4kv, batch 1 x 32k, 16 forced splits = 64 CTAs), for the committed row
# 4 warps x 2 stages (A) and 12 x 1 (B); the seed grid for both.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
cli="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16 -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
L=/tmp/logs1; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm --format=csv > $L/env.txt 2>&1
row='{k16Bit, kHd256, Agent::sm80, 4, 64, 2, 1, 128, true, kSmemCap,'
for c in A:4:64:2:128 B:12:192:1:192; do
  IFS=: read n w t s p <<< "$c"; d=/tmp/s$n; rm -rf $d; mkdir -p $d
  tar cf - --exclude=./devrun --exclude='./build*' . | (cd $d && tar xf -)
  sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, $w, $t, $s, 1, $p, true, kSmemCap,/" $d/include/muh/tuning/tuning_sm90.hpp
  sed -i 's/p.num_stages >= 2);/p.num_stages >= 1);/' $d/include/muh/tuning/policy.hpp
  echo "$n: $(grep -c "Agent::sm80, $w, $t, $s, 1, $p, true" $d/include/muh/tuning/tuning_sm90.hpp)" >> $L/sed-check.txt
  ( cmake -S $d -B /tmp/b$n $cli && cmake --build /tmp/b$n -j8 --target muh_cli ) > $L/build-$n.log 2>&1 &
done
wait; echo "built at $(el) s; $(cat $L/sed-check.txt | tr '\n' ' ')"
for n in A B; do b=/tmp/b$n/muh; [ -x $b ] || { echo "no $n"; tail -5 $L/build-$n.log; continue; }
  $b bench decode --grid seed --emulate bi-v100 --no-portable > $L/grid-$n.log 2>&1; echo "grid $n rc=$? at $(el) s"
  $b bench decode --only hd256:1:32768 --kv-layout vllm --splits 16 > $L/cell-$n.log 2>&1; echo "cell $n rc=$? at $(el) s"
  timeout 150 ncu --clock-control none -k regex:decode_sm80_tma -s 3 -c 1 --set full --import-source no -o $L/ncu-$n \
    $b bench decode --only hd256:1:32768 --kv-layout vllm --splits 16 > $L/ncu-run-$n.log 2>&1; echo "ncu $n rc=$? at $(el) s"
  ncu -i $L/ncu-$n.ncu-rep --page details > $L/details-$n.txt 2>&1
  ncu -i $L/ncu-$n.ncu-rep --page source --print-source sass --csv > $L/sass-$n.csv 2>&1
  ncu -i $L/ncu-$n.ncu-rep --page raw --csv > $L/raw-$n.csv 2>&1
  echo "reports $n at $(el) s"
done
grep -h "spill\|registers" $L/build-*.log | grep -i "decode_sm80_tma" | head -20 > $L/spills.txt
for n in A B; do echo "== $n"; grep -E "^\|.* (16|132) \|" $L/grid-$n.log | head -40; grep -E "hd256" $L/cell-$n.log | head -5; done
for n in A B; do echo "== stalls $n"; tr "," "\n" < $L/raw-$n.csv | head -0; python3 - $L/raw-$n.csv <<'PY'
import csv,sys
r=list(csv.reader(open(sys.argv[1])))
if len(r)>=3:
  h,u,v=r[0],r[1],r[2]
  for i,k in enumerate(h):
    if ("warps_issue_stalled" in k and k.endswith("per_warp_active.pct")) or k in ("gpu__time_duration.sum","smsp__warps_active.avg.per_cycle_active","smsp__issue_active.avg.per_cycle_active","dram__bytes_read.sum.per_second","launch__registers_per_thread"):
      print(k,v[i],u[i])
PY
done
for n in A B; do echo "== details $n"; grep -E "Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per|No Eligible|Stall|DRAM Throughput|Memory Throughput|L2 Hit|Eligible Warps" $L/details-$n.txt | head -40; done
tar czf "$OUT/logs1.tgz" -C $L --exclude='*.ncu-rep' . ; cp $L/ncu-*.ncu-rep "$OUT/" 2>/dev/null
echo "total $(el) s"
