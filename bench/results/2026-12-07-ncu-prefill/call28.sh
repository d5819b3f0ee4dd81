#!/usr/bin/env bash
# The session's wider checks (carry ["devrun18"]; DL=<s>): `muh verify --quick` (its paged family
# now skips a forced sm90 row only on vLLM pages of 8, tools/verify_paged_prefill.cpp) and the whole
# Python GPU suite (the vLLM layout's flash_attn_varlen_func and mixed routes now plan the Hopper
# agent; context_attention_fwd's two streams).
set -u
source scripts/devcall.sh  # el
DL=${DL:-360}
L=/tmp/logs28; mkdir -p $L; trap 'tar czf $OUT/logs28.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $L/gpu.txt
( [ -d /tmp/py27 ] && cp -r /tmp/py27 /tmp/py28 2>/dev/null; cmake -S python -B /tmp/py28 -DCMAKE_BUILD_TYPE=Release \
    -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh > $L/py_build.log 2>&1 && \
    cmake --build /tmp/py28 -j12 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
timeout 150 $P/muh verify --quick > $L/verify.log 2>&1
echo "verify rc $? at $(el) s"; grep -iE "fail|not run|summary|passed|rows" $L/verify.log | tail -8 | cut -c1-200
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
left=$(( DL - $(el) - 5 ))
( cd tests/python/gpu && PYTHONPATH=/tmp/py28 timeout $left python3 -m pytest -q -p no:cacheprovider . \
  > $L/pytest.log 2>&1; echo "rc $?" >> $L/pytest.log )
echo "pytest at $(el) s: $(tail -3 $L/pytest.log | tr '\n' ' ' | cut -c1-300)"
grep -E "^FAILED|^ERROR" $L/pytest.log | head -8
echo "done at $(el) s"
