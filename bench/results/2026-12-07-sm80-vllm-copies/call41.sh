#!/usr/bin/env bash
# call41 (carry ["devrun"]): pack vsrv — the tree of call39/40 (V tiles in 16-key runs), hd 128/256,
# fp16/bf16, targets 0;90;90a, plain, no fp8, with an install prefix for the Python extension:
# (in this order: 3, 1, 2 — the plan first, it needs no extension build)
#   1. bench/paged_prefill.py --quick --serving: the seed's 4/1 cells at 8k / 32k and the serving
#      cells (bf16 hd 128, 32/8 heads, 8 × 2048 over 0 / 32k), dense / NHD / vLLM in one process;
#   2. bench/paged_prefill.py --mixed: the mixed-batch cells against separate prefill + decode calls;
#   3. prefix_part_ab.py: the plan against t91 / t90 on the prefix parts (kSm80VllmCost 1.08 since
#      call37, not re-timed), the seed's six cells and the serving 32k cell.
set -u
source scripts/devcall.sh  # el
L=/tmp/logs41; mkdir -p $L/res; trap 'tar czf $OUT/logs41.tgz -C $L .' EXIT
[ -d /tmp/vsrv ] || tar xJf devrun/vsrv.tar.xz -C /tmp
P=/tmp/vsrv; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
timeout 120 python3 bench/prefix_part_ab.py --lib $P/libmuh.so --targets=-1,91,90 --iters 30 > $L/plan.log 2>&1
echo "plan rc $? at $(el) s"; grep -E "^(float|bfloat)" $L/plan.log
cmake -S python -B /tmp/py41 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
  > $L/py_build.log 2>&1 && cmake --build /tmp/py41 -j16 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log
echo "py build at $(el) s: $(tail -1 $L/py_build.log)"; grep -m3 -E "error" $L/py_build.log
PYTHONPATH=/tmp/py41 timeout 100 python3 bench/paged_prefill.py --out $L/res --tag vsrv --iters 30 --quick --serving \
  > $L/paged.log 2>&1
echo "paged rc $? at $(el) s"; grep -vE "^clocks" $L/paged.log | tail -10 | cut -c1-200
PYTHONPATH=/tmp/py41 timeout 80 python3 bench/paged_prefill.py --out $L/res --tag vsrv-mixed --iters 30 --mixed \
  --lib $P/libmuh.so > $L/mixed.log 2>&1
echo "mixed rc $? at $(el) s"; grep -vE "^clocks" $L/mixed.log | tail -10 | cut -c1-160
echo "done at $(el) s"
