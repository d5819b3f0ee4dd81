#!/usr/bin/env bash
# Session 13's second call (carry ["devrun18", ".fi"]; DL=<s>): the sm90 agent's paged NHD boxes
# issued by four producer warps (box j by warp j % 4; call19 found one warp issuing a page-16 tile's
# 16 TMAs the limit: 0.80x dense with pages of 16, 1.03x with pages of 64). Pack p18 as rebuilt
# at devrun18/COMMIT ( recipe in ../2026-12-07-causal-key-split/call18.sh).
#   1. the sm90 agent's forced paged cases and persistent schedule (*/t91_*), chunked == whole, the
#      mixed batches; racecheck on three (the warps' claims through named barrier 5);
#   2. bench/paged_prefill_probe.py: four issuing warps against one (MUH_SM90_PAGED_KV=warp1) on
#      the serving cells, with pages of 16 / 64 / 128;
#   3. issue 17's table: bench/paged_prefill.py --quick --serving --flashinfer (FlashInfer 0.7.2
#      JIT-built meanwhile), then the mixed-batch cells.
# Meanwhile the Python extension builds against the pack's install prefix. (The A/B knob,
# MUH_SM90_PAGED_KV=warp1, and the probe's *_warp1 arms were removed after this call: at later
# commits the probe times four issuing warps only.)
set -u
source scripts/devcall.sh  # el, run
DL=${DL:-540}
L=/tmp/logs20; mkdir -p $L/res; trap 'tar czf $OUT/logs20.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py20 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py20 -j6 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
[ -d /tmp/fi/site ] || { mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi; }
( cd bench && PYTHONPATH=/tmp/fi/site MAX_JOBS=8 timeout 360 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, dt, dt, hd) for b in ('fa3', 'fa2') for dt, hd in ((torch.bfloat16, 128), (torch.float16, 256))])
" > $L/fi-prebuild.log 2>&1; echo "rc $?" >> $L/fi-prebuild.log ) &
fi_pid=$!
run paged_t91 120 $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t91_*:*Chunked*'
run mixed_tests 40 $P/muh_gpu_mixed_batch_tests
G='*PagedPrefillPersistent*t91_bf16_hd128_nhd_causal_split_p16*:*PagedPrefillForced*t91_fp16_hd256_nhd_noncausal_prefix_p16*:*PagedPrefillForced*t91_bf16_hd128_nhd_causal_split_chunk1_p16*'
run racecheck_issuers 50 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$G"
# (memcheck: the boxes' addresses are call19's; racecheck for the warps' claims)
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
export PYTHONPATH=/tmp/py20
for c in serving32k serving0; do
  timeout 60 python3 bench/paged_prefill_probe.py --cell $c > $L/probe_$c.log 2>&1
  echo "probe $c rc $? at $(el) s"; grep " us " $L/probe_$c.log; echo "bitwise equal arms: $(grep -c 'bitwise True' $L/probe_$c.log)"
done
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -2 $L/fi-prebuild.log | tr '\n' ' ')"
left=$(( DL - $(el) - 70 )); [ $left -gt 200 ] && left=200
[ $left -gt 40 ] && PYTHONPATH=/tmp/py20:/tmp/fi/site timeout $left python3 bench/paged_prefill.py --out $L/res --tag p20 \
  --iters 30 --quick --serving --flashinfer > $L/paged.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks|^JIT|^prebuild" $L/paged.log | tail -10 | cut -c1-220
left=$(( DL - $(el) - 5 )); [ $left -gt 70 ] && left=70
[ $left -gt 30 ] && timeout $left python3 bench/paged_prefill.py --out $L/res --tag p20 --iters 30 --mixed \
  --lib $P/libmuh.so > $L/mixed.log 2>&1
echo "mixed bench rc $? at $(el) s"; grep -vE "^clocks" $L/mixed.log | tail -6
echo "done at $(el) s"
