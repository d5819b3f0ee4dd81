"""Decode context parallelism (muh.distributed, issue 21): time per decode step and its parts on
N GPUs, against one GPU holding the whole sequence.

Cells: batch 1, fp16, head_dim 256, 4 query heads / 1 KV head, page 16, total lengths 256k and 1M
tokens (--lens), the KV sharded token by token (--interleave, default 1) over the N ranks of the
launch. Per cell, each rank times, with CUDA events, the median of --reps (≥ 30) calls with the L2
flushed before each (a 512 MiB memset, untimed, as python/benchmarks/cache_ops.py and `muh bench
decode`), every rep started together (a barrier, then a device sync):
  local      muh's paged decode with LSE over the rank's shard (torch.ops.muh.paged_decode)
  allgather  the packed (out, lse) all_gather_into_tensor over the group (with its pack copy)
  combine    dcp_combine of the gathered partials (W − 1 merge_attn_states in fp32 + copies)
  step       dcp_paged_decode, eager (the three above plus Python and launch overhead)
  step_graph dcp_paged_decode captured once in a CUDA graph and replayed (how a server runs it)
  single     rank 0 alone: muh's paged decode over the whole sequence (the one-GPU baseline; it
             fits an H200 at these sizes: 1M tokens × 256 × 2 B × 2 = 1 GiB), eager and graphed
A part's figure is the largest of the ranks' medians (a step waits for the slowest rank); the
smallest is reported too. Rank 0 prints a table and writes --csv / --json.

Launch (one process per GPU; the NCCL variables keep NVLink multicast off, as the device
machines need; muh.distributed also sets them when imported):
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONPATH=<build>/python \\
        torchrun --standalone --nproc-per-node N python/benchmarks/dcp_decode.py --csv out.csv --json out.json
N = 1 gives the single-GPU figures only. scripts/dcp_multigpu.sh runs N = 1, 2, 4, 8.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess

import muh.distributed as md  # before the process group: sets NCCL_NVLS_ENABLE / TORCH_SYMM_MEM_*

import torch
import torch.distributed as dist

import muh.ops as ops

FLUSH = None


def flush_l2():
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    FLUSH.zero_()


def timed_us(fn, reps, group):
    """Median µs of `reps` calls of fn on this rank, cold L2, the ranks started together."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush_l2()
        if group is not None:
            dist.barrier(group)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def graphed(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def random_shard(local_len, hd, dtype, page, seed):
    """This rank's shard for timing: local_len tokens of 1 KV head in shuffled pages."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    pages = max(1, -(-local_len // page))
    k = torch.randn(pages, page, 1, hd, generator=g, device="cuda").to(dtype)
    v = torch.randn(pages, page, 1, hd, generator=g, device="cuda").to(dtype)
    table = torch.randperm(pages, generator=g, device="cuda").to(torch.int32)[None]
    return k, v, table, torch.tensor([local_len], dtype=torch.int32, device="cuda")


def spread(x, group, world):
    """(max, min) of a float over the ranks."""
    t = torch.tensor([x, -x], dtype=torch.float64, device="cuda")
    if group is not None and world > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t[0].item(), -t[1].item()


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lens", default="262144,1048576", help="total sequence lengths, comma-separated")
    ap.add_argument("--interleave", type=int, default=1, help="cp_kv_cache_interleave_size")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--csv")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.reps < 30:
        ap.error("--reps must be >= 30 (a median of at least 30)")

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    group = None
    if world > 1:
        dist.init_process_group("nccl")
        group = dist.group.WORLD
    rank = dist.get_rank() if group is not None else 0
    dtype, hd, hq = torch.float16, 256, 4
    rows = []
    with torch.inference_mode():
        for total in (int(x) for x in args.lens.split(",")):
            local_len = int(md.dcp_local_seq_lens(torch.tensor([total]), world, rank, args.interleave)[0])
            q = torch.randn(1, hq, hd, device="cuda").to(dtype)
            if group is not None:
                dist.broadcast(q, src=0)
            k, v, table, lens = random_shard(local_len, hd, dtype, args.page, seed=1000 + rank)
            out = torch.empty_like(q)
            parts = {}
            if world > 1:
                lo, ll = torch.ops.muh.paged_decode(q, k, v, table, lens, -1, None, True, 0)
                outs, lses = md._all_gather_partials(lo, ll, group, world)
                parts["local"] = lambda: torch.ops.muh.paged_decode(q, k, v, table, lens, -1, None, True, 0)
                parts["allgather"] = lambda: md._all_gather_partials(lo, ll, group, world)
                parts["combine"] = lambda: md.dcp_combine(outs, lses, out=out)
                step = lambda: md.dcp_paged_decode(q, k, v, table, lens, group, out=out)  # noqa: E731
                parts["step"] = step
                g = graphed(step)
                parts["step_graph"] = g.replay
            for name, fn in parts.items():
                mx, mn = spread(timed_us(fn, args.reps, group), group, world)
                rows.append({"world": world, "total_tokens": total, "local_tokens": local_len, "part": name,
                             "median_us_max_over_ranks": mx, "median_us_min_over_ranks": mn})
            del parts
            if rank == 0:  # the one-GPU baseline: the whole sequence on rank 0
                fk, fv, ft, fl = random_shard(total, hd, dtype, args.page, seed=7)
                single = lambda: ops.paged_decode(q, fk, fv, ft, fl)  # noqa: E731
                gs = graphed(single)
                for name, fn in (("single", single), ("single_graph", gs.replay)):
                    us = timed_us(fn, args.reps, None)
                    rows.append({"world": 1, "total_tokens": total, "local_tokens": total, "part": name,
                                 "median_us_max_over_ranks": us, "median_us_min_over_ranks": us})
                del fk, fv, gs
            if group is not None:
                dist.barrier(group)
            torch.cuda.empty_cache()
    if rank == 0:
        meta = {"device": torch.cuda.get_device_name(), "world": world, "interleave": args.interleave,
                "reps": args.reps, "page": args.page, "dtype": "fp16", "head_dim": hd, "q_heads": hq, "kv_heads": 1,
                "batch": 1, "commit": commit(), "torch": torch.__version__,
                "nccl": str(torch.cuda.nccl.version()),
                "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
                "TORCH_SYMM_MEM_DISABLE_MULTICAST": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST")}
        print(f"# {meta}")
        print(f"{'world':>5} {'tokens':>9} {'local':>9} {'part':>12} {'max us':>9} {'min us':>9}")
        for r in rows:
            print(f"{r['world']:5d} {r['total_tokens']:9d} {r['local_tokens']:9d} {r['part']:>12} "
                  f"{r['median_us_max_over_ranks']:9.1f} {r['median_us_min_over_ranks']:9.1f}")
        if args.csv:
            with open(args.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"meta": meta, "rows": rows}, f, indent=1)
    if group is not None:
        dist.barrier(group)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
