"""paged_prefill.py — prefill over a paged KV cache against muh's own dense prefill, side by side
in one process (issue 17's benchmark, the muh half).

Each cell runs, interleaved, with a cold L2 (a 256 MB write before every timed call):
  dense   muh.ops.flash_attn_varlen_func over contiguous k/v of prefix + chunk tokens (causal,
          bottom-right): what paging is measured against (target: paged >= 0.95x dense);
  paged   the same attention with k/v read through the block table from a paged cache, by
          muh.ops.flash_attn_varlen_func(..., block_table=, seqused_k=) (NHD, vLLM V1's call) and,
          on the vLLM layout, by torch.ops.muh.context_attention_fwd (vLLM 0.6.3's call: the
          prefix from the cache, the chunk from k/v, merged by LSE);
  vllm1   flash_attn_varlen_func over the vLLM-layout cache, the whole sequence (chunk included)
          read through the block table in one call: what an engine that writes the chunk into the
          cache first (vLLM 0.6.3's V0 engine does, reshape_and_cache before the attention) can
          call instead of context_attention_fwd.
Pages are handed out in a random order. FLOPs count the causal visible keys exactly
(4 · d · heads · Σ_i (prefix + i + 1)); bytes are K/V read once + q + out.

Cells: the seed's (fp16, hd 256, 4/1 and 6/1 heads, one sequence, prefix {0, 8k, 32k, 100k} ×
chunk {512, 2048, 4096}, page 16) and the serving cells that need no mixed batch (bf16, hd 128,
32/8 heads, page 16: 8 sequences × 2048-token chunks over 0 / 32k prefixes).

  PYTHONPATH=<build>/python python3 bench/paged_prefill.py --out DIR [--quick]

--mixed runs the mixed-batch cells instead (bench/mixed_batch.py: the mixed call against the sum of
separate prefill and decode calls; needs --lib <build>/libmuh.so).

--flashinfer adds FlashInfer's BatchPrefillWithPagedKVCacheWrapper on the same NHD cache and block
table (bench/flashinfer_peer.py; backends from --fi-backends), timed interleaved with muh's calls:
columns fi_<backend>_us and nhd_over_fi_<backend> (= FlashInfer time / muh NHD time; target >= 1.0).

--ncu NAME:PREFIX:CHUNK (e.g. seed:8192:512, with the hq 4 seed cell) times nothing: each arm of
that cell runs twice, then once between cudaProfilerStart/Stop, named on stdout — for
  ncu --profile-from-start off --metrics gpu__time_duration.sum python3 bench/paged_prefill.py --ncu ...
which lists every kernel an arm launches (context_attention_fwd's three parts) with its time.
"""
import argparse
import csv
import datetime
import json
import os
import random
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_torch import clocks, interleaved_ms  # noqa: E402

import muh.ops  # noqa: E402,F401  (registers torch.ops.muh)

SEED_CELLS = [dict(name="seed", dtype=torch.float16, hd=256, hq=hq, hkv=1, batch=1, prefix=p, chunk=c, page=16)
              for hq in (4, 6) for p in (0, 8192, 32768, 100000) for c in (512, 2048, 4096)]
SERVING_CELLS = [dict(name="serving", dtype=torch.bfloat16, hd=128, hq=32, hkv=8, batch=8, prefix=p, chunk=2048,
                      page=16) for p in (0, 32768)]


def cell_flops(c):
    keys = c["chunk"] * c["prefix"] + c["chunk"] * (c["chunk"] + 1) // 2  # Σ_i (prefix + i + 1)
    return 4.0 * c["hd"] * c["hq"] * c["batch"] * keys


def cell_bytes(c):
    e = torch.finfo(c["dtype"]).bits // 8
    kv = 2 * c["batch"] * (c["prefix"] + c["chunk"]) * c["hkv"] * c["hd"] * e
    qo = 2 * c["batch"] * c["chunk"] * c["hq"] * c["hd"] * e
    return kv + qo


