#!/usr/bin/env python3
"""prefill_cell.py — one prefill cell of bench/compare_torch.py's grid through muh's C ABI, run
--repeat times (default 1): the process a profiler wraps, e.g.

  ncu --kernel-name regex:prefill_sm90 --section WarpStateStats --section ComputeWorkloadAnalysis \\
      python3 bench/prefill_cell.py --lib build/libmuh.so --hd 128 --heads 32 --seq 4096 --causal

bf16, 16384 tokens (batch = 16384 / seq), q heads --heads, kv heads --kv-heads (default: MHA),
--target forces a dispatch target (-1: the device's walk; 90: sm_90's row; 91: sm_90a)."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_torch import TOKENS, capi, muh_prefill_fn  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=os.path.join(os.path.dirname(__file__), "..", "build", "libmuh.so"))
    ap.add_argument("--hd", type=int, default=128)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--target", type=int, default=-1)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if TOKENS % args.seq:
        sys.exit(f"--seq must divide {TOKENS}")
    lib = capi.load(args.lib)
    kvh = args.kv_heads or args.heads
    q = torch.randn(TOKENS, args.heads, args.hd, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(TOKENS, kvh, args.hd, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out = torch.empty_like(q)
    batch = TOKENS // args.seq
    cu = (torch.arange(batch + 1, device="cuda", dtype=torch.int32) * args.seq).contiguous()
    run, _ = muh_prefill_fn(lib, q, k, v, out, cu, batch, args.seq, args.causal,
                            torch.cuda.current_stream().cuda_stream, args.target)
    for _ in range(args.repeat):
        run()
    torch.cuda.synchronize()
    print(f"ran hd{args.hd} h{args.heads}/{kvh} seq {args.seq} b{batch} {'causal' if args.causal else 'non-causal'} "
          f"x{args.repeat}")


if __name__ == "__main__":
    main()
