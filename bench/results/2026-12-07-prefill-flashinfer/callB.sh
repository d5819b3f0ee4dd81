#!/usr/bin/env bash
# Session 11's prefill call (carry ["devrun7", ".fi"]; ~9 min): the FlashInfer measurements issues
# 22 and 17 owe, never run before (bench/results/h100-2026-12-06-fp8-prefill/next-callB.sh, written
# in session 7, is this call on a pack of 040869a). Pack p7 rebuilt from main (bee6d36) on the CPU
# machine: libmuh.so, its install prefix (inst/) and `muh`; SASS sm_90, targets 0;90;90a, hd
# 64/128/256, fp16/bf16, the plain variant kind, no fp8 caches (MUH_VARIANTS=plain, MUH_KV_FP8="": the
# pack of both kinds and fp8 was 83 MB, past the carry limit). .fi/ as scripts/flashinfer_bundle.py's
# header says. While FlashInfer's prefill modules JIT-compile (fa3/fa2: bf16 hd 64/128/256, fp16
# hd 256) the Python extension builds against the pack's install prefix; then
#   1. bench/compare_torch.py --flashinfer: issue 22's grid (muh's sm90 agent and its sm80 agent
#      forced, cuDNN, SDPA FLASH, FlashInfer fa3/fa2, the bf16 GEMM; one process);
#   2. bench/paged_prefill.py --quick --serving --flashinfer: the seed's 4/1 cells at 8k/32k and
#      issue 17's 8 × 2048-chunk serving cells (dense, NHD, vLLM layout, FlashInfer's paged prefill);
#   3. bench/paged_prefill.py --mixed: the mixed-batch cells, with what DL leaves.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logsB; mkdir -p $L/res; trap 'tar czf $OUT/logsB.tgz -C $L .' EXIT
[ -d /tmp/p7 ] || tar xJf devrun7/p7.tar.xz -C /tmp
P=/tmp/p7; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
( cd bench && PYTHONPATH=/tmp/fi/site MAX_JOBS=12 timeout 330 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, dt, dt, hd) for b in ('fa3', 'fa2') for dt, hd in
             ((torch.bfloat16, 64), (torch.bfloat16, 128), (torch.bfloat16, 256), (torch.float16, 256))])
" > $L/fi-prebuild.log 2>&1; echo "rc $?" >> $L/fi-prebuild.log ) &
fi_pid=$!
if [ ! -d /tmp/py/muh ]; then
  cmake -S python -B /tmp/py -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py -j12 >> $L/py_build.log 2>&1; echo "py build rc $? at $(el) s"
fi
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -1 $L/fi-prebuild.log); JIT failures: $(grep -c 'JIT FAILED' $L/fi-prebuild.log)"
DL=${DL:-570}
PYTHONPATH=/tmp/fi/site timeout 200 python3 bench/compare_torch.py --lib $P/libmuh.so --out $L/res --tag p7 --iters 20 \
  --flashinfer > $L/compare.log 2>&1
echo "compare rc $? at $(el) s"; grep -vE "^clocks" $L/compare.log | tail -30
left=$(( DL - $(el) - 15 )); [ $left -gt 200 ] && left=200
[ $left -gt 30 ] && PYTHONPATH=/tmp/py:/tmp/fi/site timeout $left python3 bench/paged_prefill.py --out $L/res --tag p7 \
  --iters 30 --quick --serving --flashinfer > $L/paged.log 2>&1
echo "paged rc $? at $(el) s"; grep -vE "^clocks|^JIT" $L/paged.log | tail -10
left=$(( DL - $(el) - 10 )); [ $left -gt 120 ] && left=120
[ $left -gt 30 ] && PYTHONPATH=/tmp/py timeout $left python3 bench/paged_prefill.py --out $L/res --tag p7 --iters 30 \
  --mixed --lib $P/libmuh.so > $L/mixed.log 2>&1
echo "mixed rc $? at $(el) s"; grep -vE "^clocks" $L/mixed.log | tail -8
echo "done at $(el) s"
