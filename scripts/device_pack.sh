#!/usr/bin/env bash
# scripts/device_pack.sh NAME [-D... cmake options] -- TARGET... — builds a lean configuration on
# this (CPU) machine and packs what a device call runs into devrun/NAME.tar.xz, so the call spends
# its seconds running, not compiling.
#
# Why: device time is 30 minutes a session and a lean test build there took 185–236 s of each call
# (2026-12-06: bench/results/h100-2026-12-06-*), while this machine's 2 cores are idle most of the
# session. Built here (sm_90 SASS by default), a call unpacks ~11 MB per libmuh.so and runs.
#
#   scripts/device_pack.sh base -DMUH_HEAD_DIMS=256 -DMUH_DTYPES=fp16 -- muh_cli muh_gpu_decode_tests
#   (carry: ["devrun"]; on the device)
#   tar xJf devrun/base.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/base:/usr/local/cuda/lib64
#   /tmp/base/muh bench decode ...; /tmp/base/muh_gpu_decode_tests ...
#
# The pack holds libmuh.so and each target's executable (tests by their name, the CLI as `muh`),
# stripped, flat in NAME/. MUH_PACK_SRC=DIR builds another tree (e.g. a `git archive` of a base
# commit, for an A/B); the build directory is /tmp/muh-pack-NAME (kept: a rebuild is incremental).
# The device image (Ubuntu, glibc 2.39, seen 2026-12-06) runs what Debian 12 links: the packs of
# bench/results/h100-2026-12-06-fp8/ and -prefill-exit-six-heads/ ran there. A pack's libmuh.so
# must not be put before a device build's on LD_LIBRARY_PATH (the Python extension built there
# then loads the pack's: an undefined libstdc++ symbol).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 3 ]] || { echo "usage: scripts/device_pack.sh NAME [cmake -D options] -- TARGET..." >&2; exit 2; }
name=$1; shift
[[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "device_pack.sh: NAME must be [A-Za-z0-9_.-]+" >&2; exit 2; }
opts=()
while [[ $# -gt 0 && $1 != -- ]]; do opts+=("$1"); shift; done
[[ ${1:-} == -- && $# -ge 2 ]] || { echo "device_pack.sh: targets after --" >&2; exit 2; }
shift
targets=("$@")
src=${MUH_PACK_SRC:-$PWD}
build=/tmp/muh-pack-$name
source scripts/common.sh
export PATH="/usr/local/cuda/bin:$PATH"
muh_log "configuring $src in $build"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 \
  -DMUH_BUILD_PYTHON=OFF -DMUH_BUILD_BENCH=OFF "${opts[@]}" >/dev/null
muh_log "building ${targets[*]} (-j$(nproc))"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
stage=$(mktemp -d)
mkdir -p "$stage/$name" devrun
cp "$build"/libmuh.so* "$stage/$name/"
for t in "${targets[@]}"; do
  if [[ $t == muh_cli ]]; then cp "$build/muh" "$stage/$name/"; else cp "$build/tests/$t" "$stage/$name/"; fi
done
strip "$stage/$name"/* 2>/dev/null || true
tar cf - -C "$stage" "$name" | xz -T0 -6 >"devrun/$name.tar.xz"
rm -rf "$stage"
muh_log "devrun/$name.tar.xz: $(du -h "devrun/$name.tar.xz" | cut -f1) ($(ls "$build"/libmuh.so | head -1))"
