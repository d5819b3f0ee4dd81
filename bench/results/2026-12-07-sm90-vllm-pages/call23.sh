#!/usr/bin/env bash
# Session 14's second call (carry ["devrun18", ".fi"]; DL=<s>): the sm90 agent reads vLLM's pages
# (key boxes unswizzled core matrices, value boxes K-major under the 32-byte swizzle, PV by
# wgmma with B K-major). Pack p18 at devrun18/COMMIT (recipe: ../2026-12-07-causal-key-split/
# call18.sh, plus muh_gpu_prefill_tests, muh_gpu_prefill_variants_tests and
# muh_gpu_paged_prefill_fp8_tests).
#   1. the maps encode (PagedPrefillSm90Maps), then the sm90 agent's forced vLLM-layout cases
#      (every shape, pages 8 — walks on — 16, 32, 64, 256, 528, persistent schedule, chunked ==
#      whole), memcheck and racecheck on three; the variant and fp8 suites' sm_90a vLLM cases
#      (their expectations moved: the layout is no longer the reason the sm90 row is passed);
#      the mixed-batch suite (its vLLM batches now plan the sm90 agent);
#   2. issue 17's table beside FlashInfer (the vLLM column is context_attention_fwd), then the
#      mixed cells; the NHD forced cases last, as a regression check, in what time is left.
set -u
source scripts/devcall.sh  # el, run
DL=${DL:-450}
L=/tmp/logs23; mkdir -p $L/res; trap 'tar czf $OUT/logs23.tgz -C $L .' EXIT
[ -d /tmp/p18 ] || tar xJf devrun18/p18.tar.xz -C /tmp
P=/tmp/p18; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
( cmake -S python -B /tmp/py23 -DCMAKE_BUILD_TYPE=Release -DMUH_PYTHON_USE_INSTALLED=ON -Dmuh_DIR=$P/inst/lib/cmake/muh \
    > $L/py_build.log 2>&1 && cmake --build /tmp/py23 -j6 >> $L/py_build.log 2>&1; echo "rc $?" >> $L/py_build.log ) &
py_pid=$!
[ -d /tmp/fi/site ] || { mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-0.7.2-cp312-trim.tar.xz -C /tmp/fi; }
( cd bench && PYTHONPATH=/tmp/fi/site MAX_JOBS=8 timeout 300 python3 -c "
import torch, flashinfer_peer as fp
fp.prebuild([('prefill', b, dt, dt, hd) for b in ('fa3', 'fa2') for dt, hd in ((torch.bfloat16, 128), (torch.float16, 256))])
" > $L/fi-prebuild.log 2>&1; echo "rc $?" >> $L/fi-prebuild.log ) &
fi_pid=$!
run maps 30 $P/muh_gpu_paged_prefill_tests --gtest_filter='*PagedPrefillSm90Maps*'
run vllm_t91 150 $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t91_*vllm*'
G='*PagedPrefillPersistent*t91_bf16_hd128_vllm_causal_split_p16*:*PagedPrefillForced*t91_fp16_hd256_vllm_many_pages_varlen_gqa6_p528*:*PagedPrefillForced*t91_bf16_hd128_vllm_prefix_page_minus1_chunk7_gqa8_p16*'
run memcheck_vllm 40 compute-sanitizer --tool memcheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$G"
run racecheck_vllm 40 compute-sanitizer --tool racecheck $P/muh_gpu_paged_prefill_tests --gtest_filter="$G"
run variants_t91 40 $P/muh_gpu_prefill_variants_tests --gtest_filter='*t91*vllm*'
run fp8_t91 40 $P/muh_gpu_paged_prefill_fp8_tests --gtest_filter='*t91*vllm*'
run mixed 80 $P/muh_gpu_mixed_batch_tests
wait $py_pid; echo "py build at $(el) s: $(tail -1 $L/py_build.log)"
wait $fi_pid; echo "fi prebuild at $(el) s: $(tail -2 $L/fi-prebuild.log | tr '\n' ' ')"
left=$(( DL - $(el) - 90 )); [ $left -gt 200 ] && left=200
[ $left -gt 40 ] && PYTHONPATH=/tmp/py23:/tmp/fi/site timeout $left python3 bench/paged_prefill.py --out $L/res --tag p23 \
  --iters 30 --quick --serving --flashinfer > $L/paged.log 2>&1
echo "paged bench rc $? at $(el) s"; grep -vE "^clocks|^JIT|^prebuild" $L/paged.log | tail -10 | cut -c1-220
left=$(( DL - $(el) - 45 )); [ $left -gt 50 ] && left=50
[ $left -gt 25 ] && PYTHONPATH=/tmp/py23 timeout $left python3 bench/paged_prefill.py --out $L/res --tag p23 --iters 30 \
  --mixed --lib $P/libmuh.so > $L/mixed.log 2>&1
echo "mixed bench rc $? at $(el) s"; grep -vE "^clocks" $L/mixed.log | tail -6
left=$(( DL - $(el) - 3 )); [ $left -gt 120 ] && left=120
[ $left -gt 10 ] && run nhd_t91 $left $P/muh_gpu_paged_prefill_tests --gtest_filter='*/t91_*nhd*'
echo "done at $(el) s"
