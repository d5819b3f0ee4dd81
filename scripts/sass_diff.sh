#!/usr/bin/env bash
# scripts/sass_diff.sh A.o B.o — does a source change leave the GPU code as it was?
#
# Compares the SASS of every kernel function in two objects (or fatbins, executables: anything
# cuobjdump reads), per arch and function name, on the full `cuobjdump -sass` listing — only the
# file header before the first function is dropped, and runs of blanks are folded into one (the
# listing pads its columns to the widest line of the whole file) — so identical code gives
# identical text.
# Prints one line per kernel, `identical` or `DIFFERS` with the instruction counts and the
# resources of `cuobjdump -res-usage` (registers, stack, local memory) of both sides, a kernel
# present on one side only as `ONLY IN A` / `ONLY IN B`, and a last line `identical (N kernels)`
# or `K of N kernels differ`. Exit status: 0 identical, 1 different, 2 bad usage.
#
# Use: build the same object from two trees (e.g. /work/build-base and your build dir:
#   ninja -C B CMakeFiles/muh.dir/instances/prefill_bf16_hd128.cu.o) and run
#   scripts/sass_diff.sh /work/build-base/CMakeFiles/muh.dir/instances/prefill_bf16_hd128.cu.o \
#                        B/CMakeFiles/muh.dir/instances/prefill_bf16_hd128.cu.o
# SASS_DIFF_KEEP=DIR keeps the per-kernel listings in DIR/a and DIR/b for a `diff -u`.
set -euo pipefail

if [[ $# -ne 2 || ! -f $1 || ! -f $2 ]]; then
  echo "usage: sass_diff.sh A.o B.o (two files cuobjdump can read)" >&2
  exit 2
fi
command -v cuobjdump >/dev/null || {
  echo "sass_diff.sh: cuobjdump not on PATH (source scripts/common.sh and run muh_sass_tools)" >&2
  exit 2
}

work=${SASS_DIFF_KEEP:-$(mktemp -d)}
[[ -n ${SASS_DIFF_KEEP:-} ]] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work/a" "$work/b"

# Splits `cuobjdump -sass` of $1 into one file per (arch, function) under $2, named by their
# order, and writes $2/index: "arch name file instructions" per function.
split_sass() {
  cuobjdump -sass "$1" | awk -v dir="$2" '
    /code for sm_/ { arch = $3; next }
    /Function : / {
      if (f != "") { close(f); print key, f, n > (dir "/index") }
      f = dir "/" (++count); key = arch " " $3; n = 0
    }
    f != "" { gsub(/[ \t]+/, " "); print > f; if ($0 ~ /\/\*[0-9a-f]+\*\/ /) ++n }
    f != "" && /^ ?\.\.\.\.\.\.\.\.\.\.$/ { close(f); print key, f, n > (dir "/index"); f = "" }  # end of a function
    END { if (f != "") print key, f, n > (dir "/index") }'
  touch "$2/index"
}

# `cuobjdump -res-usage` of $1 as "arch name REG:.. STACK:.. LOCAL:.." per function.
res_usage() {
  cuobjdump -res-usage "$1" | awk '
    /^arch = / { arch = $3 }
    /^ Function / { name = $2; sub(/:$/, "", name); next }
    name != "" && /REG:/ {
      printf "%s %s", (arch == "" ? "-" : arch), name  # a cubin names no arch here
      for (i = 1; i <= NF; ++i) if ($i ~ /^(REG|STACK|LOCAL):/) printf " %s", $i
      print ""; name = ""
    }'
}

split_sass "$1" "$work/a"
split_sass "$2" "$work/b"
res_usage "$1" >"$work/a/res"
res_usage "$2" >"$work/b/res"

demangle() { if command -v c++filt >/dev/null; then c++filt "$1"; else echo "$1"; fi; }
res_of() { awk -v a="$1" -v n="$2" '($1 == a || $1 == "-") && $2 == n { $1 = $2 = ""; sub(/^ +/, ""); print; exit }' "$3"; }

total=0 differ=0
while read -r arch name file n; do
  total=$((total + 1))
  other=$(awk -v a="$arch" -v nm="$name" '$1 == a && $2 == nm { print $3 " " $4; exit }' "$work/b/index")
  label="$arch $(demangle "$name")"
  if [[ -z $other ]]; then
    differ=$((differ + 1))
    echo "ONLY IN A  $label"
    continue
  fi
  ofile=${other% *} on=${other#* }
  if cmp -s "$file" "$ofile"; then
    echo "identical  $label"
  else
    differ=$((differ + 1))
    echo "DIFFERS    $label"
    echo "           instructions $n -> $on; $(res_of "$arch" "$name" "$work/a/res") -> $(res_of "$arch" "$name" "$work/b/res")"
  fi
done <"$work/a/index"
while read -r arch name file n; do
  if ! awk -v a="$arch" -v nm="$name" '$1 == a && $2 == nm { found = 1 } END { exit !found }' "$work/a/index"; then
    total=$((total + 1)) differ=$((differ + 1))
    echo "ONLY IN B  $arch $(demangle "$name")"
  fi
done <"$work/b/index"

if [[ $differ -eq 0 ]]; then
  echo "identical ($total kernels)"
  exit 0
fi
echo "$differ of $total kernels differ"
exit 1
