#!/usr/bin/env bash
# context_attention_fwd's chunk part on a pool stream beside its prefix part (python/src/torch_ops.cpp;
# carry ["devrun18"]; DL=<s>; the pack of call26, the Python extension built from this tree):
# its Python tests (against SDPA in fp32; default stream, caller's stream and graph replay bitwise
# equal; fp8 caches and variants), then issue 17's quick seed and serving cells.
set -u
source scripts/devcall.sh  # el
DL=${DL:-240}
L=/tmp/logs27; mkdir -p $L/res; trap 'tar czf $OUT/logs27.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
cmake -S python -B /tmp/py27 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
  > $L/py_build.log 2>&1 && cmake --build /tmp/py27 -j16 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log
echo "py build at $(el) s: $(tail -1 $L/py_build.log)"; grep -m3 -E "error" $L/py_build.log
( cd tests/python/gpu && PYTHONPATH=/tmp/py27 timeout 120 python3 -m pytest -q -p no:cacheprovider \
  test_paged_dropins.py test_fp8_prefill.py test_variants.py -k "context_attention" > $L/pytest.log 2>&1; echo "rc $?" >> $L/pytest.log )
echo "pytest at $(el) s: $(tail -3 $L/pytest.log | tr '\n' ' ' | cut -c1-300)"
grep -E "^FAILED|Error" $L/pytest.log | head -8
PYTHONPATH=/tmp/py27 timeout 60 python3 bench/paged_prefill.py --out $L/res --tag p27 --iters 30 --quick --serving \
  > $L/paged.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks" $L/paged.log | tail -9 | cut -c1-150
echo "done at $(el) s"
