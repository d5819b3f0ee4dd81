#!/usr/bin/env python3
"""prefill_waves.py LIBMUH — how much of a prefill cell's figure the last, partly filled wave of CTAs costs.

muh (through libmuh.so's C ABI) and PyTorch SDPA's FlashAttention-2 backend, bf16, non-causal, at
sequence lengths around the issue's 4k and 16k cells — 3968 / 4096 / 4224 (batch 4) and
16256 / 16384 / 16512 (batch 1) — so that the number of 128-row tiles is ~15.0, 15.5 and 16.0
times the resident CTA slots (hd 256 x 16 heads: 1 CTA per SM; hd 128 x 32 heads: 2 per SM on
the H200). Two rounds of (muh with every tile whole, muh with its workspace — the tail split of
muh/prefill_plan.hpp where the plan takes it —, FA2), the three timed interleaved, each the median
of 20 event-timed calls (compare_torch.py's interleaved_ms). Prints TFLOP/s per length.
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_torch as ct  # noqa: E402

BLOCK_M = 128  # the sm90 prefill rows' block_m at head dims 128 and 256


def main():
    lib = ct.capi.load(sys.argv[1])
    stream = torch.cuda.current_stream().cuda_stream
    causal = False
    for hd, heads in [(256, 16), (128, 32)]:
        for seq in [3968, 4096, 4224, 16256, 16384, 16512]:
            batch = 4 if seq < 10000 else 1
            total = batch * seq
            q = torch.randn(total, heads, hd, device="cuda", dtype=torch.bfloat16)
            k = torch.randn_like(q)
            v = torch.randn_like(q)
            out = torch.empty_like(q)
            cu = (torch.arange(batch + 1, device="cuda", dtype=torch.int32) * seq).contiguous()
            qs, ks, vs = (x.view(batch, seq, heads, hd).transpose(1, 2) for x in (q, k, v))
            f = ct.flops(batch, heads, seq, hd, causal)

            run_muh, ws_bytes = ct.muh_prefill_fn(lib, q, k, v, out, cu, batch, seq, causal, stream)

            def run_fa2():
                return F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)

            tflops = []
            for _ in range(2):
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    ms = ct.interleaved_ms([lambda: run_muh(False), lambda: run_muh(True), run_fa2], 20)
                tflops += [f / (x * 1e-3) / 1e12 for x in ms]
            ctas = batch * heads * ((seq + BLOCK_M - 1) // BLOCK_M)
            print(f"hd{hd} seq {seq} b{batch} causal {causal}: CTAs {ctas} muh whole {tflops[0]:.0f}/{tflops[3]:.0f} "
                  f"split {tflops[1]:.0f}/{tflops[4]:.0f} (workspace {ws_bytes} B) "
                  f"FA2 {tflops[2]:.0f}/{tflops[5]:.0f} TFLOP/s", flush=True)
            del q, k, v, out, run_muh


if __name__ == "__main__":
    main()
