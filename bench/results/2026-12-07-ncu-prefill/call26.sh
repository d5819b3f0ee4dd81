#!/usr/bin/env bash
# Session 14's last call (carry ["devrun18"]; DL=<s>): the plan's model at hd 256 (sm90_speed 2.2,
# kSm80VllmCost 1.37, src/prefill_plan.cpp) — prefix_part_ab.py again (auto should now be the
# faster of t91 / t90 on every cell), issue 17's quick seed and serving cells (no FlashInfer: its
# figures are call23's), the mixed cells, and the mixed-batch suite (its plans are the auto ones).
set -u
source scripts/devcall.sh  # el, run
DL=${DL:-200}
L=/tmp/logs26; mkdir -p $L/res; trap 'tar czf $OUT/logs26.tgz -C $L .' EXIT
[ -d /tmp/p18 ] && rm -rf /tmp/p18; tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py26 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py26 -j8 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
timeout 60 python3 bench/prefix_part_ab.py --lib $P/libmuh.so --iters 30 > $L/prefix_ab.log 2>&1
echo "prefix_ab rc $? at $(el) s"; cat $L/prefix_ab.log
run mixed 60 $P/muh_gpu_mixed_batch_tests
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
PYTHONPATH=/tmp/py26 timeout 60 python3 bench/paged_prefill.py --out $L/res --tag p26 --iters 30 --quick --serving \
  > $L/paged.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks" $L/paged.log | tail -9 | cut -c1-150
left=$(( DL - $(el) - 3 )); [ $left -gt 40 ] && left=40
[ $left -gt 15 ] && PYTHONPATH=/tmp/py26 timeout $left python3 bench/paged_prefill.py --out $L/res --tag p26 --iters 30 \
  --mixed --lib $P/libmuh.so > $L/mixed.log 2>&1
echo "mixed bench rc $? at $(el) s"; grep -vE "^clocks" $L/mixed.log | tail -5
echo "done at $(el) s"
