"""paged_prefill_probe.py — where paged prefill loses against muh's dense prefill (issue 17): one
cell timed side by side, interleaved, cold L2, median of 30:
  dense        contiguous k/v (flash_attn_varlen_func)
  nhd_random   the same K/V in a paged NHD cache, pages in random order (paged_prefill.py's cells)
  nhd_inorder  the same cache with the identity block table (page i of the sequence = page i)
  nhd_p64      random order, 64-token pages
  nhd_p128     random order, 128-token pages (--cell serving*: the sm90 agent's key tile, so one
               TMA box a tile and panel, as dense K/V)
(Session 13's A/B of the sm90 agent's producer forms ran each paged arm twice, with an
environment knob since removed: bench/results/2026-12-07-sm90-paged-probe.)
If in-order pages run as fast as dense, the loss is the memory system's (where the pages lie),
not the kernel's instructions; if 128-token pages do, it is the count of boxes a key tile.
Cells (--cell): seed (default; fp16, hd 256, 4 q / 1 kv head, one sequence, prefix 8192, chunk
2048, causal: the sm80 agent's), serving0 / serving32k (bf16, hd 128, 32 q / 8 kv heads, 8
sequences of 2048 new tokens over a 0 / 32k prefix, causal: the sm90 agent's; issue 17's serving
cells). --ncu: each arm once after a warm-up (for `ncu -k regex:prefill`).

  PYTHONPATH=<build>/python python3 bench/paged_prefill_probe.py [--cell C] [--ncu]
"""
import os
import random
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_torch import interleaved_ms  # noqa: E402

import muh.ops  # noqa: E402

F = muh.ops.flash_attn_varlen_func


def paged(kfull, vfull, page, shuffle):
    sk, hkv, d = kfull.shape
    blocks = (sk + page - 1) // page
    order = list(range(blocks))
    if shuffle:
        random.Random(1).shuffle(order)
    table = torch.tensor(order, dtype=torch.int32, device="cuda").view(1, blocks)
    pad = blocks * page - sk
    kp = torch.nn.functional.pad(kfull, (0, 0, 0, 0, 0, pad)).view(blocks, page, hkv, d)
    vp = torch.nn.functional.pad(vfull, (0, 0, 0, 0, 0, pad)).view(blocks, page, hkv, d)
    kc, vc = torch.empty_like(kp), torch.empty_like(vp)
    kc[table.view(-1).long()] = kp
    vc[table.view(-1).long()] = vp
    return kc, vc, table


CELLS = {  # dtype, batch, prefix, chunk, q heads, kv heads, head dim
    "seed": (torch.float16, 1, 8192, 2048, 4, 1, 256),
    "serving0": (torch.bfloat16, 8, 0, 2048, 32, 8, 128),
    "serving32k": (torch.bfloat16, 8, 32768, 2048, 32, 8, 128),
}


def paged_batch(k, v, b, page, shuffle):
    """b sequences' K/V (each [sk, hkv, d] of k/v viewed [b, sk, ...]) in one paged cache."""
    parts = [paged(k[i], v[i], page, False) for i in range(b)]
    blocks = parts[0][2].shape[1]
    order = list(range(b * blocks))
    if shuffle:
        random.Random(1).shuffle(order)
    table = torch.tensor(order, dtype=torch.int32, device="cuda").view(b, blocks)
    kc = torch.empty((b * blocks,) + parts[0][0].shape[1:], dtype=k.dtype, device="cuda")
    vc = torch.empty_like(kc)
    for i, (kp, vp, _) in enumerate(parts):
        kc[table[i].long()] = kp
        vc[table[i].long()] = vp
    return kc, vc, table


def main():
    cell = sys.argv[sys.argv.index("--cell") + 1] if "--cell" in sys.argv else "seed"
    dt, b, pre, sq, hq, hkv, d = CELLS[cell]
    g = torch.Generator(device="cuda").manual_seed(0)
    sk = pre + sq
    q = torch.randn(b * sq, hq, d, device="cuda", dtype=dt, generator=g)
    k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt, generator=g)
    v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt, generator=g)
    cu_q = torch.arange(0, b + 1, dtype=torch.int32, device="cuda") * sq
    cu_k = torch.arange(0, b + 1, dtype=torch.int32, device="cuda") * sk
    used = torch.full((b,), sk, dtype=torch.int32, device="cuda")
    out = torch.empty_like(q)
    kd, vd = k.view(b * sk, hkv, d), v.view(b * sk, hkv, d)
    arms = {"dense": lambda: F(q, kd, vd, cu_q, cu_k, sq, sk, causal=True, out=out)}
    shapes = [("nhd_random", 16, True), ("nhd_inorder", 16, False), ("nhd_p64", 64, True)]
    if cell != "seed":
        shapes.append(("nhd_p128", 128, True))
    for name, page, shuffle in shapes:
        kc, vc, table = paged_batch(k, v, b, page, shuffle)
        arms[name] = (lambda kc=kc, vc=vc, table=table:
                      F(q, kc, vc, cu_q, None, sq, sk, causal=True, block_table=table, seqused_k=used, out=out))
    ref = F(q, kd, vd, cu_q, cu_k, sq, sk, causal=True).clone()
    for name, fn in arms.items():
        fn()
        torch.cuda.synchronize()
        print(f"{name:12} max |out - dense| {(out.float() - ref.float()).abs().max().item():.2e}"
              f"  bitwise {torch.equal(out, ref)}")
    if "--ncu" in sys.argv:
        for fn in arms.values():
            fn()
        torch.cuda.synchronize()
        return
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    ms = interleaved_ms(list(arms.values()), 30, before=lambda: flush.zero_())
    for name, m in zip(arms, ms):
        print(f"{name:12} {m * 1e3:9.1f} us  dense/this {ms[0] / m:6.3f}")


if __name__ == "__main__":
    main()
