#!/usr/bin/env bash
# Session 2026-12-06 #3, device call 7: `muh verify --quick` with its new fp8 KV-cache rows
# (check/decode_case.hpp decode_fp8_sweep_cases) — binaries built on the CPU machine.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
tar xJf devrun/ver.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/ver:/usr/local/cuda/lib64
t0=$(date +%s)
timeout 170 /tmp/ver/muh verify --quick > "$OUT/verify.log" 2>&1; rc=$?
echo "verify rc=$rc in $(( $(date +%s) - t0 )) s"; grep -E 'fp8|PASS|FAIL|rows|passed|failed' "$OUT/verify.log" | tail -30
