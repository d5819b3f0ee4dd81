#!/usr/bin/env python3
"""compare_torch.py — muh prefill side by side with PyTorch SDPA, in one process on one GPU.

muh runs through its C ABI (muh_prefill in libmuh.so, loaded with ctypes) on the very tensors
torch allocated (Tensor.data_ptr()); torch.nn.functional.scaled_dot_product_attention runs with
each backend forced (FLASH_ATTENTION = FlashAttention-2, CUDNN_ATTENTION, EFFICIENT_ATTENTION);
a torch bf16 GEMM 8192^3 gives the ceiling. The grid is the issue's: bf16, head_dim 128 x 32
heads and head_dim 256 x 16 heads, seq_len 1024 / 4096 / 16384 with 16384 tokens per batch,
causal and not, plus head_dim 64 x 32 heads and one GQA cell (hd 128, 32 q / 8 kv heads, 4k).
--sm80-target 90 (the default) also times muh with sm_90's row forced — the sm80-class agent,
against the Hopper agent the walk takes on an H100/H200 — interleaved with muh's own calls;
--flashinfer adds FlashInfer's ragged prefill (fa3 and fa2 backends, bench/flashinfer_peer.py). TFLOP/s = 4*b*h*sq*sk*d / t, halved for causal. Each time is the median of
--iters CUDA-event-timed calls after 5 warm-up calls. muh runs as a user would call it, with the
workspace muh_prefill_workspace_size() asks for (the tail split, or the sm90 agent's persistent
schedule: muh/prefill_plan.hpp), and again without one ("muh-whole": every q tile whole, one CTA
each), the two timed interleaved (interleaved_ms), so the workspace's gain is measured in the same
run.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import muh_capi as capi  # noqa: E402

MUH_BF16 = capi.DTYPES["bf16"]

BACKENDS = [("FLASH", SDPBackend.FLASH_ATTENTION), ("CUDNN", SDPBackend.CUDNN_ATTENTION),
            ("EFFICIENT", SDPBackend.EFFICIENT_ATTENTION)]
TOKENS = 16384
# (head_dim, q heads, kv heads, seq lengths): the grid (MHA, 16k tokens per batch), hd 64,
# and one GQA cell (32 q / 8 kv heads at 4k).
CELLS = [(128, 32, 32, [1024, 4096, 16384]), (256, 16, 16, [1024, 4096, 16384]), (64, 32, 32, [1024, 4096, 16384]),
         (128, 32, 8, [4096])]


def muh_prefill_fn(lib, q, k, v, out, cu, batch, seq, causal, stream, target=-1):
    """muh on one cell of equal lengths (q, out [batch * seq, q_heads, hd], k, v [batch * seq,
    kv_heads, hd] bf16; cu the cu_seqlens of both): returns (run, workspace_bytes). run() calls
    muh_prefill with the workspace muh_prefill_workspace_size() asks for (the tail split where the
    plan takes it), run(False) without one (every q tile whole); the workspace lives as long as
    run. target: the dispatch target forced (-1: the device's walk; 90: the sm80-class agent's
    sm_90 row; 91: sm_90a, the Hopper agent)."""
    total, heads, hd = q.shape
    kv_heads = k.shape[1]
    nbytes = ctypes.c_size_t(0)
    rc = lib.muh_prefill_workspace_size(MUH_BF16, batch, total, total, seq, seq, heads, kv_heads, hd, int(causal),
                                        target, ctypes.byref(nbytes))
    if rc != 0:
        raise RuntimeError(f"muh_prefill_workspace_size: {rc}: {lib.muh_last_error().decode()}")
    ws_bytes = nbytes.value
    ws = torch.empty(max(ws_bytes, 1), device="cuda", dtype=torch.uint8)

    def run(workspace=True):
        use = workspace and ws_bytes > 0
        rc = lib.muh_prefill(MUH_BF16, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), None, cu.data_ptr(),
                             cu.data_ptr(), batch, total, total, seq, seq, heads, kv_heads, hd, 0.0, int(causal),
                             ws.data_ptr() if use else None, ws_bytes if use else 0, target, stream)
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
    ap.add_argument("--flashinfer", action="store_true",
                    help="also time FlashInfer's ragged prefill, backends fa3 and fa2 (bench/flashinfer_peer.py; "
                         "its modules JIT-compile first, ~3-5 min)")
    ap.add_argument("--sm80-target", type=int, default=90,
                    help="also time muh with this target forced, interleaved with muh's own (default 90: the "
                         "sm80-class agent's sm_90 row, the A/B against the Hopper agent); -1: not")
    args = ap.parse_args()
    if args.iters < 20:
        sys.exit("--iters must be >= 20")
    os.makedirs(args.out, exist_ok=True)
    lib = capi.load(args.lib)
    dev = torch.cuda.get_device_name()
    stream = torch.cuda.current_stream().cuda_stream
    print(f"device {dev}; torch {torch.__version__}; cudnn {torch.backends.cudnn.version()}; {clocks()}", flush=True)

    rows = []  # dicts: cell + backend + ms + tflops

    # Ceiling: bf16 GEMM 8192^3.
    n = 8192
    ga = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    gb = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda: ga @ gb, args.iters)
    gemm_tflops = 2.0 * n ** 3 / (ms * 1e-3) / 1e12
    rows.append(dict(head_dim=0, heads=0, kv_heads=0, seq_len=n, batch=1, causal=False, backend="GEMM", ms=ms, tflops=gemm_tflops,
                     err=""))
    print(f"GEMM bf16 8192^3: {ms:.3f} ms {gemm_tflops:.1f} TFLOP/s", flush=True)
    ga = gb = None  # free the GEMM operands

    fi_backends = []
    if args.flashinfer:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import flashinfer_peer as fip
        ok, why = fip.available()
        if ok:
            fi_backends = ["fa3", "fa2"]
            fip.prebuild([("prefill", b, torch.bfloat16, torch.bfloat16, hd) for b in fi_backends
                          for hd in sorted({c[0] for c in CELLS})], log=lambda m: print(m, flush=True))
        else:
            print(f"FlashInfer not measured: {why}", flush=True)

    for hd, heads, kv_heads, seqs in CELLS:
        q = torch.randn(TOKENS, heads, hd, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(TOKENS, kv_heads, hd, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        out = torch.empty_like(q)
        out_t90 = torch.empty_like(q)
        for seq in seqs:
            batch = TOKENS // seq
            cu = (torch.arange(batch + 1, device="cuda", dtype=torch.int32) * seq).contiguous()
            qs, ks, vs = (x.view(batch, seq, x.shape[1], hd).transpose(1, 2) for x in (q, k, v))
            for causal in [False, True]:
                f = flops(batch, heads, seq, hd, causal)
                cell = dict(head_dim=hd, heads=heads, kv_heads=kv_heads, seq_len=seq, batch=batch, causal=causal)

                run_muh, ws_bytes = muh_prefill_fn(lib, q, k, v, out, cu, batch, seq, causal, stream)
                fns, names = [run_muh], ["muh"]
                if ws_bytes > 0:
                    fns.append(lambda: run_muh(False))
                    names.append("muh-whole")
                if args.sm80_target >= 0:  # the sm80-class agent forced, interleaved with muh's own
                    run_t, _ = muh_prefill_fn(lib, q, k, v, out_t90, cu, batch, seq, causal, stream, args.sm80_target)
                    fns.append(run_t)
                    names.append(f"muh-t{args.sm80_target}")
                mss = interleaved_ms(fns, args.iters)
                muh_row = len(rows)
                for name, ms in zip(names, mss):
                    rows.append(dict(cell, backend=name, ms=ms, tflops=f / (ms * 1e-3) / 1e12, err="",
                                     workspace_bytes=ws_bytes if name == "muh" else 0))
                ref = None
                for name, be in BACKENDS:
                    try:
                        with sdpa_kernel([be]):
                            fn = lambda: F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal,  # noqa: E731
                                                                        enable_gqa=kv_heads != heads)
                            o = fn()
                            ms = median_ms(fn, args.iters)
                        if ref is None:
                            ref = o
                        rows.append(dict(cell, backend=name, ms=ms, tflops=f / (ms * 1e-3) / 1e12, err=""))
                    except Exception as e:  # noqa: BLE001 — an unsupported backend is a row, not a crash
                        rows.append(dict(cell, backend=name, ms=float("nan"), tflops=float("nan"), err=str(e)[:120]))
                for b in fi_backends:
                    try:
                        peer = fip.ragged_prefill(q, k, v, cu, cu, causal=causal, backend=b)
                        peer()
                        ms = median_ms(peer, args.iters)
                        torch.cuda.synchronize()
                        d = (peer.out.float() - out.float()).abs().max().item() if ref is not None else float("nan")
                        rows.append(dict(cell, backend=f"FI-{b}", ms=ms, tflops=f / (ms * 1e-3) / 1e12,
                                         err=f"max|FI-muh|={d:.3g}"))
                    except Exception as e:  # noqa: BLE001
                        rows.append(dict(cell, backend=f"FI-{b}", ms=float("nan"), tflops=float("nan"),
                                         err=str(e)[:120]))
                # Sanity: muh's output (and the forced sm80 row's) against the first backend that ran.
                run_muh()
                torch.cuda.synchronize()
                as_bhsd = lambda x: x.view(batch, seq, heads, hd).transpose(1, 2).float()  # noqa: E731
                diff = float("nan") if ref is None else (as_bhsd(out) - ref.float()).abs().max().item()
                rows[muh_row]["err"] = f"max|muh-{BACKENDS[0][0] if ref is not None else '?'}|={diff:.3g}"
                if args.sm80_target >= 0 and ref is not None:
                    d90 = (as_bhsd(out_t90) - ref.float()).abs().max().item()
                    rows[muh_row]["err"] += f" max|t{args.sm80_target}-ref|={d90:.3g}"
                line = " ".join(f"{r['backend']} {r['tflops']:.0f}" for r in rows[muh_row:])
                print(f"hd{hd} h{heads}/{kv_heads} seq {seq} b{batch} {'causal' if causal else 'non-causal'}: {line} "
                      f"(TFLOP/s; {rows[muh_row]['err']}; workspace {ws_bytes} B)", flush=True)
        del q, k, v, out, out_t90

    # Ratios per cell.
    cells = {}
    for r in rows:
        if r["backend"] == "GEMM":
            continue
        cells.setdefault((r["head_dim"], r["heads"], r["kv_heads"], r["seq_len"], r["causal"]), {})[r["backend"]] = r
    peers = [name for name, _ in BACKENDS] + [f"FI-{b}" for b in fi_backends]
    if args.sm80_target >= 0:
        peers.append(f"muh-t{args.sm80_target}")
    summary = []
    for key, d in cells.items():
        m = d["muh"]["tflops"]
        whole = d.get("muh-whole", d["muh"])["tflops"]
        s = dict(head_dim=key[0], heads=key[1], kv_heads=key[2], seq_len=key[3], causal=key[4], muh_tflops=m,
                 muh_over_gemm=m / gemm_tflops, muh_whole_tflops=whole, split_gain=m / whole,
                 workspace_bytes=d["muh"]["workspace_bytes"])
        for name in peers:
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
    labels = [f"hd{s['head_dim']}{'' if s['kv_heads'] == s['heads'] else ' gqa'} {s['seq_len'] // 1024}k"
              f"{' c' if s['causal'] else ''}" for s in summary]
    fig, ax = plt.subplots(figsize=(14, 4.5))
    width = 0.8 / len(peers)
    for i, name in enumerate(peers):
        ax.bar([x + (i - (len(peers) - 1) / 2) * width for x in range(len(summary))],
               [s[f"muh_over_{name}"] for s in summary], width, label=f"muh / {name}")
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
        ratios = " ".join(f"{name} x{s[f'muh_over_{name}']:.2f}" for name in peers)
        print(f"hd{s['head_dim']} h{s['heads']}/{s['kv_heads']} seq {s['seq_len']} "
              f"{'causal' if s['causal'] else 'non-causal'}: muh {s['muh_tflops']:.0f} | {ratios}"
              f" | {100 * s['muh_over_gemm']:.0f}% of GEMM | with workspace x{s['split_gain']:.3f} over without"
              f" ({s['workspace_bytes']} B)")


if __name__ == "__main__":
    main()
