#!/usr/bin/env bash
# call40 (carry ["devrun"]): context_attention_fwd's seed cells, the V tile dim-major (pack kpy) and
# in 16-key runs (pack vpy), both with the chunk-major K tile (hd 256 fp16, targets 0;90;90a, plain,
# no fp8; an install prefix each for the Python extension): the extension built here once against
# kpy's install (the packs' C++ ABI is the same: only kernel bodies differ) and loaded with each
# pack's libmuh.so by LD_LIBRARY_PATH; its context_attention_fwd tests against SDPA on vpy (fp16,
# hd 256: what the packs have); then bench/paged_prefill.py --quick (issue 17's seed cells: fp16 hd
# 256, 4 q / 1 kv head, prefix 8k / 32k × chunk 512 / 2048 / 4096, page 16; dense, NHD and vLLM in
# one process), kpy / vpy alternately twice; then the plan against t91 / t90 on the prefix parts.
set -u
source scripts/devcall.sh  # el
L=/tmp/logs40; mkdir -p $L/res; trap 'tar czf $OUT/logs40.tgz -C $L .' EXIT
for p in kpy vpy; do [ -d /tmp/$p ] || tar xJf devrun/$p.tar.xz -C /tmp; done
export PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
LD_LIBRARY_PATH=/tmp/kpy:/usr/local/cuda/lib64 cmake -S python -B /tmp/py40 -DCMAKE_BUILD_TYPE=Release \
  -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=/tmp/kpy/inst/lib/cmake/muh > $L/py_build.log 2>&1 \
  && cmake --build /tmp/py40 -j16 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log
echo "py build at $(el) s: $(tail -1 $L/py_build.log)"; grep -m3 -E "error" $L/py_build.log
( cd tests/python/gpu && LD_LIBRARY_PATH=/tmp/vpy:/usr/local/cuda/lib64 PYTHONPATH=/tmp/py40 timeout 120 python3 -m pytest -q \
  -p no:cacheprovider test_paged_dropins.py -k "context_attention_fwd_matches_sdpa and fp16 and head_dims0" > $L/pytest.log 2>&1
  echo "rc $?" >> $L/pytest.log )
echo "pytest (vpy) at $(el) s: $(tail -3 $L/pytest.log | tr '\n' ' ' | cut -c1-300)"
grep -E "^FAILED|Error" $L/pytest.log | head -8
for p in kpy vpy; do  # which libmuh.so each arm loads
  echo "$p loads $(LD_LIBRARY_PATH=/tmp/$p:/usr/local/cuda/lib64 PYTHONPATH=/tmp/py40 python3 -c "import muh.ops
print([l.split()[-1] for l in open('/proc/self/maps') if 'libmuh.so' in l][:1])" 2>&1 | tail -1)"
done
for r in 1 2; do
  for p in kpy vpy; do
    LD_LIBRARY_PATH=/tmp/$p:/usr/local/cuda/lib64 PYTHONPATH=/tmp/py40 timeout 90 python3 bench/paged_prefill.py \
      --out $L/res --tag $p$r --iters 30 --quick > $L/paged_$p$r.log 2>&1
    echo "paged $p $r rc $? at $(el) s"; grep -vE "^clocks" $L/paged_$p$r.log | tail -8 | cut -c1-150
  done
done
# The plan against both agents on the prefix parts (kSm80VllmCost 1.08 since call37; not re-timed):
# vpy, the seed's six prefix cells, t91 / t90 / the plan.
LD_LIBRARY_PATH=/tmp/vpy:/usr/local/cuda/lib64 timeout 120 python3 bench/prefix_part_ab.py --lib /tmp/vpy/libmuh.so \
  --only 8192:512,8192:2048,8192:4096,32768:512,32768:2048,32768:4096 --targets -1,91,90 --iters 30 > $L/plan_vpy.log 2>&1
echo "plan vpy rc $? at $(el) s"; grep -E "^(float|bfloat)" $L/plan_vpy.log
echo "done at $(el) s"
