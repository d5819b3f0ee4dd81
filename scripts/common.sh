# common.sh — sourced by scripts/run.sh and scripts/test.sh: installs what is missing, then
# configures the build directory. Environment overrides (all optional):
#   MUH_BUILD_DIR            build directory (default: build)
#   MUH_JOBS                 parallel build jobs (default: nproc)
#   MUH_CUDA_ARCHITECTURES   SASS architectures, e.g. "90" or "75;80;86;89;90"
#   MUH_TARGETS              dispatch targets to instantiate (0 = portable), e.g. "0;75;80;86;89;90"
#   MUH_HEAD_DIMS, MUH_DTYPES  instantiations to build (subsets of 64;96;128;256 and fp16;bf16;fp32)
#   MUH_CMAKE_ARGS           extra arguments for the cmake configure step
set -euo pipefail

MUH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MUH_BUILD_DIR="${MUH_BUILD_DIR:-build}"
case "$MUH_BUILD_DIR" in /*) ;; *) MUH_BUILD_DIR="$MUH_ROOT/$MUH_BUILD_DIR" ;; esac
MUH_JOBS="${MUH_JOBS:-$(nproc)}"

muh_log() { printf '\033[1m[muh]\033[0m %s\n' "$*"; }

# ---- 1. Debian packages: install only what is missing (reruns skip apt entirely) -------------
muh_install_deps() {
  # clang-19: tests/portable compiles the portable agent with clang's CUDA front end (the
  # BI-V100's toolchain is clang-based); Debian 12's default clang-14 cannot read CUDA 13's headers.
  local pkgs=(cmake g++ make libgtest-dev libcli11-dev nlohmann-json3-dev clang-19)
  if ! command -v dpkg-query >/dev/null 2>&1; then
    muh_log "not a Debian system: assuming ${pkgs[*]} are installed"
    return
  fi
  # The Python tests (ctest runs pytest on muh._core) need python3 with its headers, pytest and
  # pybind11: from Debian too, unless the python3 on PATH already has them (e.g. a venv/pyenv).
  if ! python3 -c 'import os, sysconfig, pytest, pybind11
assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' >/dev/null 2>&1; then
    pkgs+=(python3-dev python3-pytest python3-pybind11)
  fi
  local missing=() p
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    muh_log "packages present: ${pkgs[*]}"
  else
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    muh_log "installing: ${missing[*]}"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null 2>&1; then
    echo "muh: the CUDA toolkit (nvcc) is not at /usr/local/cuda/bin/nvcc nor on PATH; install CUDA 13 first" >&2
    exit 2
  fi
  export PATH="/usr/local/cuda/bin:$PATH"
}

# ---- 1b. SASS tools where the toolkit has none: cuobjdump and nvdisasm from PyPI ---------------
# The CPU machine's CUDA 13 toolkit has nvcc and ptxas but no cuobjdump, so SASS (scripts/
# sass_diff.sh, a kernel's loop read before any device time is spent) needed the GPU machine.
# NVIDIA publishes both as wheels (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm): fetched once into
# ~/.cache/muh/sass-tools (or $MUH_SASS_TOOLS) and put on PATH. The test command runs it: the SASS
# checks (tests/sass) read the built library with cuobjdump.
muh_sass_tools() {
  command -v cuobjdump >/dev/null 2>&1 && return
  local dir=${MUH_SASS_TOOLS:-$HOME/.cache/muh/sass-tools}
  if ! ls "$dir"/nvidia/cu*/bin/cuobjdump >/dev/null 2>&1; then
    muh_log "fetching cuobjdump and nvdisasm (PyPI wheels) into $dir"
    mkdir -p "$dir/wheels"
    python3 -m pip download -q --no-deps -d "$dir/wheels" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm || return 1
    local w
    for w in "$dir"/wheels/*.whl; do python3 -m zipfile -e "$w" "$dir" || return 1; done
    chmod +x "$dir"/nvidia/cu*/bin/* 2>/dev/null
  fi
  local tool
  tool=$(ls "$dir"/nvidia/cu*/bin/cuobjdump 2>/dev/null | head -1)
  [ -n "$tool" ] || return 1
  export PATH="$(dirname "$tool"):$PATH"
}

