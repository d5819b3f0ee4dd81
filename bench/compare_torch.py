#!/usr/bin/env python3
"""compare_torch.py — muh prefill side by side with PyTorch SDPA, in one process on one GPU.

muh runs through its C ABI (muh_prefill in libmuh.so, loaded with ctypes) on the very tensors
torch allocated (Tensor.data_ptr()); torch.nn.functional.scaled_dot_product_attention runs with
each backend forced (FLASH_ATTENTION = FlashAttention-2, CUDNN_ATTENTION, EFFICIENT_ATTENTION);
a torch bf16 GEMM 8192^3 gives the ceiling. The grid is the issue's: bf16, head_dim 128 x 32
heads and head_dim 256 x 16 heads, seq_len 1024 / 4096 / 16384 with 16384 tokens per batch,
causal and not. TFLOP/s = 4*b*h*sq*sk*d / t, halved for causal. Each time is the median of
--iters CUDA-event-timed calls after 5 warm-up calls. muh runs as a user would call it, with the
workspace muh_prefill_workspace_size() asks for (the tail split, muh/prefill_plan.hpp), and again
without one ("muh-whole": every q tile whole), the two timed interleaved (interleaved_ms), so the
split's gain is measured in the same run.

Writes prefill-<tag>.csv, prefill-<tag>.json and prefill-<tag>.png (ratios muh / backend) under --out.
"""
import argparse
import csv
import ctypes
import datetime
import json
import os
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

MUH_BF16 = 1
BACKENDS = [("FLASH", SDPBackend.FLASH_ATTENTION), ("CUDNN", SDPBackend.CUDNN_ATTENTION),
            ("EFFICIENT", SDPBackend.EFFICIENT_ATTENTION)]
TOKENS = 16384


def load_muh(path):
    lib = ctypes.CDLL(path)
    c = ctypes
    lib.muh_prefill.argtypes = [c.c_int, c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p,
                                c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_int, c.c_int, c.c_int,
                                c.c_int, c.c_int, c.c_int, c.c_float, c.c_int, c.c_void_p, c.c_size_t,
                                c.c_int, c.c_void_p]
    lib.muh_prefill.restype = c.c_int
    lib.muh_prefill_workspace_size.argtypes = [c.c_int] * 11 + [c.POINTER(c.c_size_t)]
    lib.muh_prefill_workspace_size.restype = c.c_int
    lib.muh_last_error.restype = c.c_char_p
    return lib


def muh_prefill_fn(lib, q, k, v, out, cu, batch, seq, causal, stream):
    """muh on one cell of equal lengths (q, k, v, out [batch * seq, heads, hd] bf16, MHA; cu the
    cu_seqlens of both): returns (run, workspace_bytes). run() calls muh_prefill with the workspace
    muh_prefill_workspace_size() asks for (the tail split where the plan takes it), run(False)
    without one (every q tile whole); the workspace lives as long as run."""
    total, heads, hd = q.shape
    nbytes = ctypes.c_size_t(0)
    rc = lib.muh_prefill_workspace_size(MUH_BF16, batch, total, total, seq, seq, heads, heads, hd, int(causal), -1,
                                        ctypes.byref(nbytes))
    if rc != 0:
        raise RuntimeError(f"muh_prefill_workspace_size: {rc}: {lib.muh_last_error().decode()}")
    ws_bytes = nbytes.value
    ws = torch.empty(max(ws_bytes, 1), device="cuda", dtype=torch.uint8)

    def run(workspace=True):
        use = workspace and ws_bytes > 0
        rc = lib.muh_prefill(MUH_BF16, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), None, cu.data_ptr(),
                             cu.data_ptr(), batch, total, total, seq, seq, heads, heads, hd, 0.0, int(causal),
                             ws.data_ptr() if use else None, ws_bytes if use else 0, -1, stream)
        if rc != 0:
            raise RuntimeError(f"muh_prefill: {rc}: {lib.muh_last_error().decode()}")

    return run, ws_bytes