def make_cell(c, gen):
    """Tensors of one cell: q/k/v of the chunk, the whole K/V contiguous (dense), and the same
    K/V scattered into a randomly ordered paged cache in both layouts."""
    dev, dt, d, hkv, hq, P = "cuda", c["dtype"], c["hd"], c["hkv"], c["hq"], c["page"]
    b, sq, pre = c["batch"], c["chunk"], c["prefix"]
    sk = pre + sq
    q = torch.randn(b * sq, hq, d, device=dev, dtype=dt, generator=gen)
    kfull = torch.randn(b, sk, hkv, d, device=dev, dtype=dt, generator=gen)
    vfull = torch.randn(b, sk, hkv, d, device=dev, dtype=dt, generator=gen)
    blocks = (sk + P - 1) // P
    order = list(range(b * blocks))
    random.Random(1).shuffle(order)
    table = torch.tensor(order, dtype=torch.int32, device=dev).view(b, blocks)
    pad = blocks * P - sk
    kp = torch.nn.functional.pad(kfull, (0, 0, 0, 0, 0, pad)).view(b * blocks, P, hkv, d)
    vp = torch.nn.functional.pad(vfull, (0, 0, 0, 0, 0, pad)).view(b * blocks, P, hkv, d)
    k_nhd, v_nhd = torch.empty_like(kp), torch.empty_like(vp)
    k_nhd[table.view(-1).long()] = kp  # physical page table[s, i] holds logical page i of sequence s
    v_nhd[table.view(-1).long()] = vp
    x = 16 // (torch.finfo(dt).bits // 8)
    k_vllm = k_nhd.view(b * blocks, P, hkv, d // x, x).permute(0, 2, 3, 1, 4).contiguous()
    v_vllm = v_nhd.permute(0, 2, 3, 1).contiguous()
    cu_q = torch.arange(0, (b + 1) * sq, sq, dtype=torch.int32, device=dev)
    cu_k = torch.arange(0, (b + 1) * sk, sk, dtype=torch.int32, device=dev)
    seqused = torch.full((b,), sk, dtype=torch.int32, device=dev)
    ctx = torch.full((b,), pre, dtype=torch.int32, device=dev)
    kchunk = kfull[:, pre:].reshape(b * sq, hkv, d).contiguous()
    vchunk = vfull[:, pre:].reshape(b * sq, hkv, d).contiguous()
    return dict(q=q, k=kfull.reshape(b * sk, hkv, d), v=vfull.reshape(b * sk, hkv, d), table=table,
                k_nhd=k_nhd, v_nhd=v_nhd, k_vllm=k_vllm, v_vllm=v_vllm, cu_q=cu_q, cu_k=cu_k,
                seqused=seqused, ctx=ctx, kchunk=kchunk, vchunk=vchunk, sq=sq, sk=sk)


def runners(c, t):
    F = muh.ops.flash_attn_varlen_func
    out_n, out_v, out_1 = torch.empty_like(t["q"]), torch.empty_like(t["q"]), torch.empty_like(t["q"])

    def dense():
        F(t["q"], t["k"], t["v"], t["cu_q"], t["cu_k"], t["sq"], t["sk"], causal=True)

    def paged_nhd():
        F(t["q"], t["k_nhd"], t["v_nhd"], t["cu_q"], None, t["sq"], t["sk"], causal=True, block_table=t["table"],
          seqused_k=t["seqused"], out=out_n)

    def paged_vllm():
        torch.ops.muh.context_attention_fwd(t["q"], t["kchunk"], t["vchunk"], out_v, "auto", t["k_vllm"], t["v_vllm"],
                                            t["table"], t["cu_q"], t["seqused"], t["ctx"], t["sq"])

    def paged_vllm1():
        F(t["q"], t["k_vllm"], t["v_vllm"], t["cu_q"], None, t["sq"], t["sk"], causal=True, block_table=t["table"],
          seqused_k=t["seqused"], out=out_1)

    return dict(dense=dense, paged_nhd=paged_nhd, paged_vllm=paged_vllm, paged_vllm1=paged_vllm1), (out_n, out_v, out_1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--tag", default="h200-" + datetime.date.today().isoformat())
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="the seed's 4/1 cells at 8k and 32k only")
    ap.add_argument("--serving", action="store_true",
                    help="the serving cells only (with --quick: the quick seed cells, then the serving cells)")
    ap.add_argument("--mixed", action="store_true", help="the mixed-batch cells (bench/mixed_batch.py)")
    ap.add_argument("--lib", default=os.environ.get("MUH_LIB", ""), help="libmuh.so for --mixed (C ABI)")
    ap.add_argument("--flashinfer", action="store_true", help="add FlashInfer's paged prefill (flashinfer_peer.py)")
    ap.add_argument("--fi-backends", default="fa2,fa3", help="FlashInfer backends for --flashinfer")
    ap.add_argument("--ncu", default="", metavar="NAME:PREFIX:CHUNK", help="one cell's arms once each, for ncu")
    args = ap.parse_args()
    if args.ncu:
        name, prefix, chunk = args.ncu.split(":")
        pick = [c for c in SEED_CELLS + SERVING_CELLS
                if c["name"] == name and c["prefix"] == int(prefix) and c["chunk"] == int(chunk) and c["hq"] in (4, 32)]
        if not pick:
            sys.exit(f"--ncu {args.ncu}: no such cell")
        t = make_cell(pick[0], torch.Generator(device="cuda").manual_seed(0))
        for arm, f in runners(pick[0], t)[0].items():
            f()
            f()
            torch.cuda.synchronize()
            print("arm", arm, flush=True)
            torch.cuda.profiler.start()
            f()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        return
    if args.iters < 30:
        sys.exit("--iters must be >= 30")
    os.makedirs(args.out, exist_ok=True)
    if args.mixed:
        if not args.lib:
            sys.exit("--mixed needs --lib <build>/libmuh.so")
        import mixed_batch
        mixed_batch.run(args)
        return
    cells = SEED_CELLS + SERVING_CELLS
    if args.quick or args.serving:
        cells = [c for c in SEED_CELLS if c["hq"] == 4 and c["prefix"] in (8192, 32768)] if args.quick else []
        cells += SERVING_CELLS if args.serving else []
    fi_backends = [b for b in args.fi_backends.split(",") if b] if args.flashinfer else []
    if fi_backends:
        import flashinfer_peer as fp
        fp.require()  # FlashInferUnavailable says how to get it
        fp.prebuild(sorted({("prefill", b, c["dtype"], c["dtype"], c["hd"]) for c in cells for b in fi_backends},
                           key=str))
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    print("clocks before:", clocks(), flush=True)
    rows = []
    base = os.path.join(args.out, f"paged-prefill-{args.tag}")
    hdr = f"{'cell':8} {'hq/hkv':6} {'b':>2} {'prefix':>7} {'chunk':>5}  {'dense us':>9} {'nhd us':>9} {'vllm us':>9}  " \
          f"{'nhd/dense':>9} {'vllm/dense':>10} {'vllm1 us':>9} {'vllm1/dense':>11} {'TFLOP/s':>8} {'err':>8}"
    print(hdr)
    for c in cells:
        t = make_cell(c, gen)
        fns, outs = runners(c, t)
        peers = {f"fi_{b}": fp.paged_prefill(t["q"], t["k_nhd"], t["v_nhd"], t["table"], t["cu_q"], t["seqused"],
                                             backend=b) for b in fi_backends}
        fns.update(peers)
        ref = muh.ops.flash_attn_varlen_func(t["q"], t["k"], t["v"], t["cu_q"], t["cu_k"], t["sq"], t["sk"],
                                             causal=True)
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        err = max((o.float() - ref.float()).abs().max().item() for o in outs)
        fi_err = {n: (p.out.float() - ref.float()).abs().max().item() for n, p in peers.items()}
        names = list(fns)
        ms = interleaved_ms([fns[n] for n in names], args.iters, before=lambda: flush.zero_())
        us = {n: m * 1e3 for n, m in zip(names, ms)}
        row = dict(cell=c["name"], dtype=str(c["dtype"]).split(".")[-1], head_dim=c["hd"], q_heads=c["hq"],
                   kv_heads=c["hkv"], batch=c["batch"], prefix=c["prefix"], chunk=c["chunk"], page=c["page"],
                   dense_us=us["dense"], paged_nhd_us=us["paged_nhd"], paged_vllm_us=us["paged_vllm"],
                   paged_vllm1_us=us["paged_vllm1"], nhd_over_dense=us["dense"] / us["paged_nhd"],
                   vllm_over_dense=us["dense"] / us["paged_vllm"], vllm1_over_dense=us["dense"] / us["paged_vllm1"],
                   tflops_paged_nhd=cell_flops(c) / us["paged_nhd"] / 1e6, bytes=cell_bytes(c), max_abs_err=err)
        for n in peers:
            row.update({f"{n}_us": us[n], f"nhd_over_{n}": us[n] / us["paged_nhd"], f"{n}_max_abs_err": fi_err[n]})
        rows.append(row)
        with open(base + ".csv", "w", newline="") as f:  # after every cell: a run stopped early keeps its rows
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        print(f"{c['name']:8} {c['hq']}/{c['hkv']:<4} {c['batch']:>2} {c['prefix']:>7} {c['chunk']:>5}  "
              f"{us['dense']:9.1f} {us['paged_nhd']:9.1f} {us['paged_vllm']:9.1f}  "
              f"{row['nhd_over_dense']:9.3f} {row['vllm_over_dense']:10.3f} {us['paged_vllm1']:9.1f} "
              f"{row['vllm1_over_dense']:11.3f} {row['tflops_paged_nhd']:8.1f} {err:8.2e}"
              + "".join(f"  {n} {us[n]:.1f} us x{row[f'nhd_over_{n}']:.3f} (err {fi_err[n]:.1e})" for n in peers),
              flush=True)
        del t
    print("clocks after:", clocks())
    with open(base + ".json", "w") as f:
        json.dump(dict(tag=args.tag, iters=args.iters, rows=rows), f, indent=1)
    print("wrote", base + ".csv")


if __name__ == "__main__":
    main()
