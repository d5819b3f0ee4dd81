#!/usr/bin/env bash
# call43 (carry ["devrun"]; right after call42, on its warm machine: its extension build /tmp/py42
# is reused): racecheck on three fused cases; call41's measurements on pack ctx (this session's
# code: the fused context launch) —
#   1. prefix_part_ab.py: the plan against t91 / t90 on the prefix parts (kSm80VllmCost 1.05, not
#      timed since call37 set 1.08), the seed's six cells and the serving 32k cell;
#   2. bench/paged_prefill.py --serving: the serving cells (bf16 hd 128, 32 / 8 heads, 8 × 2048
#      over 0 / 32k), dense / NHD / the op / the one call over the vLLM cache;
#   3. bench/paged_prefill.py --mixed: the mixed-batch cells against separate prefill + decode calls;
#   4. muh verify --quick (its context rows new), last: the rest of the time.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs43; mkdir -p $L/res; trap 'tar czf $OUT/logs43.tgz -C $L .' EXIT
[ -d /tmp/ctx ] || tar xJf devrun/ctx.tar.xz -C /tmp
P=/tmp/ctx; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
CS=/usr/local/cuda/bin/compute-sanitizer
run racecheck 120 $CS --tool racecheck --error-exitcode 1 $P/muh_gpu_paged_prefill_tests \
  --gtest_filter='PagedPrefill/ContextPrefill.*t90_fp16_hd256_ctx_seedlike*:PagedPrefill/ContextPrefill.*t90_fp16_hd256_ctx_chunk7*:PagedPrefill/ContextPrefill.*t90_bf16_hd128_ctx_varlen*'
timeout 120 python3 bench/prefix_part_ab.py --lib $P/libmuh.so --targets=-1,91,90 --iters 30 > $L/plan.log 2>&1
echo "plan rc $? at $(el) s"; grep -E "^(float|bfloat)" $L/plan.log
if [ ! -f /tmp/py42/build.ninja ] && [ ! -f /tmp/py42/Makefile ]; then
  cmake -S python -B /tmp/py42 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON \
    -Dmuh_DIR=$P/inst/lib/cmake/muh > $L/py_build.log 2>&1 && cmake --build /tmp/py42 -j16 >> $L/py_build.log 2>&1
  echo "py build rc $? at $(el) s"
fi
PYTHONPATH=/tmp/py42 timeout 120 python3 bench/paged_prefill.py --out $L/res --tag ctx-serving --iters 30 --serving \
  > $L/serving.log 2>&1
echo "serving rc $? at $(el) s"; grep -vE "^clocks" $L/serving.log | tail -4 | cut -c1-200
PYTHONPATH=/tmp/py42 timeout 100 python3 bench/paged_prefill.py --out $L/res --tag ctx-mixed --iters 30 --mixed \
  --lib $P/libmuh.so > $L/mixed.log 2>&1
echo "mixed rc $? at $(el) s"; grep -vE "^clocks" $L/mixed.log | tail -10 | cut -c1-200
timeout 150 $P/muh verify --quick > $L/verify.log 2>&1
echo "verify rc $? at $(el) s: $(grep -iE 'context|pass|fail' $L/verify.log | tail -8 | tr '\n' ' ' | cut -c1-500)"
echo "done at $(el) s"
