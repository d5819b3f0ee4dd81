"""mixed_batch.py — issue 17's mixed-batch cells: muh's mixed call against the sum of its separate
prefill and decode calls, in one process (run by paged_prefill.py --mixed).

All calls go through libmuh.so's C ABI (ctypes; the same per-call planning on every side):
  mixed      muh_paged_attention: one call for the whole batch, planned by plan_mixed
             (include/muh/mixed_plan.hpp) as the decode/prefill pair or one paged-prefill launch;
  one        the same call forced to one paged-prefill launch (force_split 0);
  split      the same call forced to the pair (force_split 1), where the batch allows it;
  separate   what an engine without the mixed call runs: muh_paged_decode on the decode rows and
             muh_paged_prefill on the rest (its own cu_seqlens_q from 0), back to back, timed as one.
Every call with a cold L2 (a 256 MB write before it), the four interleaved, medians of >= 30.
Target (issue 17): mixed >= 1.0x separate.

Cells (bf16, head_dim 128, 32 q / 8 kv heads, page 16, pages in random order; both layouts):
  serving   one 2048-token chunk over a 16k prefix batched with 63 single-token decodes at 8k
            (decodes first, vLLM V1's order);
  verify    64 sequences x 4 verification tokens at 8k: no q_len-1 rows, so mixed is one paged
            prefill; separate is 4 paged decode calls, token i of each sequence over its
            8k - 3 + i keys (exactly the causal rows).

  PYTHONPATH=<build>/python python3 bench/paged_prefill.py --mixed --lib <build>/libmuh.so --out DIR
"""
import csv
import ctypes
import json
import os
import random

import torch

import muh_capi as capi  # noqa: E402 (paged_prefill.py put bench/ on the path)
from compare_torch import clocks, interleaved_ms  # noqa: E402
from muh_capi import check  # noqa: E402

BF16, NHD, VLLM = capi.DTYPES["bf16"], capi.LAYOUTS["nhd"], capi.LAYOUTS["vllm"]
HQ, HKV, HD, PAGE = 32, 8, 128, 16

CELLS = [
    dict(name="serving", q=[1] * 63 + [2048], kv=[8192] * 63 + [16384 + 2048]),
    dict(name="verify", q=[4] * 64, kv=[8192] * 64),
]


