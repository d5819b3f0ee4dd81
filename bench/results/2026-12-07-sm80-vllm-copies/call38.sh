#!/usr/bin/env bash
# call38 (carry ["devrun"]): context_attention_fwd's seed cells with the chunk-major vLLM K tile
# (pack kpy: the tree of the call37 results commit — hd 256 fp16, targets 0;90;90a, plain, no fp8 —
# with its install prefix kpy/inst for the Python extension): the extension built here against it,
# its context_attention_fwd tests against SDPA (fp16, hd 256: what the pack has), then bench/paged_prefill.py --quick (issue 17's seed cells: fp16
# hd 256, 4 q / 1 kv head, prefix 8k / 32k × chunk 512 / 2048 / 4096, page 16; dense, NHD and
# vLLM in one process; the serving cells are bf16 hd 128, not in this pack).
set -u
source scripts/devcall.sh  # el
L=/tmp/logs38; mkdir -p $L/res; trap 'tar czf $OUT/logs38.tgz -C $L .' EXIT
[ -d /tmp/kpy ] || tar xJf devrun/kpy.tar.xz -C /tmp
P=/tmp/kpy; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
cmake -S python -B /tmp/py38 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
  > $L/py_build.log 2>&1 && cmake --build /tmp/py38 -j16 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log
echo "py build at $(el) s: $(tail -1 $L/py_build.log)"; grep -m3 -E "error" $L/py_build.log
( cd tests/python/gpu && PYTHONPATH=/tmp/py38 timeout 120 python3 -m pytest -q -p no:cacheprovider \
  test_paged_dropins.py -k "context_attention_fwd_matches_sdpa and fp16 and head_dims0" > $L/pytest.log 2>&1; echo "rc $?" >> $L/pytest.log )
echo "pytest at $(el) s: $(tail -3 $L/pytest.log | tr '\n' ' ' | cut -c1-300)"
grep -E "^FAILED|Error" $L/pytest.log | head -8
for r in 1 2; do
  PYTHONPATH=/tmp/py38 timeout 90 python3 bench/paged_prefill.py --out $L/res --tag kpy$r --iters 30 --quick > $L/paged$r.log 2>&1
  echo "paged bench $r rc $? at $(el) s"; grep -vE "^clocks" $L/paged$r.log | tail -8 | cut -c1-150
done
echo "done at $(el) s"
