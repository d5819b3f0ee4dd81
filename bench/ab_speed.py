#!/usr/bin/env python3
"""ab_speed.py — base against new libmuh.so, timed interleaved call by call in one process.

usage: python3 bench/ab_speed.py --base BASE/libmuh.so --new NEW/libmuh.so --out DIR
                                 [--rounds 3] [--no-noise] [--quick]

Issue 16's speed half: every cell of new within run-to-run noise of base, both measured in the
same call. Both libraries load into one process (ab_common.load_lib: RTLD_LOCAL, each binds to
itself), and so does a copy of base from another path ("base2", unless --no-noise): base2 / base
is the noise of the method on the same machine in the same minute.
  prefill: compare_torch.py's grid — bf16, hd 128 x 32 heads and hd 256 x 16 heads, seq 1k / 4k /
    16k with 16384 tokens per batch, causal and not — each library with the workspace it asks for
    (compare_torch.muh_prefill_fn); medians of 20 calls after 5 warm-ups (compare_torch.interleaved_ms).
  decode: bf16, page 16, NHD (separate K and V tensors), hd 128 x 32 q / 8 kv heads and hd 256 x
    16 / 4, batch {1, 16, 64} x kv_len {2048, 32768}, every sequence kv_len long, each cell's
    pages a random permutation of its own; the plan's split count (force_splits 0, no lse); a
    256 MB buffer is overwritten before every timed call, untimed (cold L2, as `muh bench decode`
    does); medians of 30 calls after 3 warm-ups.
Each of --rounds rounds times the libraries interleaved (b, n, b2, b, n, b2, ...), the order
rotated each round so that each library takes every place in the cycle once over three rounds;
a cell's figure is the median of its round medians, and new / base the median of the round
ratios. The outputs of base and new at each cell are compared bitwise as well (same_bits).
--quick: seq 4096 and batch {1, 64} x 32768 only, 2 rounds.

Prints one line per cell and the largest deviations; writes DIR/ab-speed.json.
"""
import argparse
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab_common as ab  # noqa: E402

PREFILL_CONFIGS = [(128, 32), (256, 16)]
TOKENS = 16384
PREFILL_SEQS, QUICK_PREFILL_SEQS = [1024, 4096, 16384], [4096]
DECODE_CONFIGS = [(128, 32, 8), (256, 16, 4)]
DECODE_BATCHES, DECODE_LENS = [1, 16, 64], [2048, 32768]
QUICK_DECODE_BATCHES, QUICK_DECODE_LENS = [1, 64], [32768]
PAGE = 16
FLUSH_BYTES = 256 << 20


def rotated(names, r):
    k = r % len(names)
    return names[k:] + names[:k]


def rounds_ms(fns, rounds, timer):
    """{name: [median ms of each round]}: `timer(list of fns)` per round, the order rotated."""
    names = list(fns)
    per = {n: [] for n in names}
    for r in range(rounds):
        order = rotated(names, r)
        for n, ms in zip(order, timer([fns[n] for n in order])):
            per[n].append(ms)
    return per


def cell_summary(per):
    """A cell's figures from its round medians."""
    s = dict(base_ms=statistics.median(per["base"]), new_ms=statistics.median(per["new"]),
             rounds_base_ms=per["base"], rounds_new_ms=per["new"])
    ratios = [n / b for n, b in zip(per["new"], per["base"])]
    s.update(new_over_base=statistics.median(ratios), new_over_base_min=min(ratios), new_over_base_max=max(ratios))
    if "base2" in per:
        noise = [b2 / b for b2, b in zip(per["base2"], per["base"])]
        s.update(base2_ms=statistics.median(per["base2"]), rounds_base2_ms=per["base2"],
                 base2_over_base=statistics.median(noise))
    return s


def prefill_grid(torch, ct, libs, args, stream):
    cells = []
    seqs = QUICK_PREFILL_SEQS if args.quick else PREFILL_SEQS
    for hd, heads in PREFILL_CONFIGS:
        q = torch.randn(TOKENS, heads, hd, device="cuda", dtype=torch.bfloat16)
        k, v = torch.randn_like(q), torch.randn_like(q)
        outs = {n: torch.empty_like(q) for n in libs}
        for seq in seqs:
            batch = TOKENS // seq
            cu = (torch.arange(batch + 1, device="cuda", dtype=torch.int32) * seq).contiguous()
            for causal in (False, True):
                fns, ws = {}, {}
                for n, lib in libs.items():
                    fns[n], ws[n] = ct.muh_prefill_fn(lib, q, k, v, outs[n], cu, batch, seq, causal, stream)
                per = rounds_ms(fns, args.rounds, lambda f: ct.interleaved_ms(f, args.iters_prefill))
                fns["base"]()
                fns["new"]()
                torch.cuda.synchronize()
                c = dict(family="prefill", head_dim=hd, heads=heads, seq_len=seq, batch=batch, causal=causal,
                         workspace_bytes={n: ws[n] for n in libs}, same_bits=_same_bits(torch, outs),
                         **cell_summary(per))
                c["name"] = f"prefill hd{hd} h{heads} seq {seq} b{batch} {'causal' if causal else 'non-causal'}"
                cells.append(c)
                _print_cell(c)
        del q, k, v, outs
    return cells


