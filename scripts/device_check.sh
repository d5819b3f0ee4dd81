#!/usr/bin/env bash
# The check a kernel change needs on a GPU machine, in one go (one `device` call here): a full
# build for the present GPU with every dispatch target, dtype and head dim; every GPU test
# (forced-policy sweeps, determinism, CUDA graphs, Python ops); `muh verify --quick`; the CPU
# suite; and, with --bench, `muh bench decode` plus its plot. Logs and results go to $OUT
# (default ./device-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
B=${MUH_DEVICE_BUILD_DIR:-build-dev}
mkdir -p "$OUT"
bench=0
[ "${1:-}" = "--bench" ] && bench=1
t0=$(date +%s)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
{ cmake -S . -B "$B" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release && cmake --build "$B" -j "$(nproc)"; } >"$OUT/build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/build.log" | head -40; echo "BUILD FAILED"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee "$OUT/clocks.txt"
status=0
ctest --test-dir "$B" -L gpu -j 16 --timeout 600 --output-on-failure >"$OUT/gpu-tests.log" 2>&1 || status=1
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout|Exception" "$OUT/gpu-tests.log" | head -20
ctest --test-dir "$B" -LE gpu -j 16 --output-on-failure >"$OUT/cpu-tests.log" 2>&1 || status=1
grep -E "tests passed|tests failed" "$OUT/cpu-tests.log"
"$B/muh" verify --quick >"$OUT/verify.log" 2>&1 || status=1
tail -n 25 "$OUT/verify.log"
if [ $bench = 1 ]; then
  "$B/muh" bench decode --out "$OUT" >"$OUT/bench-decode.log" 2>&1 || status=1
  tail -n 30 "$OUT/bench-decode.log"
  python3 bench/plot_decode.py "$OUT"/decode-*.csv >>"$OUT/bench-decode.log" 2>&1 || echo "plot failed"
fi
echo "device check finished in $(( $(date +%s) - t0 )) s: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
