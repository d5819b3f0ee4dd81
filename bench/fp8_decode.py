#!/usr/bin/env python3
"""fp8_decode.py — issue 20's fp8 KV-cache decode benchmark: muh's decode over an e4m3 cache (bf16 q
and out) against the same decode over the bf16 cache, and FlashInfer's decode over both, in one
process, timed interleaved (cold L2: a 256 MB write before every call; median of >= 30 CUDA-event-
timed calls: flashinfer_peer.median_us, muh's method).

  muh_bf16   muh_paged_decode       (C ABI through ctypes, planned per call like the engine's op)
  muh_fp8    muh_paged_decode_quant (kv_dtype MUH_KV_FP8_E4M3, k_scale / v_scale per tensor)
  fi_bf16    FlashInfer BatchDecodeWithPagedKVCacheWrapper, bf16 cache (fa2, CUDA-core decode)
  fi_fp8     the same over the float8_e4m3fn cache with k_scale / v_scale (FlashInfer's fp8 decode)

Cells: NHD pages of 16 tokens in random order (vLLM V1's flash layout, FlashInfer's), every sequence
kv_len long; hd 128 with 32 q / 8 kv heads and hd 256 with 16 q / 4 kv heads, batch x kv_len from
issue 3's grid (the bandwidth-bound ones: many tokens in flight). Target (issue 20): muh_fp8 >= 1.8x
muh_bf16's tokens per second at the bandwidth-bound cells; reported beside FlashInfer's own ratio and
muh_fp8 / fi_fp8.

Correctness, per cell: muh_fp8 against fi_fp8 (both dequantise code * scale: they differ by rounding
only), and muh_fp8 against muh_bf16 (the quantisation error of e4m3, ~2^-4 relative per element).

  PYTHONPATH=/tmp/fi/site python3 bench/fp8_decode.py --lib <build>/libmuh.so --out DIR [--cells hd:batch:len,...]
      [--page N] [--dtype fp16]

--page: pages of N tokens (default 16; kv_len a multiple of it): pages other than 16 take the
sm80 agent's cp.async copies instead of its TMA boxes. --dtype: q, out and the 16-bit cache in
fp16 instead of bf16 (the name muh_bf16 then stands for that 16-bit cache).

Each cell runs in a process of its own (this script with --one), so a failing call — its error is
printed with the call's name — costs that cell only.
"""
import argparse
import ctypes
import json
import os
import random
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import flashinfer_peer as fp  # noqa: E402
import muh_capi as capi  # noqa: E402
from muh_capi import KvQuant, check  # noqa: E402

NHD, FP8_E4M3 = capi.LAYOUTS["nhd"], capi.KV_DTYPES["fp8_e4m3"]
PAGE = 16  # the default; --page
DTYPE = "bf16"  # q, out and the 16-bit cache; --dtype


def wide_dtype():
    """The torch dtype of q, out and the 16-bit cache (--dtype)."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[DTYPE]
CONFIGS = {128: (32, 8), 256: (16, 4)}
CELLS = [(128, 1, 32768), (128, 16, 8192), (128, 64, 8192), (128, 256, 2048),
         (256, 1, 32768), (256, 16, 8192), (256, 64, 8192)]
K_SCALE, V_SCALE = 0.02, 0.015  # N(0, 1) / scale stays far inside e4m3's 448 (~5 sigma -> 250 / 333)


def ptr(t):
    return ctypes.c_void_p(t.data_ptr())


def make_cell(hd, batch, kv_len, seed):
    hq, hkv = CONFIGS[hd]
    wide = wide_dtype()
    g = torch.Generator(device="cuda").manual_seed(seed)
    blocks = kv_len // PAGE
    pages = batch * blocks
    order = list(range(pages))
    random.Random(seed).shuffle(order)
    table = torch.tensor(order, dtype=torch.int32, device="cuda").view(batch, blocks)
    k = torch.randn(pages, PAGE, hkv, hd, generator=g, device="cuda", dtype=torch.float32)
    v = torch.randn(pages, PAGE, hkv, hd, generator=g, device="cuda", dtype=torch.float32)
    fp8 = torch.float8_e4m3fn
    k8 = (k / K_SCALE).clamp(-448, 448).to(fp8)  # vLLM's quantisation: divide, saturate, round
    v8 = (v / V_SCALE).clamp(-448, 448).to(fp8)
    del k, v
    kb = (k8.float() * K_SCALE).to(wide)  # the 16-bit cache of the same values (as near as it holds)
    vb = (v8.float() * V_SCALE).to(wide)
    q = torch.randn(batch, hq, hd, generator=g, device="cuda", dtype=torch.float32).to(wide)
    lens = torch.full((batch,), kv_len, dtype=torch.int32, device="cuda")
    return dict(hd=hd, hq=hq, hkv=hkv, batch=batch, kv_len=kv_len, pages=pages, blocks=blocks, table=table,
                k8=k8, v8=v8, kb=kb, vb=vb, q=q, lens=lens)


def muh_call(lib, c, fp8):
    """A callable running muh's decode of cell c (fp8: the e4m3 cache) into its own output."""
    size = ctypes.c_size_t(0)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    dt = capi.DTYPES[DTYPE]
    check(lib, lib.muh_decode_workspace_size_quant(dt, NHD, c["batch"], c["hq"], c["hkv"], c["hd"], PAGE, c["kv_len"],
                                                   -1, 0, 0, stream, ctypes.byref(size), FP8_E4M3 if fp8 else 0),
          "muh_decode_workspace_size_quant")  # (an fp8 cache's plan is its own: plan.cpp)
    ws = torch.empty(max(size.value, 16), dtype=torch.uint8, device="cuda")
    out = torch.empty_like(c["q"])
    kq = KvQuant(FP8_E4M3, K_SCALE, V_SCALE)
    kc, vc = (c["k8"], c["v8"]) if fp8 else (c["kb"], c["vb"])
    args = [dt, NHD, ptr(c["q"]), ptr(kc), ptr(vc), ptr(out), None, ptr(c["table"]), ptr(c["lens"]), c["batch"],
            c["hq"], c["hkv"], c["hd"], PAGE, c["pages"], c["blocks"], c["kv_len"], 0.0, ptr(ws), size.value, -1, 0,
            0, stream]

    def run():
        if fp8:
            check(lib, lib.muh_paged_decode_quant(*args, None, ctypes.byref(kq)), "muh_paged_decode_quant")
        else:
            check(lib, lib.muh_paged_decode(*args), "muh_paged_decode")

    run.out = out
    return run


