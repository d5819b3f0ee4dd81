#!/usr/bin/env bash
# Command 2: install what is missing, build everything, run the whole test suite (ctest): CPU
# tests (selection, dispatch, reference, merge math, the muh program's bad inputs, the installed
# package used by a consumer) and the GPU tests (each skips, saying so, without a GPU).
set -euo pipefail
source "$(dirname "$0")/common.sh"

start=$(date +%s)
muh_install_deps
# cuobjdump for the SASS checks (tests/sass), from PyPI where the toolkit has none.
muh_sass_tools || { echo "muh: fetching cuobjdump (muh_sass_tools, PyPI wheels) failed (the SASS checks need it)" >&2; exit 2; }
# ---- Python: pybind11 (CMake then builds muh._core) and pytest (ctest runs it) --------------
python3 -c 'import pytest, pybind11' 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check pytest pybind11 ||
  { echo "muh: 'python3 -m pip install pytest pybind11' failed (the Python tests need them)" >&2; exit 2; }
# ---------------------------------------------------------------------------------------------
muh_configure
muh_build
muh_log "built in $(( $(date +%s) - start )) s"

# run_suite NAME CTEST_ARGS...: runs ctest into a log and prints, instead of a line per test
# (~1600 of them, most GPU tests skipping without a GPU), the output of any test that failed and
# one summary line that counts what ran, failed and was skipped. The log keeps everything.
run_suite() {
  local name=$1 log="$MUH_BUILD_DIR/$1-tests.log" rc=0
  shift
  ctest --test-dir "$MUH_BUILD_DIR" --output-on-failure "$@" >"$log" 2>&1 || rc=1
  local result='^ *[0-9]+/[0-9]+ Test +#[0-9]+: '
  local passed failed skipped
  passed=$(grep -cE "$result.* Passed" "$log" || true)
  # A DISABLED_ gtest (a timing run by hand, e.g. PrefillVariantCost) reads "Not Run (Disabled)":
  # skipped, not failed; any other "Not Run" (a missing executable) is a failure.
  skipped=$(grep -cE "$result.*(\*\*\*Skipped|Not Run \(Disabled\))" "$log" || true)
  failed=$(grep -E "$result.*(\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run)" "$log" | grep -cv "Not Run (Disabled)" || true)
  if [ "$rc" -ne 0 ]; then
    # The failures' own output (--output-on-failure), without the passing and skipped lines.
    grep -vE "^ *(Start +[0-9]+:|[0-9]+/[0-9]+ Test +#[0-9]+: .*(Passed|\*\*\*Skipped))" "$log" || true
    [ "$failed" -gt 0 ] || failed="?"  # ctest failed without a test failing (e.g. no tests found)
  fi
  echo "$name: $passed passed, $failed failed, $skipped skipped"
  total_passed=$((total_passed + passed))
  total_skipped=$((total_skipped + skipped))
  [ "$failed" = "?" ] || total_failed=$((total_failed + failed))
  return $rc
}
total_passed=0 total_failed=0 total_skipped=0

# CPU-side tests in parallel, then the GPU tests (one at a time with a GPU: they share it).
status=0
run_suite cpu -j "$MUH_JOBS" -LE gpu || status=1
if [ -n "$MUH_GPU_CC" ]; then
  run_suite gpu -L gpu || status=1
else
  run_suite gpu -j "$MUH_JOBS" -L gpu || status=1
  muh_log "no GPU: every GPU test skipped, saying so (the gpu log has their messages)"
fi
muh_log "test logs: $MUH_BUILD_DIR/cpu-tests.log, $MUH_BUILD_DIR/gpu-tests.log"

# ---- Python tests (pytest) -------------------------------------------------------------------
# They run inside the ctest calls above: python_core_pytest (label cpu, tests/python/cpu) and,
# where torch was found at configure time, python_ops_pytest (label gpu, tests/python/gpu) —
# python/CMakeLists.txt. Their tools are installed before muh_configure (see there).
# ---------------------------------------------------------------------------------------------

# The closing count of the whole suite (CI reads the last "N passed, N failed" line).
echo "total: $total_passed passed, $total_failed failed, $total_skipped skipped"
muh_log "test suite finished in $(( $(date +%s) - start )) s: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
