#!/usr/bin/env bash
# Device call 2: ncu of the hd-256 vLLM TMA decode CTA (A: 4w x 2s committed; B: 12w x 1s) on
# the bf16 cell hd256 16q/4kv b1 x 32k, 16 forced splits (64 CTAs, 2048 tokens each, one per SM);
# seed grid (fp16) for A, C (A without the per-tile proxy fence), D (A with 4 QK accumulator sets).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs2; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm --format=csv > $L/env.txt 2>&1
row='{k16Bit, kHd256, Agent::sm80, 4, 64, 2, 1, 128, true, kSmemCap,'
for c in A:4:64:2:128:fp16,bf16 B:12:192:1:192:fp16,bf16 C:4:64:2:128:fp16 D:4:64:2:128:fp16; do
  IFS=: read n w t s p dts <<< "$c"; d=/tmp/s$n; rm -rf $d; mkdir -p $d
  tar cf - --exclude=./devrun --exclude='./build*' . | (cd $d && tar xf -)
  sed -i "s/$row/{k16Bit, kHd256, Agent::sm80, $w, $t, $s, 1, $p, true, kSmemCap,/" $d/include/muh/tuning/tuning_sm90.hpp
  sed -i 's/p.num_stages >= 2);/p.num_stages >= 1);/' $d/include/muh/tuning/policy.hpp
  [ -f devrun/$n.patch ] && patch -d $d -p1 < devrun/$n.patch >> $L/sed-check.txt 2>&1
  echo "$n: $(grep -c "Agent::sm80, $w, $t, $s, 1, $p, true" $d/include/muh/tuning/tuning_sm90.hpp)" >> $L/sed-check.txt
  cli="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=${dts/,/;} -DMUH_TARGETS=0;90 -DMUH_VARIANTS=plain -DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF"
  ( cmake -S $d -B /tmp/b$n $cli && cmake --build /tmp/b$n -j4 --target muh_cli ) > $L/build-$n.log 2>&1 &
done
wait; echo "built at $(el) s; $(cat $L/sed-check.txt | tr '\n' ' ')"
for n in A C D; do b=/tmp/b$n/muh; [ -x $b ] || { echo "no $n"; tail -5 $L/build-$n.log; continue; }
  $b bench decode --grid seed --emulate bi-v100 --no-portable > $L/grid-$n.log 2>&1; echo "grid $n rc=$? at $(el) s"
done
for n in A B; do b=/tmp/b$n/muh; [ -x $b ] || continue
  $b bench decode --only hd256:1:32768 --kv-layout vllm --splits 16 > $L/cell-$n.log 2>&1; echo "cell $n rc=$? at $(el) s"
  timeout 150 ncu --clock-control none -k regex:decode_sm80_tma -s 3 -c 1 --set full --import-source no -o $L/ncu-$n \
    $b bench decode --only hd256:1:32768 --kv-layout vllm --splits 16 > $L/ncu-run-$n.log 2>&1; echo "ncu $n rc=$? at $(el) s"
  ncu -i $L/ncu-$n.ncu-rep --page details > $L/details-$n.txt 2>&1
  ncu -i $L/ncu-$n.ncu-rep --page source --print-source sass --csv > $L/sass-$n.csv 2>&1
  ncu -i $L/ncu-$n.ncu-rep --page raw --csv > $L/raw-$n.csv 2>&1
  echo "reports $n at $(el) s"
done
echo "== grids (best: A C D)"
for x in A C D; do awk -F'|' '/^\| (16|132) \|/{gsub(/^ +| +$/,"",$7); print $7}' $L/grid-$x.log > $L/best-$x.txt; done
awk -F'|' '/^\| (16|132) \|/{gsub(/ +/," "); print $2 "|" $4 "|" $8}' $L/grid-A.log > $L/cells.txt
paste -d'|' $L/cells.txt $L/best-A.txt $L/best-C.txt $L/best-D.txt
for n in A B; do echo "== cell $n"; grep -E "batch|splits" $L/cell-$n.log | head -4; echo "== stalls $n"; python3 - $L/raw-$n.csv <<'PY'
import csv,sys
r=list(csv.reader(open(sys.argv[1])))
h=next((i for i,x in enumerate(r) if 'gpu__time_duration.sum' in x), None)
if h is None: print('no raw'); sys.exit()
hd,u,v=r[h],r[h+1],r[h+2]
for i,k in enumerate(hd):
  if ("warp_latency_issue_stalled" in k and k.endswith(".ratio")) or k in ("gpu__time_duration.sum","smsp__warps_active.avg.per_cycle_active","smsp__issue_active.avg.per_cycle_active","dram__bytes_read.sum.per_second","launch__registers_per_thread","smsp__average_warp_latency_per_inst_issued.ratio","smsp__inst_executed.sum","sm__cycles_elapsed.avg"):
    try:
      if float(v[i].replace(',',''))<0.05: continue
    except: pass
    print(k,v[i],u[i])
PY
done
for n in A B; do echo "== details $n"; grep -E "Duration|Registers Per|Warp Cycles Per Issued|No Eligible|Eligible Warps|DRAM Throughput|One or More" $L/details-$n.txt | head -12; done
tar czf "$OUT/logs2.tgz" -C $L --exclude='*.ncu-rep' . ; cp $L/ncu-*.ncu-rep "$OUT/" 2>/dev/null
echo "total $(el) s"