def median_ms(fn, iters, warmup=5):
    """Median of `iters` event-timed calls of fn after `warmup` calls, in ms."""
    return interleaved_ms([fn], iters, warmup)[0]


def interleaved_ms(fns, iters, warmup=5, before=None):
    """Medians of `iters` event-timed calls of each of `fns`, the calls interleaved (f0, f1, f0, f1,
    ...) so that clock and power drift falls on all of them alike: timed one after the other, the
    second of two identical calls read up to 2.4 % faster on the H200 (prefill_waves.py, hd256 4224,
    where the split does not apply). before(), when given, runs untimed ahead of every call (e.g. an
    L2 flush for a cold-cache decode)."""
    for f in fns:
        for _ in range(warmup):
            if before:
                before()
            f()
    torch.cuda.synchronize()
    ev = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in fns]
          for _ in range(iters)]
    for row in ev:
        for f, (s, e) in zip(fns, row):
            if before:
                before()
            s.record()
            f()
            e.record()
    torch.cuda.synchronize()
    return [statistics.median(row[i][0].elapsed_time(row[i][1]) for row in ev) for i in range(len(fns))]


def flops(b, h, s, d, causal):
    f = 4.0 * b * h * s * s * d
    return f / 2 if causal else f


def clocks():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001 — a report line, not a failure
        return f"nvidia-smi failed: {e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=os.path.join(os.path.dirname(__file__), "..", "build", "libmuh.so"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--tag", default="h200-" + datetime.date.today().isoformat())
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--commit", default="")
    args = ap.parse_args()
    if args.iters < 20:
        sys.exit("--iters must be >= 20")
    os.makedirs(args.out, exist_ok=True)
    lib = load_muh(args.lib)
    dev = torch.cuda.get_device_name()
    stream = torch.cuda.current_stream().cuda_stream
    print(f"device {dev}; torch {torch.__version__}; cudnn {torch.backends.cudnn.version()}; {clocks()}", flush=True)

    rows = []  # dicts: cell + backend + ms + tflops

    # Ceiling: bf16 GEMM 8192^3.
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda: a @ b, args.iters)
    gemm_tflops = 2.0 * n ** 3 / (ms * 1e-3) / 1e12
    rows.append(dict(head_dim=0, heads=0, seq_len=n, batch=1, causal=False, backend="GEMM", ms=ms, tflops=gemm_tflops,
                     err=""))
    print(f"GEMM bf16 8192^3: {ms:.3f} ms {gemm_tflops:.1f} TFLOP/s", flush=True)
    del a, b

    for hd, heads in [(128, 32), (256, 16)]:
        q = torch.randn(TOKENS, heads, hd, device="cuda", dtype=torch.bfloat16)
        k = torch.randn_like(q)
        v = torch.randn_like(q)
        out = torch.empty_like(q)
        for seq in [1024, 4096, 16384]:
            batch = TOKENS // seq
            cu = (torch.arange(batch + 1, device="cuda", dtype=torch.int32) * seq).contiguous()
            qs, ks, vs = (x.view(batch, seq, heads, hd).transpose(1, 2) for x in (q, k, v))
            for causal in [False, True]:
                f = flops(batch, heads, seq, hd, causal)
                cell = dict(head_dim=hd, heads=heads, seq_len=seq, batch=batch, causal=causal)

                run_muh, ws_bytes = muh_prefill_fn(lib, q, k, v, out, cu, batch, seq, causal, stream)

                ms, ms_whole = interleaved_ms([run_muh, lambda: run_muh(False)], args.iters)
                muh_row = len(rows)
                rows.append(dict(cell, backend="muh", ms=ms, tflops=f / (ms * 1e-3) / 1e12, err="",
                                 workspace_bytes=ws_bytes))
                rows.append(dict(cell, backend="muh-whole", ms=ms_whole, tflops=f / (ms_whole * 1e-3) / 1e12, err=""))
                ref = None
                for name, be in BACKENDS:
                    try:
                        with sdpa_kernel([be]):
                            fn = lambda: F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)  # noqa: E731
                            o = fn()
                            ms = median_ms(fn, args.iters)
                        if ref is None:
                            ref = o
                        rows.append(dict(cell, backend=name, ms=ms, tflops=f / (ms * 1e-3) / 1e12, err=""))
                    except Exception as e:  # noqa: BLE001 — an unsupported backend is a row, not a crash
                        rows.append(dict(cell, backend=name, ms=float("nan"), tflops=float("nan"), err=str(e)[:120]))
                # Sanity: muh's output against the first backend that ran (bf16 rounding level).
                run_muh()
                torch.cuda.synchronize()
                diff = float("nan") if ref is None else (out.view(batch, seq, heads, hd).transpose(1, 2).float() -
                                                        ref.float()).abs().max().item()
                rows[muh_row]["err"] = f"max|muh-{BACKENDS[0][0] if ref is not None else '?'}|={diff:.3g}"
                line = " ".join(f"{r['backend']} {r['tflops']:.0f}" for r in rows[muh_row:])
                print(f"hd{hd} h{heads} seq {seq} b{batch} {'causal' if causal else 'non-causal'}: {line} "
                      f"(TFLOP/s; {rows[muh_row]['err']}; workspace {ws_bytes} B)", flush=True)
        del q, k, v, out

    # Ratios per cell.
    cells = {}
    for r in rows:
        if r["backend"] == "GEMM":
            continue
        cells.setdefault((r["head_dim"], r["heads"], r["seq_len"], r["causal"]), {})[r["backend"]] = r
    summary = []
    for key, d in cells.items():
        m = d["muh"]["tflops"]
        s = dict(head_dim=key[0], heads=key[1], seq_len=key[2], causal=key[3], muh_tflops=m,
                 muh_over_gemm=m / gemm_tflops, muh_whole_tflops=d["muh-whole"]["tflops"],
                 split_gain=m / d["muh-whole"]["tflops"], workspace_bytes=d["muh"]["workspace_bytes"])
        for name, _ in BACKENDS:
            t = d.get(name, {}).get("tflops", float("nan"))
            s[f"{name}_tflops"] = t
            s[f"muh_over_{name}"] = m / t if t == t and t > 0 else float("nan")
        summary.append(s)

    base = os.path.join(args.out, f"prefill-{args.tag}")
    with open(base + ".csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(summary[0].keys()))
        w.writeheader()
        for s in summary:
            w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in s.items()})
    with open(base + ".json", "w") as fh:
        json.dump(dict(device=dev, torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                       date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       commit=args.commit, clocks_after=clocks(), iters=args.iters,
                       timing="median of CUDA-event-timed calls after 5 warm-ups",
                       gemm_tflops=gemm_tflops, summary=summary, rows=rows), fh, indent=1)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"hd{s['head_dim']} {s['seq_len'] // 1024}k{' c' if s['causal'] else ''}" for s in summary]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.27
    for i, (name, _) in enumerate(BACKENDS):
        ax.bar([x + (i - 1) * width for x in range(len(summary))], [s[f"muh_over_{name}"] for s in summary],
               width, label=f"muh / {name}")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(summary)))
    ax.set_xticklabels(labels, rotation=30, ha="right")
    ax.set_ylabel("TFLOP/s ratio")
    ax.set_title(f"muh prefill vs torch SDPA backends, bf16, 16k tokens/batch — {dev} ({args.tag})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(base + ".png", dpi=110)
    print("wrote", base + ".csv", base + ".json", base + ".png")
    for s in summary:
        print(f"hd{s['head_dim']} seq {s['seq_len']} {'causal' if s['causal'] else 'non-causal'}: muh {s['muh_tflops']:.0f}"
              f" | FA2 x{s['muh_over_FLASH']:.2f} cuDNN x{s['muh_over_CUDNN']:.2f} EFF x{s['muh_over_EFFICIENT']:.2f}"
              f" | {100 * s['muh_over_gemm']:.0f}% of GEMM | split x{s['split_gain']:.3f} over whole tiles")


if __name__ == "__main__":
    main()
