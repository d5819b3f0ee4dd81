#!/usr/bin/env bash
# device_ab.sh BASE_SRC_DIR [--quick] [--steps build,outputs,speed,bench] — issue 16's before/after
# proof in one device call, run from the repository root on the GPU machine:
#   build    the base tree (BASE_SRC_DIR: a plain copy of the base commit's files, no .git) into
#            /tmp/muh-ab-base and this tree into /tmp/muh-ab-new, concurrently (nproc / 2 jobs
#            each): -G Ninja, Release, no tests, no Python, the present GPU's architecture, every
#            dispatch target, dtype and head dim. A build dir that holds a build of the same
#            sources is reused as it is; one of other sources is rebuilt incrementally.
#   outputs  bench/ab_outputs.py: every forced policy, base and new bitwise (ab-outputs.json)
#   speed    bench/ab_speed.py: prefill and decode grids, base / new / a copy of base, interleaved
#   bench    `muh bench decode` of each build (--out bench-decode-base/, bench-decode-new/), one
#            after the other, compared cell by cell by bench/ab_bench_decode.py
# then one summary block. Logs and results go to $OUT (default ./device-out). --quick: the smaller
# case set of ab_outputs.py, ab_speed.py --quick, and `muh bench decode --no-split-sweep
# --no-layouts`. MUH_AB_BENCH_ARGS adds arguments to `muh bench decode`, MUH_AB_CMAKE_ARGS to both
# configure steps (after the script's own: e.g. a leaner build to try the script);
# MUH_AB_NEW_TESTS=1 builds the new tree with its tests and Python package too, so that a next call
# can run `ctest --test-dir /tmp/muh-ab-new -L gpu` on the same build; PYTHON picks
# the Python with torch (default python3). Exit 0 when every step ran and every output was bitwise the same,
# 1 otherwise, 2 on bad arguments. Speed is not judged here: the summary gives the ratios and the
# base-vs-base noise beside them.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd) || exit 2
usage() { echo "usage: scripts/device_ab.sh BASE_SRC_DIR [--quick] [--steps build,outputs,speed,bench]" >&2; exit 2; }
[ $# -ge 1 ] || usage
base_src=$1
shift
quick=0 steps=build,outputs,speed,bench
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --steps) [ $# -ge 2 ] || usage; steps=$2; shift ;;
    --steps=*) steps=${1#*=} ;;
    *) usage ;;
  esac
  shift
done
for s in ${steps//,/ }; do
  case "$s" in build | outputs | speed | bench) ;; *) echo "device_ab: unknown step '$s' (build, outputs, speed, bench)"; exit 2 ;; esac
done
if [ ! -f "$base_src/CMakeLists.txt" ] || [ ! -f "$base_src/include/muh/muh.h" ]; then
  echo "device_ab: '$base_src' is not a muh source tree (no CMakeLists.txt or include/muh/muh.h)"
  exit 2
fi
base_src=$(cd "$base_src" && pwd)  # relative to where the script was started
cd "$root" || exit 2
new_src=$PWD
[ "$base_src" != "$new_src" ] || { echo "device_ab: BASE_SRC_DIR is this tree itself"; exit 2; }
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
BB=${MUH_AB_BASE_BUILD:-/tmp/muh-ab-base}
NB=${MUH_AB_NEW_BUILD:-/tmp/muh-ab-new}
PY=${PYTHON:-python3}
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. \r')
[ -n "$cc" ] || { echo "device_ab: no GPU (nvidia-smi reports no compute capability)"; exit 2; }
has() { case ",$steps," in *",$1,"*) return 0 ;; esac; return 1; }
t0=$(date +%s)
note() { echo "[device_ab +$(( $(date +%s) - t0 )) s] $*"; }
status=0
declare -a summary=()