# ---- 2. What to build: the present GPU's architecture, or a lean CI set without a GPU ---------
# Sets MUH_GPU_CC (e.g. "90", empty without a GPU) and MUH_CONFIG_ARGS.
muh_choose_build() {
  MUH_GPU_CC=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    MUH_GPU_CC="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. \r')" || MUH_GPU_CC=""
  fi
  local archs heads dtypes targets variant_heads fp8_heads
  if [ -n "$MUH_GPU_CC" ]; then
    # A GPU: build for it, every instantiation (the GPU tests force every policy on it).
    archs="${MUH_CUDA_ARCHITECTURES:-$MUH_GPU_CC}"
    heads="${MUH_HEAD_DIMS:-64;96;128;256}"
    dtypes="${MUH_DTYPES:-fp16;bf16;fp32}"
    variant_heads="${MUH_VARIANT_HEAD_DIMS:-}"  # the general variant kind for every head dim
    fp8_heads="${MUH_KV_FP8_HEAD_DIMS:-}"       # the fp8 KV-cache decode kernels for every head dim
    muh_log "GPU sm_$MUH_GPU_CC found: building for it (archs $archs, head dims $heads, dtypes $dtypes)"
  else
    # No GPU (CI, 2 cores): the GPU tests skip, so prune instantiations and architectures to stay
    # well inside 30 minutes — one SASS architecture (sm_90, the H200 the GPU tests run on) and
    # two head dims: the seed's 256 and 128. Every dtype and every dispatch target (agent) is
    # still compiled, so the default job's bf16 and fp16 instantiations exist; every check runs.
    archs="${MUH_CUDA_ARCHITECTURES:-90}"
    heads="${MUH_HEAD_DIMS:-128;256}"
    dtypes="${MUH_DTYPES:-fp16;bf16;fp32}"
    # The general attention-variant kind (muh/variant.hpp) compiles once more every prefill policy
    # and the portable decode rows: for head dim 128 only (every dtype and target), which the
    # CPU tests need — they check the variants' selection, plans and bad inputs, none of which
    # depends on more instances — and which keeps the general code path compiled in CI.
    variant_heads="${MUH_VARIANT_HEAD_DIMS:-128}"
    # The fp8 KV-cache decode kernels (muh/kv_quant.hpp) likewise for head dim 128 only: the CPU
    # tests check their selection, plans and bad inputs, and this keeps the fp8 path compiled.
    fp8_heads="${MUH_KV_FP8_HEAD_DIMS:-128}"
    muh_log "no GPU: lean build (archs $archs, head dims $heads, dtypes $dtypes, general variant kind: hd $variant_heads)"
  fi
  targets="${MUH_TARGETS:-0;75;80;86;89;90;90a}"
  MUH_CONFIG_ARGS=(-DMUH_CUDA_ARCHITECTURES="$archs" -DCMAKE_CUDA_ARCHITECTURES="$archs"
                   -DMUH_HEAD_DIMS="$heads" -DMUH_DTYPES="$dtypes" -DMUH_TARGETS="$targets"
                   -DMUH_VARIANT_HEAD_DIMS="$variant_heads" -DMUH_KV_FP8_HEAD_DIMS="$fp8_heads"
                   -DCMAKE_BUILD_TYPE=Release)
}

muh_configure() {
  muh_choose_build
  local gen=()
  if [ ! -f "$MUH_BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
  # shellcheck disable=SC2086
  cmake -S "$MUH_ROOT" -B "$MUH_BUILD_DIR" "${gen[@]}" "${MUH_CONFIG_ARGS[@]}" ${MUH_CMAKE_ARGS:-}
}

muh_build() {  # muh_build [target...]
  local t=() x
  for x in "$@"; do t+=(--target "$x"); done
  cmake --build "$MUH_BUILD_DIR" -j "$MUH_JOBS" "${t[@]}"
}
