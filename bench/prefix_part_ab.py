"""prefix_part_ab.py — context_attention_fwd's prefix part (a paged prefill, non-causal: every new
token sees the whole cached prefix) forced onto each agent of sm_90, through muh's C ABI, side by
side in one process (interleaved, cold L2, median of --iters): where the plan's choice between the
Hopper agent's whole q tiles and the sm80 agent's key split (src/prefill_plan.cpp,
prefer_key_split) stands against both measured.
  auto  the plan (-1)     t91  sm_90a forced: every q tile whole (no key split)
  t90   sm_90's row forced: the sm80 agent, its key split where the plan takes one
Cells: issue 17's seed cells (fp16, hd 256, 4 q / 1 kv head, prefix 8k / 32k × chunk 512 / 2048 /
4096) and the serving 32k cell (bf16, hd 128, 32 / 8 heads, 8 × 2048), page 16 (--page), vLLM pages and
NHD pages with the same keys.

  python3 bench/prefix_part_ab.py --lib <build>/libmuh.so [--iters 30] [--only PREFIX:CHUNK,...]
      [--targets=-1,91,90] [--page 16]   (a list that starts with -1 needs the =)

--iters 0 times nothing: each (layout, target) runs once — for ncu, e.g. the sm80 agent's key
split on NHD and on vLLM pages of the 8k + 512 cell:
  ncu --kernel-name regex:prefill_sm80_paged_tail_kernel python3 bench/prefix_part_ab.py --lib ... \
      --only 8192:512 --targets 90 --iters 0
"""
import argparse
import os
import sys

import ctypes

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import muh_capi as capi  # noqa: E402
from compare_torch import interleaved_ms  # noqa: E402

CELLS = [(torch.float16, 256, 4, 1, 1, p, c) for p in (8192, 32768) for c in (512, 2048, 4096)] + \
        [(torch.bfloat16, 128, 32, 8, 8, 32768, 2048)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=30, help="timed calls a median (0: one call each, untimed)")
    ap.add_argument("--only", default="", help="PREFIX:CHUNK cells, comma-separated (default: all)")
    ap.add_argument("--targets", default="-1,91,90", help="forced targets, comma-separated (-1: the plan)")
    ap.add_argument("--page", type=int, default=16, help="page size in slots (the seed's: 16)")
    args = ap.parse_args()
    page = args.page
    targets = [int(t) for t in args.targets.split(",")]
    only = {tuple(int(x) for x in c.split(":")) for c in args.only.split(",") if c}
    lib = capi.load(args.lib)
    E = capi.ENUMS
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    name = {-1: "auto", 91: "t91", 90: "t90"}
    print(f"{'dtype':8} {'hd':>3} {'hq/hkv':6} {'b':>2} {'prefix':>6} {'chunk':>5} {'layout':6} " +
          " ".join(f"{name.get(t, f't{t}') + ' us':>9}" for t in targets) +
          ("  t90/t91 auto is" if targets == [-1, 91, 90] else ""))
    for dt, hd, hq, hkv, b, prefix, chunk in CELLS:
        if only and (prefix, chunk) not in only:
            continue
        dtype = E["MUH_FP16"] if dt == torch.float16 else E["MUH_BF16"]
        blocks = (prefix + page - 1) // page
        pages = b * blocks
        gen = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(b * chunk, hq, hd, device="cuda", dtype=dt, generator=gen)
        out = torch.empty_like(q)
        perm = torch.randperm(pages, generator=torch.Generator().manual_seed(1)).to(torch.int32).cuda()
        table = perm.view(b, blocks).contiguous()
        cu_q = torch.arange(0, (b + 1) * chunk, chunk, dtype=torch.int32, device="cuda")
        used = torch.full((b,), prefix, dtype=torch.int32, device="cuda")
        x = 16 // (torch.finfo(dt).bits // 8)
        caches = {"nhd": (torch.randn(pages, page, hkv, hd, device="cuda", dtype=dt, generator=gen),
                          torch.randn(pages, page, hkv, hd, device="cuda", dtype=dt, generator=gen))}
        kn, vn = caches["nhd"]
        caches["vllm"] = (kn.view(pages, page, hkv, hd // x, x).permute(0, 2, 3, 1, 4).contiguous(),
                          vn.permute(0, 2, 3, 1).contiguous())
        for layout, (kc, vc) in caches.items():
            lay = E["MUH_KV_NHD"] if layout == "nhd" else E["MUH_KV_VLLM"]
            fns = []
            for target in targets:
                nbytes = ctypes.c_size_t(0)
                capi.check(lib, lib.muh_paged_prefill_workspace_size(
                    dtype, lay, b, b * chunk, chunk, prefix, hq, hkv, hd, page, pages, blocks, 0, target, stream,
                    ctypes.byref(nbytes)), "muh_paged_prefill_workspace_size")
                ws = torch.empty(max(nbytes.value, 1), dtype=torch.uint8, device="cuda")

                def run(target=target, ws=ws, n=nbytes.value, kc=kc, vc=vc, lay=lay):
                    capi.check(lib, lib.muh_paged_prefill(
                        dtype, lay, q.data_ptr(), kc.data_ptr(), vc.data_ptr(), out.data_ptr(), None, cu_q.data_ptr(),
                        table.data_ptr(), used.data_ptr(), b, b * chunk, chunk, prefix, hq, hkv, hd, page, pages,
                        blocks, 0.0, 0, ws.data_ptr() if n else None, n, target, 0, stream), "muh_paged_prefill")
                fns.append(run)
            outs = []
            for f in fns:
                f()
                torch.cuda.synchronize()
                outs.append(out.clone())
            diff = max([(o.float() - outs[0].float()).abs().max().item() for o in outs[1:]], default=0.0)
            head = f"{str(dt).split('.')[-1]:8} {hd:3} {hq}/{hkv:<4} {b:2} {prefix:6} {chunk:5} {layout:6}"
            if args.iters <= 0:
                print(f"{head} ran once each (max |diff| {diff:.1e})", flush=True)
                continue
            us = [m * 1e3 for m in interleaved_ms(fns, args.iters, before=lambda: flush.zero_())]
            tail = ""
            if targets == [-1, 91, 90]:
                a, t91, t90 = us
                tail = f"  {t90 / t91:7.3f} {'t91' if abs(a - t91) < abs(a - t90) else 't90':>7}"
            print(f"{head} " + " ".join(f"{u:9.1f}" for u in us) + f"{tail}  (max |diff| {diff:.1e})", flush=True)


if __name__ == "__main__":
    main()
