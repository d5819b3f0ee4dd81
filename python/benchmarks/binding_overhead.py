"""Per-call cost of muh's torch binding, on a problem so small that the GPU finishes each kernel
before the host issues the next call.

For each op it measures, in one process:
  gpu_us     GPU time per call: N calls captured in one CUDA graph, replayed, timed with CUDA events
             (no host work at all — what the kernels themselves cost);
  op_us      host time per eager call of torch.ops.muh.<op> (dispatcher + checks + plan + launch),
             N back-to-back calls over wall time, synchronised once at the end;
  py_us      the same through muh.ops' Python wrapper (adds Python argument handling);
  floor_us   a torch op of the same kind for scale: torch.ops.aten.add.out on two tiny tensors
             (dispatcher + one kernel launch, nothing else).
The binding's overhead per call is op_us − gpu_us when op_us > gpu_us (host-bound), reported as
`overhead_us`; `vs_floor` says how it compares to the cheapest torch op launch.

Usage: python binding_overhead.py [--json out.json] [--iters N]
"""

import argparse
import json
import math
import statistics
import time

import torch

import muh
import muh.ops as ops


def host_us(fn, iters):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(samples)


def graph_us(fn, iters):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    g.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) * 1e3 / iters)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=2000)
    args = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    hd = next((d for t, d in muh.COMPILED_INSTANCES if t == "bf16"), 128)
    torch.manual_seed(0)

    # Decode: 1 sequence of 16 tokens, 8 query heads over 8 KV heads, page 16.
    q = torch.randn(1, 8, hd, device=dev, dtype=dt)
    k_nhd = torch.randn(4, 16, 8, hd, device=dev, dtype=dt)
    v_nhd = torch.randn_like(k_nhd)
    x = 8
    k_vllm = torch.randn(4, 8, hd // x, 16, x, device=dev, dtype=dt)
    v_vllm = torch.randn(4, 8, hd, 16, device=dev, dtype=dt)
    bt = torch.zeros(1, 1, dtype=torch.int32, device=dev)
    sl = torch.full((1,), 16, dtype=torch.int32, device=dev)
    out = torch.empty_like(q)
    one = torch.ones((), device=dev)
    scale = 1.0 / math.sqrt(hd)
    # Prefill: one sequence of 16 tokens.
    fq = torch.randn(16, 8, hd, device=dev, dtype=dt)
    fk, fv = torch.randn_like(fq), torch.randn_like(fq)
    cu = torch.tensor([0, 16], dtype=torch.int32, device=dev)
    a, b, c = (torch.randn(16, device=dev) for _ in range(3))

    cases = {
        "paged_decode": (lambda: torch.ops.muh.paged_decode(q, k_nhd, v_nhd, bt, sl, 16, None, False, 0),
                         lambda: ops.paged_decode(q, k_nhd, v_nhd, bt, sl, 16)),
        "paged_attention_v1": (
            lambda: torch.ops.muh.paged_attention_v1(out, q, k_vllm, v_vllm, 8, scale, bt, sl, 16, 16,
                                                     None, "auto", one, one, 0, 0, 0, 64, 0),
            lambda: ops.paged_attention_v1(out, q, k_vllm, v_vllm, 8, scale, bt, sl, 16, 16)),
        "flash_attn_varlen": (
            lambda: torch.ops.muh.flash_attn_varlen(fq, fk, fv, cu, cu, 16, 16, None, True, False),
            lambda: ops.flash_attn_varlen_func(fq, fk, fv, cu, cu, 16, 16, causal=True)),
    }
    floor = host_us(lambda: torch.ops.aten.add.out(a, b, out=c), args.iters)
    rows = []
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  bf16 head_dim {hd}")
    print(f"floor (aten.add.out, tiny): {floor:.2f} us/call host\n")
    print(f"{'op':<22}{'gpu_us':>9}{'op_us':>9}{'py_us':>9}{'overhead_us':>13}{'vs_floor':>10}")
    for name, (raw, wrapped) in cases.items():
        g = graph_us(raw, 200)
        h = host_us(raw, args.iters)
        p = host_us(wrapped, args.iters)
        over = max(0.0, h - g)
        rows.append(dict(op=name, gpu_us=g, op_us=h, py_us=p, overhead_us=over, floor_us=floor))
        print(f"{name:<22}{g:>9.2f}{h:>9.2f}{p:>9.2f}{over:>13.2f}{h / floor:>9.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, head_dim=hd,
                           iters=args.iters, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
