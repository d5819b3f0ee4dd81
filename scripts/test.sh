#!/usr/bin/env bash
# Command 2: install what is missing, build everything, run the whole test suite (ctest): CPU
# tests (selection, dispatch, reference, merge math, the muh program's bad inputs, the installed
# package used by a consumer) and the GPU tests (each skips, saying so, without a GPU).
set -euo pipefail
source "$(dirname "$0")/common.sh"

start=$(date +%s)
muh_install_deps
# ---- Python: pybind11 (CMake then builds muh._core) and pytest (ctest runs it) --------------
python3 -c 'import pytest, pybind11' 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check pytest pybind11 ||
  { echo "muh: 'python3 -m pip install pytest pybind11' failed (the Python tests need them)" >&2; exit 2; }
# ---------------------------------------------------------------------------------------------
muh_configure
muh_build
muh_log "built in $(( $(date +%s) - start )) s"

# CPU-side tests in parallel, then the GPU tests one at a time (they share one device).
status=0
ctest --test-dir "$MUH_BUILD_DIR" --output-on-failure -j "$MUH_JOBS" -LE gpu || status=1
if [ -n "$MUH_GPU_CC" ]; then
  ctest --test-dir "$MUH_BUILD_DIR" --output-on-failure -L gpu || status=1
else
  # Without a GPU every GPU test skips, saying so; show the summary, not a line per skip.
  gpu_log="$MUH_BUILD_DIR/gpu-tests.log"
  ctest --test-dir "$MUH_BUILD_DIR" --output-on-failure -j "$MUH_JOBS" -L gpu >"$gpu_log" 2>&1 || status=1
  grep -v -E 'Skipped|^ *(Start|Test) +#' "$gpu_log" || true
  muh_log "GPU tests: $(grep -c '\*\*\*Skipped' "$gpu_log" || true) skipped (no GPU); full log: $gpu_log"
fi

# ---- Python tests (pytest) -------------------------------------------------------------------
# They run inside the ctest calls above: python_core_pytest (label cpu, tests/python/cpu) and,
# where torch was found at configure time, python_ops_pytest (label gpu, tests/python/gpu) —
# python/CMakeLists.txt. Their tools are installed before muh_configure (see there).
# ---------------------------------------------------------------------------------------------

muh_log "test suite finished in $(( $(date +%s) - start )) s: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
