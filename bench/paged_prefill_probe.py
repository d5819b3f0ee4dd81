"""paged_prefill_probe.py — where paged prefill loses against muh's dense prefill (issue 17): one
seed cell (fp16, hd 256, 4 q / 1 kv head, one sequence, prefix 8192, chunk 2048, causal) timed
side by side, interleaved, cold L2, median of 30:
  dense        contiguous k/v (flash_attn_varlen_func)
  nhd_random   the same K/V in a paged NHD cache, pages in random order (paged_prefill.py's cells)
  nhd_inorder  the same cache with the identity block table (page i of the sequence = page i)
  nhd_p64      random order, 64-token pages
If in-order pages run as fast as dense, the loss is the memory system's (where the pages lie),
not the kernel's instructions. --ncu: each arm once after a warm-up (for `ncu -k regex:prefill`).

  PYTHONPATH=<build>/python python3 bench/paged_prefill_probe.py [--ncu]
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


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    pre, sq, hq, hkv, d = 8192, 2048, 4, 1, 256
    sk = pre + sq
    q = torch.randn(sq, hq, d, device="cuda", dtype=torch.float16, generator=g)
    k = torch.randn(sk, hkv, d, device="cuda", dtype=torch.float16, generator=g)
    v = torch.randn(sk, hkv, d, device="cuda", dtype=torch.float16, generator=g)
    cu_q = torch.tensor([0, sq], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, sk], dtype=torch.int32, device="cuda")
    used = torch.tensor([sk], dtype=torch.int32, device="cuda")
    out = torch.empty_like(q)
    arms = {"dense": lambda: F(q, k, v, cu_q, cu_k, sq, sk, causal=True, out=out)}
    for name, page, shuffle in (("nhd_random", 16, True), ("nhd_inorder", 16, False), ("nhd_p64", 64, True)):
        kc, vc, table = paged(k, v, page, shuffle)
        arms[name] = (lambda kc=kc, vc=vc, table=table:
                      F(q, kc, vc, cu_q, None, sq, sk, causal=True, block_table=table, seqused_k=used, out=out))
    ref = F(q, k, v, cu_q, cu_k, sq, sk, causal=True).clone()
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
