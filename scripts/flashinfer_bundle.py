#!/usr/bin/env python3
"""flashinfer_bundle.py — a trimmed FlashInfer for the offline H200, small enough to travel with
the muh tree (the device takes 64 MiB in all; the wheel alone is 65 MB, 457 MB unpacked).

  python3 scripts/flashinfer_bundle.py --wheel flashinfer_python-0.7.2-py3-none-any.whl \
      --tvm-ffi apache_tvm_ffi-0.1.15.post2-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl \
      --out .fi/flashinfer-0.7.2-cp312-trim.tar.xz

On the device: `mkdir -p /tmp/fi && tar -xJf .fi/flashinfer-*.tar.xz -C /tmp/fi` and
`export PYTHONPATH=/tmp/fi/site`. bench/flashinfer_peer.py is what muh's benchmarks call.

What stays, and why that is enough for the wrappers muh benchmarks against
(BatchPrefillWithPagedKVCacheWrapper, BatchPrefillWithRaggedKVCacheWrapper with backend fa2/fa3,
BatchDecodeWithPagedKVCacheWrapper incl. an e4m3 cache):
- every .py file of the package (and py.typed): `import flashinfer` imports ~320 of its modules
  eagerly and many more lazily, so no Python is dropped (7 MB of the bundle);
- data/include (FlashInfer's own headers), data/spdlog/include, and the include roots the JIT puts
  on nvcc's command line (flashinfer/jit/env.py: data/cutlass/include,
  data/cutlass/tools/util/include, data/cccl/{cub,libcudacxx/include,thrust}), each whole;
- data/csrc's top-level files: the JIT copies the batch prefill/decode sources and renders the
  .jinja instantiation templates from there, and tvm_ffi_utils.h is included from there.
What goes: data/csrc's subfolders (MoE, GEMM, MLA, sampling, KDA/GDN, ... sources: 248 MB, none
included by the attention modules: an `nvcc -M` scan of the 71 distinct sources of the fa2 and fa3
prefill and the decode modules at hd 128 (fp16, bf16; bf16 q with an e4m3 cache) found only
data/csrc/tvm_ffi_utils.h there), the rest of cutlass/cccl (examples,
tests, docs, python), and the non-Python files beside the package's Python (fused-MoE JSON kernel
tables and the .cu/.cuh sources of experimental MoE/MLA/GDN modules: 27 MB).
FlashInfer 0.7.2's Requires-Dist, against the device image (KINDS.md's package list):
- apache-tvm-ffi: not on the device and imported by `import flashinfer` (flashinfer/jit/cpp_ext.py);
  its JIT modules bind through it. Its cp312 manylinux wheel is installed into site/ here (3 MB).
- on the device already: click, einops, ninja, numpy, nvidia-ml-py, packaging, requests, tabulate,
  torch, tqdm (and jinja2, which the JIT templates need); cuda-python is a meta-package whose
  cuda-bindings/cuda-core/cuda-pathfinder are there.
- left out, imported only lazily or under a guard, by code paths the wrappers above do not take:
  cuda-tile (cuTile kernels), nccl4py and nccl-extensions (communication), nvidia-cudnn-frontend
  (cuDNN backends: `_CUDNN_GRAPH_AVAILABLE` is False without it, so backend="auto" decode stays on
  fa2), nvidia-cutlass-dsl (CuTe-DSL kernels: imported under contextlib.suppress(ImportError)).
  `import flashinfer` was checked to succeed without any of them.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

KEEP_DATA = ["include", "spdlog/include", "cutlass/include", "cutlass/tools/util/include", "cccl/cub",
             "cccl/libcudacxx/include", "cccl/thrust"]


def kept_data_file(rel):
    """Whether flashinfer/data/<rel> stays: under a KEEP_DATA root, or a top-level file of data/ or data/csrc/."""
    parts = rel.split(os.sep)
    if len(parts) == 1 or (parts[0] == "csrc" and len(parts) == 2):
        return True
    return any(rel.startswith(k + os.sep) for k in KEEP_DATA)


def prune_data(data):
    """Remove what kept_data_file() rejects under flashinfer/data; return bytes removed."""
    removed = 0
    for root, _, files in os.walk(data):
        for f in files:
            p = os.path.join(root, f)
            if not kept_data_file(os.path.relpath(p, data)):
                removed += os.path.getsize(p)
                os.remove(p)
    remove_empty_dirs(data)
    return removed


def remove_empty_dirs(top):
    for root, dirs, files in os.walk(top, topdown=False):
        if root != top and not os.listdir(root):
            os.rmdir(root)


def prune_package(pkg):
    """Outside flashinfer/data keep only Python (and py.typed); return bytes removed."""
    removed = 0
    data = os.path.join(pkg, "data")
    for root, dirs, files in os.walk(pkg):
        if os.path.normpath(root) == os.path.normpath(data):
            dirs[:] = []
            continue
        for f in files:
            if f.endswith(".py") or f == "py.typed":
                continue
            p = os.path.join(root, f)
            removed += os.path.getsize(p)
            os.remove(p)
    remove_empty_dirs(pkg)
    return removed


def tree_bytes(p):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(p) for f in fs)


def rewrite_record(site, dist_info):
    """RECORD lists only the files that are left (the hashes of those are unchanged)."""
    rec = os.path.join(site, dist_info, "RECORD")
    lines = []
    for line in open(rec):
        path = line.rsplit(",", 2)[0]
        if os.path.exists(os.path.join(site, path)) or path.endswith("RECORD"):
            lines.append(line)
    with open(rec, "w") as f:
        f.writelines(lines)
    return len(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", required=True, help="flashinfer_python-*.whl")
    ap.add_argument("--tvm-ffi", required=True, help="apache_tvm_ffi-*-cp312-*.whl (the device's Python)")
    ap.add_argument("--extra-wheel", action="append", default=[], help="another wheel to install into site/")
    ap.add_argument("--out", required=True, help="the .tar.xz to write")
    ap.add_argument("--python-version", default="3.12")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fi-bundle-")
    site = os.path.join(tmp, "site")
    with zipfile.ZipFile(args.wheel) as z:
        z.extractall(site)
    whole = tree_bytes(site)
    pkg = os.path.join(site, "flashinfer")
    r_data = prune_data(os.path.join(pkg, "data"))
    r_pkg = prune_package(pkg)
    dist = [d for d in os.listdir(site) if d.startswith("flashinfer_python-") and d.endswith(".dist-info")][0]
    kept = rewrite_record(site, dist)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--only-binary=:all:", "--python-version", args.python_version, "--implementation", "cp",
                    "--target", site, args.tvm_ffi] + args.extra_wheel, check=True)
    shutil.rmtree(os.path.join(site, "bin"), ignore_errors=True)  # console scripts with this machine's shebang
    with open(os.path.join(tmp, "TRIMMED.txt"), "w") as f:
        f.write(f"from {os.path.basename(args.wheel)} ({whole} bytes unpacked) by scripts/flashinfer_bundle.py\n"
                f"removed under flashinfer/data: {r_data} bytes (kept: {', '.join(KEEP_DATA)}, csrc top level)\n"
                f"removed beside the Python: {r_pkg} bytes (non-.py files)\n"
                f"RECORD entries kept: {kept}\n"
                f"installed: {os.path.basename(args.tvm_ffi)} {' '.join(map(os.path.basename, args.extra_wheel))}\n")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with tarfile.open(args.out, "w:xz", preset=9) as t:
        t.add(site, arcname="site")
        t.add(os.path.join(tmp, "TRIMMED.txt"), arcname="TRIMMED.txt")
    print(open(os.path.join(tmp, "TRIMMED.txt")).read(), end="")
    print(f"site/: {tree_bytes(site)} bytes; {args.out}: {os.path.getsize(args.out)} bytes")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
