#!/usr/bin/env python3
"""prefill_targets.py — muh prefill TFLOP/s per forced dispatch target, fp16, through the C ABI.

`muh bench prefill` times bf16 with the device's own policy; this times fp16 (the dtype the sm75
agent runs) with each target of --targets forced (75: the sm75 agent by emulation on a newer GPU,
80/90: the sm80 agent, 0: the portable agent), on the same torch tensors, and prints the largest
|difference| of each target's output against the first one. 16384 tokens per batch; hd 128 x 32
heads and hd 256 x 16 heads (MHA); seq 1024 and 4096, causal and not; TFLOP/s = 4*b*h*s*s*d / t,
halved for causal; median of --iters CUDA-event-timed calls after 5 warm-ups.

usage: python3 bench/prefill_targets.py BUILD/libmuh.so [--targets 75,90,0] [--iters 20]
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import muh_capi as capi  # noqa: E402

MUH_FP16 = capi.DTYPES["fp16"]
TOKENS = 16384


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lib")
    ap.add_argument("--targets", default="75,90,0")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    targets = [int(t) for t in args.targets.split(",")]
    lib = capi.load(args.lib)
    print(f"{torch.cuda.get_device_name()} fp16, median of {args.iters}")
    for hd, heads in [(128, 32), (256, 16)]:
        q = torch.randn(TOKENS, heads, hd, device="cuda", dtype=torch.float16)
        k, v = torch.randn_like(q), torch.randn_like(q)
        outs = {t: torch.empty_like(q) for t in targets}
        for seq in [1024, 4096]:
            b = TOKENS // seq
            cu = (torch.arange(b + 1, device="cuda", dtype=torch.int32) * seq).contiguous()
            for causal in [False, True]:
                f = 4.0 * b * heads * seq * seq * hd / (2 if causal else 1)
                line = f"hd{hd} h{heads} seq {seq} b{b} {'causal' if causal else 'non-causal':10s}"
                for t in targets:
                    o = outs[t]

                    def run():
                        rc = lib.muh_prefill(MUH_FP16, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), None,
                                             cu.data_ptr(), cu.data_ptr(), b, TOKENS, TOKENS, seq, seq, heads, heads,
                                             hd, 0.0, int(causal), None, 0, t, None)
                        if rc != 0:
                            raise RuntimeError(lib.muh_last_error().decode())
                    for _ in range(5):
                        run()
                    torch.cuda.synchronize()
                    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                          for _ in range(args.iters)]
                    for s, e in ev:
                        s.record()
                        run()
                        e.record()
                    torch.cuda.synchronize()
                    ms = statistics.median(s.elapsed_time(e) for s, e in ev)
                    line += f" | t{t} {f / (ms * 1e-3) / 1e12:6.1f} TFLOP/s"
                for t in targets[1:]:
                    d = (outs[t].float() - outs[targets[0]].float()).abs().max().item()
                    line += f" | max|t{t}-t{targets[0]}| {d:.2e}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
