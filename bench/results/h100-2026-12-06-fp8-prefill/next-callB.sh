#!/usr/bin/env bash
# Next session's call B (written at the end of session 7, not yet run; carry ["devrun7", ".fi"];
# ~9 min; on call A's warm machine it reuses /tmp/p7 and /tmp/py). The measurements issues 22 and
# 17 owe since f5cdebe (every consumer thread arrives on a Q buffer's free barrier; racecheck 0
# hazards in session 7, speed not yet timed): FlashInfer's JIT in the background (fa3/fa2 prefill,
# bf16 hd 64/128/256 and fp16 hd 256), then bench/compare_torch.py --flashinfer on p7 (the issue-22
# grid: cuDNN, FA2, FI fa3/fa2, the GEMM, one process) and bench/paged_prefill.py --quick --serving
# --flashinfer (the seed's 4/1 cells at 8k/32k and issue 17's serving cells: dense, NHD, vLLM
# layout and FlashInfer's paged prefill, one process).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
[ -d /tmp/p7 ] || tar xJf devrun7/p7.tar.xz -C /tmp
P=/tmp/p7; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi
( cd bench && PYTHONPATH=/tmp/fi/site MAX_JOBS=12 timeout 330 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, dt, dt, hd) for b in ('fa3', 'fa2') for dt, hd in
             ((torch.bfloat16, 64), (torch.bfloat16, 128), (torch.bfloat16, 256), (torch.float16, 256))])
" > $OUT/fi-prebuild.log 2>&1; echo "rc $?" >> $OUT/fi-prebuild.log ) &
fi_pid=$!
if [ ! -d /tmp/py/muh ]; then
  cmake -S python -B /tmp/py -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $OUT/py_build.log 2>&1 && cmake --build /tmp/py -j4 >> $OUT/py_build.log 2>&1; echo "py build rc $? at $(el) s"
fi
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -1 $OUT/fi-prebuild.log)"; grep -c "JIT FAILED" $OUT/fi-prebuild.log
PYTHONPATH=/tmp/fi/site timeout 200 python3 bench/compare_torch.py --lib $P/libmuh.so --out $OUT --tag p7 --iters 20 \
  --flashinfer > $OUT/compare_p7.log 2>&1
echo "compare p7 rc $? at $(el) s"; grep -vE "^clocks" $OUT/compare_p7.log | tail -26
left=$(( 585 - $(el) )); [ $left -gt 240 ] && left=240
[ $left -gt 30 ] && PYTHONPATH=/tmp/py:/tmp/fi/site timeout $left python3 bench/paged_prefill.py --out $OUT --tag p7 \
  --iters 30 --quick --serving --flashinfer > $OUT/paged_bench.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks|^JIT" $OUT/paged_bench.log | tail -12
cd $OUT && tar czf logs.tgz *.log *.txt 2>/dev/null; echo "done at $(el) s"