def main():
    global PAGE, DTYPE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libmuh.so")
    ap.add_argument("--out", default=".", help="directory for fp8-decode.json / .md")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-flashinfer", action="store_true", help="muh only")
    ap.add_argument("--cells", default=",".join(f"{h}:{b}:{n}" for h, b, n in CELLS),
                    help="hd:batch:kv_len, comma-separated (hd 128: 32/8 heads, 256: 16/4)")
    ap.add_argument("--page", type=int, default=PAGE, help="tokens a page (default 16)")
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default=DTYPE, help="q, out and the 16-bit cache")
    ap.add_argument("--one", action="store_true", help="(internal) run the cells in this process")
    args = ap.parse_args()
    PAGE, DTYPE = args.page, args.dtype
    cells = [tuple(int(x) for x in c.split(":")) for c in args.cells.split(",") if c]
    for hd, batch, kv_len in cells:
        if args.page < 1 or kv_len % args.page:
            ap.error(f"--cells: kv_len {kv_len} is not a multiple of --page {args.page}")
    if not args.one:
        # Each cell in a process of its own; their rows are gathered from the JSON each writes.
        rows, meta = [], None
        os.makedirs(args.out, exist_ok=True)
        for i, (hd, batch, kv_len) in enumerate(cells):
            sub = os.path.join(args.out, f"cell{i}")
            cmd = [sys.executable, __file__, "--lib", args.lib, "--out", sub, "--iters", str(args.iters),
                   "--cells", f"{hd}:{batch}:{kv_len}", "--page", str(PAGE), "--dtype", DTYPE,
                   "--one"] + (["--no-flashinfer"] if args.no_flashinfer else [])
            rc = subprocess.call(cmd)
            path = os.path.join(sub, "fp8-decode.json")
            if rc != 0 or not os.path.exists(path):
                print(f"hd{hd} b{batch} x {kv_len}: FAILED (rc {rc})", flush=True)
                continue
            with open(path) as f:
                d = json.load(f)
            rows += d["rows"]
            meta = d["meta"]
        if meta is not None:
            write(args.out, meta, rows)
        return
    lib = capi.load(args.lib)
    os.makedirs(args.out, exist_ok=True)
    dev = torch.cuda.get_device_properties(0)
    print(f"fp8_decode: {dev.name}, {dev.multi_processor_count} SMs, iters {args.iters}", flush=True)
    fi = not args.no_flashinfer
    if fi:
        ok, why = fp.available()
        print(f"flashinfer: {why}", flush=True)
        fi = ok
    if fi:
        wide = wide_dtype()
        cfgs = [("decode", "fa2", wide, dt, hd) for hd in sorted({c[0] for c in cells})
                for dt in (wide, torch.float8_e4m3fn)]
        fp.prebuild(cfgs)
    rows = []
    for hd, batch, kv_len in cells:
        c = make_cell(hd, batch, kv_len, seed=hd * 7 + batch * 13 + kv_len)
        calls = {"muh_bf16": muh_call(lib, c, False), "muh_fp8": muh_call(lib, c, True)}
        if fi:
            try:
                calls["fi_bf16"] = fp.paged_decode(c["q"], c["kb"], c["vb"], c["table"], c["lens"])
                calls["fi_fp8"] = fp.paged_decode(c["q"], c["k8"], c["v8"], c["table"], c["lens"],
                                                  k_scale=K_SCALE, v_scale=V_SCALE)
            except Exception as e:  # noqa: BLE001 — said, and the cell goes on without the peer
                print(f"  flashinfer failed on hd{hd} b{batch} x {kv_len}: {type(e).__name__}: {e}", flush=True)
        for n, f in calls.items():  # one at a time: a failing call is named
            print(f"  first call: {n}", flush=True)
            f()
            torch.cuda.synchronize()
        outs = {k: f.out.float() for k, f in calls.items()}
        err = {}
        for a, b in (("muh_fp8", "fi_fp8"), ("muh_fp8", "muh_bf16"), ("muh_bf16", "fi_bf16")):
            if a in outs and b in outs:
                err[f"{a}_vs_{b}"] = float((outs[a] - outs[b]).abs().max())
        nonfinite = {k: int((~torch.isfinite(o)).sum()) for k, o in outs.items()}
        names = list(calls)
        us = fp.median_us([calls[n] for n in names], args.iters)
        t = dict(zip(names, us))
        tokens = batch * kv_len
        row = dict(hd=hd, q_heads=c["hq"], kv_heads=c["hkv"], batch=batch, kv_len=kv_len, us=t,
                   tokens_per_s={n: tokens / (x * 1e-6) for n, x in t.items()},
                   kv_bytes={"bf16": 2 * tokens * c["hkv"] * hd * 2, "fp8": 2 * tokens * c["hkv"] * hd},
                   max_abs_diff=err, nonfinite=nonfinite)
        row["muh_fp8_speedup"] = t["muh_bf16"] / t["muh_fp8"]
        if "fi_fp8" in t:
            row["fi_fp8_speedup"] = t["fi_bf16"] / t["fi_fp8"]
            row["muh_fp8_vs_fi_fp8"] = t["fi_fp8"] / t["muh_fp8"]
            row["muh_bf16_vs_fi_bf16"] = t["fi_bf16"] / t["muh_bf16"]
        rows.append(row)
        print(f"hd{hd} b{batch:4d} x {kv_len:6d}: " + "  ".join(f"{n} {x:8.1f} us" for n, x in t.items()) +
              f"  | muh fp8/bf16 {row['muh_fp8_speedup']:.2f}x" +
              (f"  fi fp8/bf16 {row['fi_fp8_speedup']:.2f}x  muh_fp8 vs fi_fp8 {row['muh_fp8_vs_fi_fp8']:.2f}x"
               if "fi_fp8" in t else "") + f"  diff {err}  nonfinite {nonfinite}", flush=True)
        del c, calls, outs
        torch.cuda.empty_cache()
    meta = dict(device=dev.name, sms=dev.multi_processor_count, iters=args.iters, page=PAGE, dtype=DTYPE, layout="NHD",
                k_scale=K_SCALE, v_scale=V_SCALE, date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                flashinfer=fp.available()[1] if fi else "not run")
    write(args.out, meta, rows)


