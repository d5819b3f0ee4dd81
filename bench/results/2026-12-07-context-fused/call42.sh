#!/usr/bin/env bash
# call42 (carry ["devrun"]): context_attention_fwd's two parts in one launch (plan_context_prefill,
# context_prefill). Pack ctx (hd 128/256, fp16/bf16, targets 0;90;90a, plain, no fp8, with an install
# prefix for the Python extension):
#   1. muh_gpu_paged_prefill_tests' new cases (ContextPrefill*; the other kernels' SASS is the
#      same as before: scripts/sass_diff.sh against pack vsrv, 18 kernels identical), then
#      compute-sanitizer memcheck on the fused cases of the sm80 row (racecheck: call43);
#   2. the extension built against the pack's install; its context_attention_fwd tests (SDPA, the
#      fused cases among them; streams and graph replay);
#   3. bench/paged_prefill.py --quick (the seed's 4 / 1 cells at 8k / 32k): dense, NHD, the op, the
#      one call over the vLLM cache — MUH_CONTEXT_FUSE=0 (two parts) and 1 (fused) alternately twice.
set -u
source scripts/devcall.sh  # el, run
L=/tmp/logs42; mkdir -p $L/res; trap 'tar czf $OUT/logs42.tgz -C $L .' EXIT
[ -d /tmp/ctx ] || tar xJf devrun/ctx.tar.xz -C /tmp
P=/tmp/ctx; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
run paged 150 $P/muh_gpu_paged_prefill_tests --gtest_filter='*Context*'
grep -cE "^\[       OK \] PagedPrefill/ContextPrefill" $L/paged.log | sed 's/^/ContextPrefill OK: /'
CS=/usr/local/cuda/bin/compute-sanitizer
run memcheck 150 $CS --tool memcheck --error-exitcode 1 $P/muh_gpu_paged_prefill_tests \
  --gtest_filter='PagedPrefill/ContextPrefill.*t90_fp16_hd256*:PagedPrefill/ContextPrefill.*t90_bf16_hd128*:ContextPrefillBadCalls.*'
cmake -S python -B /tmp/py42 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
  > $L/py_build.log 2>&1 && cmake --build /tmp/py42 -j16 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log
echo "py build at $(el) s: $(tail -1 $L/py_build.log)"; grep -m3 -E "error" $L/py_build.log
( cd tests/python/gpu && PYTHONPATH=/tmp/py42 timeout 150 python3 -m pytest -q -p no:cacheprovider test_paged_dropins.py \
  -k "context_attention_fwd" > $L/pytest.log 2>&1; echo "rc $?" >> $L/pytest.log )
echo "pytest at $(el) s: $(tail -3 $L/pytest.log | tr '\n' ' ' | cut -c1-300)"
grep -E "^FAILED|Error" $L/pytest.log | head -8
for r in 1 2; do
  for f in 0 1; do
    MUH_CONTEXT_FUSE=$f PYTHONPATH=/tmp/py42 timeout 90 python3 bench/paged_prefill.py --out $L/res --tag fuse$f-$r \
      --iters 30 --quick > $L/paged_fuse$f-$r.log 2>&1
    echo "paged fuse=$f $r rc $? at $(el) s"; grep -vE "^clocks" $L/paged_fuse$f-$r.log | tail -7 | cut -c1-200
  done
done
echo "done at $(el) s"
