"""GPU time and bandwidth of muh's cache writes and state merge, beside the same work done with
torch indexing / torch math in the same process.

Cells: reshape_and_cache (vLLM layout) and reshape_and_cache_flash (NHD) for a 4096-token chunk
and for 64 decode tokens (the seed's 1 KV head × head_dim 256 fp16, and the serving 8 × 128 bf16);
merge_attn_states for 4096 tokens × 32 heads × 128 (bf16). Each time is the median of 30 launches
timed with CUDA events, the L2 flushed before each (a 512 MiB memset); bytes are what the op must
move (read key+value and write them; read two partials and two lse, write one of each).

Usage: python cache_ops.py [--json out.json]
"""

import argparse
import json
import statistics

import torch

import muh.ops as ops

FLUSH = None


def timed_us(fn, reps=30):
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        FLUSH.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def cache_cell(layout, tokens, heads, d, dtype, block=16):
    blocks = (tokens + block - 1) // block + 8
    key = torch.randn(tokens, heads, d, device="cuda").to(dtype)
    value = torch.randn(tokens, heads, d, device="cuda").to(dtype)
    slots = torch.randperm(blocks * block, device="cuda")[:tokens]
    x = 16 // key.element_size()
    if layout == "vllm":
        kc = torch.zeros(blocks, heads, d // x, block, x, device="cuda", dtype=dtype)
        vc = torch.zeros(blocks, heads, d, block, device="cuda", dtype=dtype)
        muh_fn = lambda: ops.reshape_and_cache(key, value, kc, vc, slots, "auto", 1.0, 1.0)  # noqa: E731
        b, o = slots // block, slots % block

        def torch_fn():
            kc[b, :, :, o, :] = key.view(tokens, heads, d // x, x)
            vc[b, :, :, o] = value
    else:
        kc = torch.zeros(blocks, block, heads, d, device="cuda", dtype=dtype)
        vc = torch.zeros_like(kc)
        muh_fn = lambda: ops.reshape_and_cache_flash(key, value, kc, vc, slots, "auto", 1.0, 1.0)  # noqa: E731

        def torch_fn():
            kc.view(-1, heads, d)[slots] = key
            vc.view(-1, heads, d)[slots] = value
    nbytes = 4 * key.numel() * key.element_size() + slots.numel() * 8
    return muh_fn, torch_fn, nbytes


def merge_cell(tokens, heads, d, dtype):
    p = torch.randn(tokens, heads, d, device="cuda").to(dtype)
    s = torch.randn(tokens, heads, d, device="cuda").to(dtype)
    pl, sl = torch.randn(heads, tokens, device="cuda"), torch.randn(heads, tokens, device="cuda")
    out, out_lse = torch.empty_like(p), torch.empty_like(pl)
    muh_fn = lambda: ops.merge_attn_states(out, p, pl, s, sl, out_lse)  # noqa: E731

    def torch_fn():
        m = torch.maximum(pl, sl)
        ep, es = torch.exp(pl - m), torch.exp(sl - m)
        tot = ep + es
        out.copy_(p * (ep / tot).t()[:, :, None] + s * (es / tot).t()[:, :, None])
        out_lse.copy_(m + torch.log(tot))
    nbytes = 3 * p.numel() * p.element_size() + 3 * pl.numel() * 4
    return muh_fn, torch_fn, nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    cells = []
    for layout in ("vllm", "nhd"):
        for tokens, heads, d, dtype in ((4096, 1, 256, torch.float16), (64, 1, 256, torch.float16),
                                        (4096, 8, 128, torch.bfloat16), (64, 8, 128, torch.bfloat16)):
            cells.append((f"reshape_and_cache_{layout} t{tokens} h{heads} d{d} {str(dtype)[6:]}",
                          cache_cell(layout, tokens, heads, d, dtype)))
    cells.append(("merge_attn_states t4096 h32 d128 bfloat16", merge_cell(4096, 32, 128, torch.bfloat16)))
    rows = []
    with torch.inference_mode():
        for name, (muh_fn, torch_fn, nbytes) in cells:
            mu, tu = timed_us(muh_fn), timed_us(torch_fn)
            rows.append({"cell": name, "muh_us": mu, "torch_us": tu, "bytes": nbytes,
                         "muh_GBps": nbytes / mu / 1e3, "speedup_vs_torch": tu / mu})
            print(f"{name:48s} muh {mu:8.2f} us ({nbytes / mu / 1e3:7.1f} GB/s)   torch {tu:8.2f} us   "
                  f"x{tu / mu:5.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
