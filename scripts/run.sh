#!/usr/bin/env bash
# Command 1: install what is missing, build the `muh` program, run the main job on its embedded
# default — `muh config`: the seed's case (Qwen3.6-class, bf16 and fp16, on the BI-V100 profile).
# Arguments are passed to `muh` (e.g. scripts/run.sh config --hw h200 --explain).
set -euo pipefail
source "$(dirname "$0")/common.sh"

start=$(date +%s)
muh_install_deps
muh_configure
muh_build muh_cli
muh_log "built in $(( $(date +%s) - start )) s; running: muh ${*:-config}"
if [ $# -eq 0 ]; then set -- config; fi
exec "$MUH_BUILD_DIR/muh" "$@"