def decode_grid(torch, ct, libs, args, stream):
    cells = []
    batches, lens = (QUICK_DECODE_BATCHES, QUICK_DECODE_LENS) if args.quick else (DECODE_BATCHES, DECODE_LENS)
    flush_buf = torch.empty(FLUSH_BYTES, device="cuda", dtype=torch.uint8)
    tick = [0]

    def flush():
        tick[0] += 1
        flush_buf.fill_(tick[0] & 0xFF)

    for hd, hq, hkv in DECODE_CONFIGS:
        max_pages = max(batches) * max(lens) // PAGE
        kc = torch.randn(max_pages, PAGE, hkv, hd, device="cuda", dtype=torch.bfloat16)
        vc = torch.randn_like(kc)
        for batch in batches:
            for kv_len in lens:
                g = torch.Generator(device="cuda")
                g.manual_seed(batch * 100003 + kv_len)
                n = batch * kv_len // PAGE
                table = torch.randperm(n, device="cuda", generator=g).to(torch.int32).view(batch, kv_len // PAGE)
                seq_lens = torch.full((batch,), kv_len, device="cuda", dtype=torch.int32)
                q = torch.randn(batch, hq, hd, device="cuda", dtype=torch.bfloat16)
                outs = {name: torch.empty_like(q) for name in libs}
                fns, ws_bytes = {}, {}
                for name, lib in libs.items():
                    rc, nbytes, msg = ab.decode_workspace(lib, "bf16", "nhd", batch, hq, hkv, hd, PAGE, kv_len, -1, 0)
                    if rc != 0:
                        raise RuntimeError(f"{name}: muh_decode_workspace_size: {ab.status_name(rc)}: {msg}")
                    ws_bytes[name] = nbytes
                    fns[name] = _decode_fn(torch, lib, name, q, kc, vc, outs[name], table, seq_lens, hkv, n, kv_len,
                                           nbytes, stream)
                per = rounds_ms(fns, args.rounds, lambda f: ct.interleaved_ms(f, args.iters_decode, warmup=3, before=flush))
                fns["base"]()
                fns["new"]()
                torch.cuda.synchronize()
                part = batch * hq * (hd + 1) * 4  # V2 partials per split: o and lse of every q head, fp32
                c = dict(family="decode", head_dim=hd, q_heads=hq, kv_heads=hkv, batch=batch, kv_len=kv_len,
                         workspace_bytes=ws_bytes, splits={k: max(1, b // part) for k, b in ws_bytes.items()},
                         same_bits=_same_bits(torch, outs), **cell_summary(per))
                c["name"] = f"decode hd{hd} {hq}q/{hkv}kv b{batch} kv{kv_len}"
                cells.append(c)
                _print_cell(c)
        del kc, vc
    return cells


def _decode_fn(torch, lib, name, q, kc, vc, out, table, seq_lens, hkv, num_pages, kv_len, ws_bytes, stream):
    ws = torch.empty(max(ws_bytes, 1), device="cuda", dtype=torch.uint8)
    batch, hq, hd = q.shape

    def run():
        rc = lib.muh_paged_decode(ab.DTYPES["bf16"], ab.LAYOUTS["nhd"], q.data_ptr(), kc.data_ptr(), vc.data_ptr(),
                                  out.data_ptr(), None, table.data_ptr(), seq_lens.data_ptr(), batch, hq, hkv, hd, PAGE,
                                  num_pages, kv_len // PAGE, kv_len, 0.0, ws.data_ptr() if ws_bytes else None,
                                  ws_bytes, -1, 0, 0, stream)
        if rc != 0:
            raise RuntimeError(f"{name}: muh_paged_decode: {ab.status_name(rc)}: {ab.last_error(lib, rc)}")

    return run


def _same_bits(torch, outs):
    return bool(torch.equal(outs["base"].view(torch.int16), outs["new"].view(torch.int16)))


def _print_cell(c):
    ws = c["workspace_bytes"]
    line = (f"{c['name']}: base {c['base_ms']:.4f} ms, new {c['new_ms']:.4f} ms, new/base {c['new_over_base']:.4f} "
            f"[{c['new_over_base_min']:.4f}..{c['new_over_base_max']:.4f}]")
    if "base2_over_base" in c:
        line += f", base2/base {c['base2_over_base']:.4f}"
    line += f"; workspace {ws['base']} / {ws['new']} B"
    if ws["base"] != ws["new"]:
        line += " (PLAN DIFFERS)"
    if "splits" in c:
        line += f", splits {c['splits']['base']} / {c['splits']['new']}"
    line += "" if c["same_bits"] else "; OUTPUT BITS DIFFER"
    print(line, flush=True)


def extremes(cells):
    """The summary lines: the largest |new/base - 1| and |base2/base - 1| of each family."""
    lines = []
    for fam in ("prefill", "decode"):
        mine = [c for c in cells if c["family"] == fam]
        if not mine:
            continue
        w = max(mine, key=lambda c: abs(c["new_over_base"] - 1))
        line = (f"{fam}: largest deviation new/base {w['new_over_base']:.4f} ({100 * (w['new_over_base'] - 1):+.2f} %) "
                f"at {w['name']}")
        noisy = [c for c in mine if "base2_over_base" in c]
        if noisy:
            n = max(noisy, key=lambda c: abs(c["base2_over_base"] - 1))
            line += (f"; noise, base2/base: largest {n['base2_over_base']:.4f} "
                     f"({100 * (n['base2_over_base'] - 1):+.2f} %) at {n['name']}")
        bad = [c["name"] for c in mine if not c["same_bits"] or c["workspace_bytes"]["base"] != c["workspace_bytes"]["new"]]
        if bad:
            line += f"; plan or output bits differ at: {', '.join(bad)}"
        lines.append(line)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the base build's libmuh.so")
    ap.add_argument("--new", required=True, help="the new build's libmuh.so")
    ap.add_argument("--out", required=True, help="directory for ab-speed.json")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds per cell (default 3; --quick 2)")
    ap.add_argument("--iters-prefill", type=int, default=20, help="timed calls per round and library (>= 20)")
    ap.add_argument("--iters-decode", type=int, default=30, help="timed calls per round and library (>= 30)")
    ap.add_argument("--no-noise", action="store_true", help="skip the base copy (base2)")
    ap.add_argument("--no-prefill", action="store_true")
    ap.add_argument("--no-decode", action="store_true")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.iters_prefill < 20 or args.iters_decode < 30:
        ap.error("--iters-prefill must be >= 20 and --iters-decode >= 30")
    args.rounds = args.rounds or (2 if args.quick else 3)
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    for name in ("base", "new"):
        if not os.path.isfile(getattr(args, name)):
            ap.error(f"--{name} {getattr(args, name)}: no such file")
    if os.path.samefile(args.base, args.new):
        ap.error("--base and --new are the same file (one library loaded twice is one handle)")
    try:
        import torch
    except ImportError as e:
        sys.exit(f"ab_speed: cannot import torch ({e}); run it with a Python that has torch with CUDA")
    if not torch.cuda.is_available():
        sys.exit("ab_speed: no CUDA device visible to torch")
    import compare_torch as ct
    libs = {"base": ab.load_lib(args.base), "new": ab.load_lib(args.new)}
    if not args.no_noise:
        libs["base2"] = ab.load_lib(ab.copy_lib(args.base))
    stream = torch.cuda.current_stream().cuda_stream
    dev = torch.cuda.get_device_name()
    clocks_before = ct.clocks()
    print(f"ab_speed: {dev}; {', '.join(libs)}; {args.rounds} rounds; {clocks_before}", flush=True)
    cells = []
    if not args.no_prefill:
        cells += prefill_grid(torch, ct, libs, args, stream)
    if not args.no_decode:
        cells += decode_grid(torch, ct, libs, args, stream)
    lines = extremes(cells)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "ab-speed.json")
    with open(path, "w") as fh:
        json.dump(dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), device=dev,
                       torch=torch.__version__, clocks_before=clocks_before, clocks_after=ct.clocks(),
                       base=libs["base"].ab_path, new=libs["new"].ab_path, rounds=args.rounds,
                       iters_prefill=args.iters_prefill, iters_decode=args.iters_decode,
                       method="interleaved in one process, order rotated per round; median of round medians; "
                              "decode after a 256 MB overwrite per call (untimed)",
                       summary=lines, cells=cells), fh, indent=1)
    print("\n".join(lines))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