def make(cell, layout, gen):
    """The batch's device tensors: q, a randomly paged cache in `layout`, the tables, host copies."""
    dev, dt = "cuda", torch.bfloat16
    qs, kvs = cell["q"], cell["kv"]
    b = len(qs)
    blocks = [(k + PAGE - 1) // PAGE for k in kvs]
    max_blocks, pages = max(blocks), sum(blocks)
    order = list(range(pages))
    random.Random(1).shuffle(order)
    table = torch.zeros(b, max_blocks, dtype=torch.int32)
    at = 0
    for s in range(b):
        table[s, :blocks[s]] = torch.tensor(order[at:at + blocks[s]], dtype=torch.int32)
        at += blocks[s]
    x = 8
    if layout == NHD:
        kc = torch.randn(pages, PAGE, HKV, HD, device=dev, dtype=dt, generator=gen)
        vc = torch.randn(pages, PAGE, HKV, HD, device=dev, dtype=dt, generator=gen)
    else:
        kc = torch.randn(pages, HKV, HD // x, PAGE, x, device=dev, dtype=dt, generator=gen)
        vc = torch.randn(pages, HKV, HD, PAGE, device=dev, dtype=dt, generator=gen)
    cu = [0]
    for n in qs:
        cu.append(cu[-1] + n)
    return dict(q=torch.randn(cu[-1], HQ, HD, device=dev, dtype=dt, generator=gen), kc=kc, vc=vc,
                table=table.to(dev), cu=torch.tensor(cu, dtype=torch.int32, device=dev),
                used=torch.tensor(kvs, dtype=torch.int32, device=dev), cu_host=(ctypes.c_int * len(cu))(*cu),
                used_host=(ctypes.c_int * b)(*kvs), b=b, total=cu[-1], max_q=max(qs), max_k=max(kvs),
                pages=pages, max_blocks=max_blocks)


def runners(lib, cell, layout, t):
    stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)  # noqa: E731
    ptr = lambda x, off=0: ctypes.c_void_p(x.data_ptr() + off)  # noqa: E731
    out = {k: torch.empty_like(t["q"]) for k in ("mixed", "one", "split", "separate")}

    def ws_for(force_split):
        n = ctypes.c_size_t(0)
        rc = lib.muh_paged_attention_workspace_size(BF16, layout, t["cu_host"], t["used_host"], t["b"], t["total"],
                                                    t["max_q"], t["max_k"], HQ, HKV, HD, PAGE, t["pages"],
                                                    t["max_blocks"], 1, 0, -1, force_split, 0, 0, stream(),
                                                    ctypes.byref(n))
        return rc, n.value

    def mixed_fn(name, force_split):
        rc, n = ws_for(force_split)
        if rc != 0:
            return None  # e.g. split refused: no q_len-1 rows
        ws = torch.empty(max(n, 16), dtype=torch.uint8, device="cuda")

        def f():
            check(lib, lib.muh_paged_attention(BF16, layout, ptr(t["q"]), ptr(t["kc"]), ptr(t["vc"]), ptr(out[name]),
                                               None, ptr(t["cu"]), ptr(t["table"]), ptr(t["used"]), t["cu_host"],
                                               t["used_host"], t["b"], t["total"], t["max_q"], t["max_k"], HQ, HKV, HD,
                                               PAGE, t["pages"], t["max_blocks"], 0.0, 1, ptr(ws), n, -1, force_split,
                                               0, 0, 0, stream()), name)
        f.workspace = n
        return f

    def decode_ws(num_seqs, max_len):
        n = ctypes.c_size_t(0)
        check(lib, lib.muh_decode_workspace_size(BF16, layout, num_seqs, HQ, HKV, HD, PAGE, max_len, -1, 0, 0,
                                                 ctypes.byref(n)), "decode workspace")
        return torch.empty(max(n.value, 16), dtype=torch.uint8, device="cuda"), n.value

    qs = cell["q"]
    nd = next((i for i, n in enumerate(qs) if n != 1), len(qs))
    row = HQ * HD * 2
    o = out["separate"]
    if nd > 0:  # serving: the decode rows, then the chunk with its own cu_seqlens_q
        dws, dn = decode_ws(nd, max(cell["kv"][:nd]))
        rest = t["b"] - nd
        cu_p = (t["cu"][nd:] - nd).contiguous()
        max_q_p = max(qs[nd:])

        def separate(for_check=False):
            check(lib, lib.muh_paged_decode(BF16, layout, ptr(t["q"]), ptr(t["kc"]), ptr(t["vc"]), ptr(o), None,
                                            ptr(t["table"]), ptr(t["used"]), nd, HQ, HKV, HD, PAGE, t["pages"],
                                            t["max_blocks"], max(cell["kv"][:nd]), 0.0, ptr(dws), dn, -1, 0, 0,
                                            stream()), "decode")
            check(lib, lib.muh_paged_prefill(BF16, layout, ptr(t["q"], nd * row), ptr(t["kc"]), ptr(t["vc"]),
                                             ptr(o, nd * row), None, ptr(cu_p), ptr(t["table"], nd * t["max_blocks"] * 4),
                                             ptr(t["used"], nd * 4), rest, t["total"] - nd, max_q_p, t["max_k"], HQ,
                                             HKV, HD, PAGE, t["pages"], t["max_blocks"], 0.0, 1, None, 0, -1, 0,
                                             stream()), "prefill")
    else:  # verify: token i of every sequence as one decode call over kv - (n - 1) + i keys
        n = qs[0]
        qv = t["q"].view(t["b"], n, HQ, HD)
        q_i = [qv[:, i].contiguous() for i in range(n)]
        o_i = [torch.empty_like(x) for x in q_i]
        lens = [(t["used"] - (n - 1) + i).contiguous() for i in range(n)]
        # One workspace for the n calls: the largest any of their plans asks for.
        dws, dn = max((decode_ws(t["b"], t["max_k"] - (n - 1) + i) for i in range(n)), key=lambda w: w[1])

        def separate(for_check=False):
            for i in range(n):
                check(lib, lib.muh_paged_decode(BF16, layout, ptr(q_i[i]), ptr(t["kc"]), ptr(t["vc"]), ptr(o_i[i]),
                                                None, ptr(t["table"]), ptr(lens[i]), t["b"], HQ, HKV, HD, PAGE,
                                                t["pages"], t["max_blocks"], t["max_k"] - (n - 1) + i, 0.0, ptr(dws),
                                                dn, -1, 0, 0, stream()), "decode")
            if for_check:  # the rows back in the batch's order, for the comparison only (not timed)
                o.view(t["b"], n, HQ, HD).copy_(torch.stack(o_i, 1))
    fns = dict(mixed=mixed_fn("mixed", -1), one=mixed_fn("one", 0), split=mixed_fn("split", 1), separate=separate)
    return {k: f for k, f in fns.items() if f is not None}, out


def run(args):
    lib = capi.load(args.lib)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    print("clocks before:", clocks(), flush=True)
    base = os.path.join(args.out, f"mixed-batch-{args.tag}")
    rows = []
    print(f"{'cell':8} {'layout':6} {'mixed us':>9} {'one us':>9} {'split us':>9} {'separate us':>11} "
          f"{'sep/mixed':>9} {'ws B':>9} {'err':>8}")
    for cell in CELLS:
        for layout in (VLLM, NHD):
            t = make(cell, layout, gen)
            fns, out = runners(lib, cell, layout, t)
            for k, f in fns.items():
                f(True) if k == "separate" else f()
            torch.cuda.synchronize()
            err = max((out[k].float() - out["separate"].float()).abs().max().item() for k in fns if k != "separate")
            names = list(fns)
            ms = interleaved_ms([fns[n] for n in names], args.iters, before=lambda: flush.zero_())
            us = {n: m * 1e3 for n, m in zip(names, ms)}
            lay = "vllm" if layout == VLLM else "nhd"
            row = dict(cell=cell["name"], layout=lay, mixed_us=us["mixed"], one_us=us["one"],
                       split_us=us.get("split", float("nan")), separate_us=us["separate"],
                       separate_over_mixed=us["separate"] / us["mixed"], workspace=fns["mixed"].workspace,
                       max_abs_diff=err)
            rows.append(row)
            print(f"{cell['name']:8} {lay:6} {us['mixed']:9.1f} {us['one']:9.1f} {row['split_us']:9.1f} "
                  f"{us['separate']:11.1f} {row['separate_over_mixed']:9.3f} {row['workspace']:9d} {err:8.2e}",
                  flush=True)
            with open(base + ".csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
            del t, fns, out
    print("clocks after:", clocks())
    with open(base + ".json", "w") as f:
        json.dump(dict(tag=args.tag, iters=args.iters, rows=rows), f, indent=1)
    print("wrote", base + ".csv")
