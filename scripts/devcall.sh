# scripts/devcall.sh — sourced by a device call's script (bench/results/*/call*.sh): the elapsed
# seconds and the one-line summary of a test binary's run, so each call script says only what it
# runs. Set L (the log folder, created by the caller) before calling run.
#
#   source scripts/devcall.sh; L=/tmp/logs; mkdir -p $L
#   run decode 120 ./muh_gpu_decode_tests      # → "decode rc 0 at 13 s: [  PASSED  ] 353 tests."
t0=${t0:-$(date +%s)}
el() { echo $(( $(date +%s) - t0 )); }
# run NAME TIMEOUT CMD...: CMD under `timeout` into $L/NAME.log, then its gtest and sanitizer
# summaries on one line and its failed tests (at most 8).
run() {
  local name=$1 t=$2; shift 2
  timeout "$t" "$@" > "$L/$name.log" 2>&1; local rc=$?
  echo "$name rc $rc at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|RACECHECK SUMMARY' "$L/$name.log" | tail -3 | tr '\n' ' ' | cut -c1-220)"
  grep -E "^\[  FAILED  \]" "$L/$name.log" | head -8
}