def write(out, meta, rows):
    """fp8-decode.json (meta, rows) and fp8-decode.md (the table) in `out`."""
    with open(os.path.join(out, "fp8-decode.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    with open(os.path.join(out, "fp8-decode.md"), "w") as f:
        f.write(f"# fp8 KV-cache decode ({meta['device']}, {meta['date']}; {meta.get('dtype', 'bf16')} q, "
                f"NHD pages of {meta['page']})\n\n")
        w = meta.get("dtype", "bf16")  # the 16-bit cache's type (the rows' muh_bf16 / fi_bf16 keys name it so)
        f.write(f"| cell | muh {w} µs | muh e4m3 µs | muh e4m3/{w} tok/s | FI {w} µs | FI e4m3 µs | FI e4m3/{w} | "
                "muh e4m3 vs FI e4m3 |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            t = r["us"]
            f.write(f"| hd{r['hd']} {r['q_heads']}/{r['kv_heads']} b{r['batch']} × {r['kv_len']} | {t['muh_bf16']:.1f} | "
                    f"{t['muh_fp8']:.1f} | {r['muh_fp8_speedup']:.2f}× | {t.get('fi_bf16', float('nan')):.1f} | "
                    f"{t.get('fi_fp8', float('nan')):.1f} | {r.get('fi_fp8_speedup', float('nan')):.2f}× | "
                    f"{r.get('muh_fp8_vs_fi_fp8', float('nan')):.2f}× |\n")


if __name__ == "__main__":
    main()