# ---- build -------------------------------------------------------------------------------------
# What a build is made from: the sources it compiles (tests and Python are off) and the configure
# arguments. A build dir whose stamp matches is reused as it is — the tree is copied anew for
# every device call, and fresh file times alone would make ninja rebuild everything.
tree_stamp() {  # tree_stamp SRC EXTRA_ARGS...
  local src=$1
  shift
  (cd "$src" && find CMakeLists.txt cmake include src tools check tests python -type f -print0 2>/dev/null |
    LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  echo "sm_$cc ${MUH_AB_CMAKE_ARGS:-} $*"
}
build_one() {  # build_one NAME SRC DIR JOBS [EXTRA_CMAKE_ARGS...]
  local name=$1 src=$2 dir=$3 jobs=$4 gen=() stamp
  shift 4
  local extra=("$@")
  [ ${#extra[@]} -gt 0 ] || extra=(-DMUH_BUILD_TESTS=OFF -DMUH_BUILD_PYTHON=OFF)
  stamp=$(tree_stamp "$src" "${extra[@]}")
  if [ -f "$dir/libmuh.so" ] && [ -x "$dir/muh" ] && [ "$(cat "$dir/.device_ab_stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "device_ab: $dir holds a build of these sources; reused" >"$OUT/build-$name.log"
    return 0
  fi
  # A build dir configured from another source tree (another BASE_SRC_DIR) cannot be reused.
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$src" "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
  [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null && gen=(-G Ninja)
  rm -f "$dir/.device_ab_stamp"
  # shellcheck disable=SC2086  # MUH_AB_CMAKE_ARGS is split into arguments on purpose
  { cmake -S "$src" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "${extra[@]}" \
      -DMUH_CUDA_ARCHITECTURES="$cc" -DCMAKE_CUDA_ARCHITECTURES="$cc" -DMUH_TARGETS="0;75;80;86;89;90" \
      -DMUH_HEAD_DIMS="64;96;128;256" -DMUH_DTYPES="fp16;bf16;fp32" ${MUH_AB_CMAKE_ARGS:-} &&
    cmake --build "$dir" -j "$jobs"; } >"$OUT/build-$name.log" 2>&1 || return 1
  echo "$stamp" >"$dir/.device_ab_stamp"
}
if has build; then
  jobs=$(( $(nproc) / 2 ))
  [ "$jobs" -ge 1 ] || jobs=1
  note "building base ($base_src -> $BB) and new ($new_src -> $NB) for sm_$cc, -j$jobs each"
  build_one base "$base_src" "$BB" "$jobs" &
  pb=$!
  new_extra=()
  [ "${MUH_AB_NEW_TESTS:-0}" = 1 ] && new_extra=(-DMUH_BUILD_TESTS=ON -DMUH_BUILD_PYTHON=ON)
  build_one new "$new_src" "$NB" "$jobs" "${new_extra[@]}" &
  pn=$!
  wait $pb; rb=$?
  wait $pn; rn=$?
  for n in base new; do
    r=$rb; [ $n = new ] && r=$rn
    if [ "$r" -ne 0 ]; then
      err=$(grep -m1 -E "error|Error|FAILED" "$OUT/build-$n.log" | cut -c1-200)
      echo "device_ab: the $n build failed: ${err:-see the log} (log: $OUT/build-$n.log)"
      exit 1
    fi
  done
  how="built in $(( $(date +%s) - t0 )) s"
  grep -q "reused$" "$OUT/build-base.log" && grep -q "reused$" "$OUT/build-new.log" && how="reused (same sources)"
  summary+=("build: base and new $how (sm_$cc, every target, dtype and head dim${MUH_AB_CMAKE_ARGS:+; plus $MUH_AB_CMAKE_ARGS})")
  note "built"
fi
for d in "$BB" "$NB"; do
  [ -f "$d/libmuh.so" ] || { echo "device_ab: no $d/libmuh.so (run the build step)"; exit 1; }
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader \
  >"$OUT/clocks-before.txt" 2>&1
q=(); [ $quick = 1 ] && q=(--quick)

# ---- outputs, bitwise --------------------------------------------------------------------------
if has outputs; then
  note "ab_outputs.py ${q[*]}"
  ts=$(date +%s)
  "$PY" bench/ab_outputs.py --base "$BB/libmuh.so" --new "$NB/libmuh.so" --out "$OUT" "${q[@]}" \
    >"$OUT/ab-outputs.log" 2>&1
  r=$?
  if [ $r -eq 0 ]; then verdict=PASS; else verdict=FAIL; status=1; fi
  summary+=("outputs, bitwise [$verdict, $(( $(date +%s) - ts )) s; ab-outputs.log, ab-outputs.json: every case]:")
  # ab_outputs.py's summary block: from its "N cases, ..." (or CRASHED) line to "wrote ...".
  block=$(awk '/^(CRASHED|[0-9]+ cases)/ { f = 1 } f && !/^wrote / { print }' "$OUT/ab-outputs.log" | head -n 24)
  [ -n "$block" ] || block=$(tail -n 3 "$OUT/ab-outputs.log")
  while IFS= read -r l; do summary+=("  $l"); done <<<"$block"
fi

# ---- speed, interleaved in one process ---------------------------------------------------------
if has speed; then
  note "ab_speed.py ${q[*]}"
  ts=$(date +%s)
  if "$PY" bench/ab_speed.py --base "$BB/libmuh.so" --new "$NB/libmuh.so" --out "$OUT" "${q[@]}" \
      >"$OUT/ab-speed.log" 2>&1; then
    summary+=("speed [$(( $(date +%s) - ts )) s, ab-speed.log has every cell]:")
    while IFS= read -r l; do summary+=("  $l"); done < <(grep -E "^(prefill|decode): largest" "$OUT/ab-speed.log")
  else
    status=1
    summary+=("speed: FAILED: $(tail -n1 "$OUT/ab-speed.log")")
  fi
fi

# ---- muh bench decode of each build -----------------------------------------------------------
if has bench; then
  bargs=()
  [ $quick = 1 ] && bargs=(--no-split-sweep --no-layouts)
  # shellcheck disable=SC2206
  bargs+=(${MUH_AB_BENCH_ARGS:-})
  ts=$(date +%s)
  ok=1
  for n in base new; do
    d=$BB; [ $n = new ] && d=$NB
    rm -rf "$OUT/bench-decode-$n"
    mkdir -p "$OUT/bench-decode-$n"
    note "muh bench decode ($n) ${bargs[*]}"
    "$d/muh" bench decode --out "$OUT/bench-decode-$n" "${bargs[@]}" >"$OUT/bench-decode-$n.log" 2>&1 ||
      { ok=0; status=1; summary+=("muh bench decode ($n): FAILED: $(tail -n1 "$OUT/bench-decode-$n.log")"); }
  done
  if [ $ok = 1 ]; then
    "$PY" bench/ab_bench_decode.py "$OUT/bench-decode-base" "$OUT/bench-decode-new" --out "$OUT/ab-bench-decode.json" \
      >"$OUT/ab-bench-decode.log" 2>&1 || status=1
    summary+=("muh bench decode, base then new [$(( $(date +%s) - ts )) s, ab-bench-decode.log has every cell]:")
    while IFS= read -r l; do summary+=("  $l"); done < <(grep -E "^(ceiling|muh bench decode)" "$OUT/ab-bench-decode.log")
  fi
fi

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader \
  >"$OUT/clocks-after.txt" 2>&1
echo
echo "===== issue 16 A/B: base $base_src, new $new_src, on $(head -n1 "$OUT/clocks-before.txt" | cut -d, -f1) ====="
for l in "${summary[@]}"; do echo "$l"; done
echo "clocks before: $(cat "$OUT/clocks-before.txt")"
echo "clocks after:  $(cat "$OUT/clocks-after.txt")"
echo "logs and JSON: $OUT"
echo "device_ab finished in $(( $(date +%s) - t0 )) s: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
