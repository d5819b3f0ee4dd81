#!/usr/bin/env bash
# Session 13's third call (carry ["devrun18", ".fi"]; DL=<s>): paged V a box a TMA — V's map 5-D
# with the panels as a box dim, V tiles in shared memory as [box][panel][rows] row groups that
# PV's descriptors read (prefill_sm90.cuh's v_row_offset): at page 16, 8 TMAs a tile for V instead
# of 16 (hd 128), each of the four issuing warps 2 instead of 4. Pack p18 at devrun18/COMMIT
# (recipe: ../2026-12-07-causal-key-split/call18.sh) with muh_gpu_prefill_tests added (the
# contiguous kernel's parameters changed: its SASS differs by scheduling only).
#   1. the sm90 agent's forced paged cases (pages 8 — V per panel — 16, 32, 64, 528 — V per box —
#      and 256), its chunked == whole cases, its dense cases; memcheck and racecheck on three;
#   2. the probe's serving cells (dense against pages of 16 / 64 / 128), then issue 17's serving
#      cells beside FlashInfer (built meanwhile).
set -u
source scripts/devcall.sh  # el, run
DL=${DL:-330}
L=/tmp/logs21; mkdir -p $L/res; trap 'tar czf $OUT/logs21.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py21 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py21 -j6 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
[ -d /tmp/fi/site ] || { mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi; }
( cd bench && PYTHONPATH=/tmp/fi/site MAX_JOBS=8 timeout 240 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, torch.bfloat16, torch.bfloat16, 128) for b in ('fa3', 'fa2')])
" > $L/fi-prebuild.log 2>&1; echo "rc $?" >> $L/fi-prebuild.log ) &
fi_pid=$!
run paged_t91 110 $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t91_*'
run dense_t90a 50 $P/muh_gpu_prefill_tests --gtest_filter='*/t90a_*:*PrefillPersistent*'
G='*PagedPrefillPersistent*t91_bf16_hd128_nhd_causal_split_p16*:*PagedPrefillForced*t91_fp16_hd256_nhd_noncausal_prefix_p16*:*PagedPrefillForced*t91_bf16_hd128_nhd_causal_split_chunk1_p16*'
run memcheck_vbox 40 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$G"
run racecheck_vbox 40 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$G"
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
export PYTHONPATH=/tmp/py21
for c in serving32k serving0; do
  timeout 50 python3 bench/paged_prefill_probe.py --cell $c > $L/probe_$c.log 2>&1
  echo "probe $c rc $? at $(el) s"; grep " us " $L/probe_$c.log; echo "bitwise equal arms: $(grep -c 'bitwise True' $L/probe_$c.log)"
done
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -2 $L/fi-prebuild.log | tr '\n' ' ')"
left=$(( DL - $(el) - 5 )); [ $left -gt 60 ] && left=60
[ $left -gt 20 ] && PYTHONPATH=/tmp/py21:/tmp/fi/site timeout $left python3 bench/paged_prefill.py --out $L/res --tag p21 \
  --iters 30 --serving --flashinfer > $L/paged.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks|^JIT|^prebuild" $L/paged.log | tail -4 | cut -c1-230
left=$(( DL - $(el) - 3 )); [ $left -gt 30 ] && left=30
[ $left -gt 10 ] && run chunked_t91 $left $P/muh_gpu_paged_prefill_tests --gtest_filter='*Chunked*/t91_*'
echo "done at $(el) s"
