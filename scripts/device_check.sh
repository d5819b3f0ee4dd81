#!/usr/bin/env bash
# The check a kernel change needs on a GPU machine, in one go (one `device` call here): a full
# build for the present GPU with every dispatch target, dtype and head dim; every GPU test
# (forced-policy sweeps, determinism, CUDA graphs, Python ops; the gtest executables whole); `muh verify --quick`; the CPU
# suite; with --bench, `muh bench decode` plus its plot; with --sanitize, compute-sanitizer
# memcheck and racecheck on a small set (sm90 and portable decode with V1/V2 and both layouts,
# with and without the L2 evict-first policy; the sm90 prefill rows, the hd-256 warp-pair ring
# cases and the sm75 agent's fp16 cases);
# --no-tests skips the test suites and verify (to run only --bench / --sanitize on a build a
# previous call made). Logs and results go to $OUT (default ./device-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
B=${MUH_DEVICE_BUILD_DIR:-build-dev}
mkdir -p "$OUT"
bench=0 sanitize=0 tests=1
for arg in "$@"; do
  case "$arg" in
    --bench) bench=1 ;;
    --sanitize) sanitize=1 ;;
    --no-tests) tests=0 ;;
    *) echo "usage: scripts/device_check.sh [--bench] [--sanitize] [--no-tests]" >&2; exit 2 ;;
  esac
done
t0=$(date +%s)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
{ cmake -S . -B "$B" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release && cmake --build "$B" -j "$(nproc)"; } >"$OUT/build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/build.log" | head -40; echo "BUILD FAILED"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee "$OUT/clocks.txt"
status=0
if [ $tests = 1 ]; then
  # The gtest executables run whole, one process each: ctest's one process per case (~3000 CUDA
  # contexts) took over 8 minutes of a 16-core H200 machine on 2026-12-02 for what the
  # executables do in under a minute. ctest then runs the rest of label gpu (cli.gpu.*, pytest).
  for exe in "$B"/tests/muh_gpu_*_tests; do
    n=$(basename "$exe")
    "$exe" >"$OUT/$n.log" 2>&1 || status=1
    echo "$n: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) \]' "$OUT/$n.log" | head -3 | tr '\n' ' ')"
  done
  # One archive: the device tool brings back at most 8 files from $OUT.
  (cd "$OUT" && tar czf gtest-logs.tgz muh_gpu_*_tests.log && rm -f muh_gpu_*_tests.log)
  ctest --test-dir "$B" -L gpu -R '^(cli[.]|python_)' -j 4 --timeout 900 --output-on-failure >"$OUT/gpu-tests.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout|Exception" "$OUT/gpu-tests.log" | head -20
  ctest --test-dir "$B" -LE gpu -j 16 --output-on-failure >"$OUT/cpu-tests.log" 2>&1 || status=1
  grep -E "tests passed|tests failed" "$OUT/cpu-tests.log"
  "$B/muh" verify --quick >"$OUT/verify.log" 2>&1 || status=1
  tail -n 25 "$OUT/verify.log"
fi
if [ $sanitize = 1 ]; then
  # Small shapes only: the sanitizers slow kernels down ~100x.
  dec='Sweep/DecodeForced.MatchesReference/t90_bf16_hd128_*:Sweep/DecodeForced.MatchesReference/t0_fp16_hd64_*'
  dec+=':Splits/DecodeSplits.V2MatchesV1/t90_hd256_*_x5:L2/DecodeL2Policy.SameBitsWithAndWithoutEvictFirst/t90_*'
  pre='Prefill/PrefillForced.MatchesReference/t90_bf16_hd128_*:Prefill/PrefillForced.MatchesReference/t90_bf16_hd256_*'
  pre+=':Prefill/PrefillRing.MatchesReference/*hd256_128x*w8_ring*'
  pre+=':Prefill/PrefillForced.MatchesReference/t75_fp16_hd128_*:Prefill/PrefillRing.MatchesReference/*sm75*'
  for tool in memcheck racecheck; do
    for t in "muh_gpu_decode_tests:$dec" "muh_gpu_prefill_tests:$pre"; do
      exe=$(find "$B" -name "${t%%:*}" -type f | head -1)
      log="$OUT/sanitize-$tool-${t%%:*}.log"
      timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 1 "$exe" --gtest_filter="${t#*:}" >"$log" 2>&1 || status=1
      echo "$tool ${t%%:*}: $(grep -cE '^\[       OK \]' "$log") tests OK, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
    done
  done
fi
if [ $bench = 1 ]; then
  "$B/muh" bench decode --out "$OUT" >"$OUT/bench-decode.log" 2>&1 || status=1
  tail -n 30 "$OUT/bench-decode.log"
  python3 bench/plot_decode.py "$OUT"/decode-*.csv >>"$OUT/bench-decode.log" 2>&1 || echo "plot failed"
fi
echo "device check finished in $(( $(date +%s) - t0 )) s: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
