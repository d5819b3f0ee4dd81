#!/usr/bin/env bash
# Device call 5 (session 2026-12-06): test_vllm_dropin.py after dropping its stale alibi
# expectation (the fp8 refusal after it never ran in call 4), with test_variants.py's vLLM alibi
# test beside it; lean build (hd 128, bf16, targets 0/90, both variant kinds).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
B=/tmp/bP
( cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_TARGETS="0;90" -DMUH_HEAD_DIMS=128 -DMUH_DTYPES=bf16 -DMUH_PAGED_PREFILL=OFF \
  && cmake --build $B -j16 --target muh_py_core muh_py_torch_ops ) > $OUT/build5.log 2>&1
echo "built rc=$? at $(el) s"
export PYTHONPATH=$B/python PYTHONDONTWRITEBYTECODE=1
timeout 200 python3 -m pytest -v -p no:cacheprovider tests/python/gpu/test_vllm_dropin.py "tests/python/gpu/test_variants.py::test_vllm_paged_attention_alibi_matches_reference" > $OUT/pytest5.log 2>&1
echo "pytest rc=$? at $(el) s"; grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed" $OUT/pytest5.log | tail -15
