"""muh.distributed — decode context parallelism (vLLM's DCP) on torch.distributed with NCCL.

A long sequence's KV cache is sharded over the ranks of a group by token: with
``interleave_size`` I (vLLM's ``cp_kv_cache_interleave_size``, default 1), global token t lives
on rank (t // I) % W, at local position (t // (I·W))·I + t % I of that rank's cache. Each rank
runs muh's paged decode with LSE over its shard — a partial (out, lse) over a disjoint key set,
exactly as one split of muh's split-KV decode — and the partials are combined by muh's state
merge (``torch.ops.muh.merge_attn_states``, the same OnlineSoftmax merge the single-GPU split-KV
decode, the CPU reference and the CPU tests use).

* :func:`dcp_paged_decode` — the real path: local decode, one ``all_gather_into_tensor`` over the
  group, then :func:`dcp_combine`. CUDA-graph capturable (no host sync; call it once eagerly
  before capture so that NCCL's communicator and muh's device profile exist).
* :func:`dcp_combine` — the combine alone, on stacked partials of ranks 0..W−1. The simulated-rank
  tests call it on partials computed in one process; :func:`dcp_paged_decode` calls it on the
  gathered ones: one code path.
* :func:`dcp_local_seq_lens` — each rank's local lengths from the global ones (device tensors,
  capturable); :func:`shard_paged_kv` — splits a full NHD paged cache into per-rank shards (a setup
  and test helper: it reads lengths on the host).

NVLink multicast (NVLS) and torch's symmetric-memory multicast stay off: the device machines
need ``NCCL_NVLS_ENABLE=0`` and ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``. This module sets both
(``os.environ.setdefault``, so an explicit setting wins) when it is imported; NCCL reads them when
a communicator is created, so import ``muh.distributed`` before the process group's first
collective — or set them in the launcher, as ``scripts/dcp_multigpu.sh`` does. Nothing here uses
symmetric memory.
"""

from __future__ import annotations

import os

# Before any process group is used (NCCL reads these at communicator creation).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

from typing import List, NamedTuple, Optional, Tuple, Union  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

__all__ = ["dcp_paged_decode", "dcp_combine", "dcp_local_seq_lens", "shard_paged_kv", "DcpShard"]

_OP = "muh.dcp_paged_decode"


def _fail(op: str, msg: str) -> None:
    raise ValueError(f"{op}: {msg}")


def _ops():
    """muh.ops, imported on first use: the sharding helpers need only torch."""
    from . import ops  # noqa: F401  (loads torch.ops.muh)
    return torch.ops.muh


# ---- The token-to-rank assignment ----------------------------------------------------------------

def _check_layout(op: str, world_size: int, interleave_size: int, rank: Optional[int] = None) -> None:
    if not isinstance(world_size, int) or world_size < 1:
        _fail(op, f"world_size must be an int >= 1, got {world_size!r}")
    if not isinstance(interleave_size, int) or interleave_size < 1:
        _fail(op, f"interleave_size (vLLM's cp_kv_cache_interleave_size) must be an int >= 1, got {interleave_size!r}")
    if rank is not None and (not isinstance(rank, int) or not 0 <= rank < world_size):
        _fail(op, f"rank must be an int in [0, world_size={world_size}), got {rank!r}")


def dcp_local_seq_lens(seq_lens: torch.Tensor, world_size: int, rank: int,
                       interleave_size: int = 1) -> torch.Tensor:
    """Rank ``rank``'s local lengths (int32, seq_lens' shape and device) for global lengths
    ``seq_lens``: I tokens per full round of W·I tokens, plus what of the last round falls in its
    slot [rank·I, (rank+1)·I) — vLLM's ``get_dcp_local_seq_lens``. Elementwise tensor ops only:
    no host sync, capturable in a CUDA graph (recompute a replay's local lengths inside it)."""
    op = "muh.dcp_local_seq_lens"
    _check_layout(op, world_size, interleave_size, rank)
    if not isinstance(seq_lens, torch.Tensor) or seq_lens.dtype not in (torch.int32, torch.int64):
        _fail(op, f"seq_lens must be an int32 or int64 tensor, got {type(seq_lens).__name__}"
              f"{'' if not isinstance(seq_lens, torch.Tensor) else ' ' + str(seq_lens.dtype)}")
    round_tokens = interleave_size * world_size
    full_rounds = torch.div(seq_lens, round_tokens, rounding_mode="floor")
    rest = seq_lens - full_rounds * round_tokens
    mine = (rest - rank * interleave_size).clamp(0, interleave_size)
    return (full_rounds * interleave_size + mine).to(torch.int32)


class DcpShard(NamedTuple):
    """One rank's shard: an NHD cache of its tokens, its block table and local lengths."""
    k_cache: torch.Tensor      # [num_pages, page_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor
    block_table: torch.Tensor  # int32 [num_seqs, max_local_blocks]
    seq_lens: torch.Tensor     # int32 [num_seqs]


def shard_paged_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                   seq_lens: torch.Tensor, world_size: int, *, interleave_size: int = 1,
                   ranks: Optional[List[int]] = None, page_size: Optional[int] = None,
                   pad_value: float = 0.0) -> List[DcpShard]:
    """Splits a full NHD paged cache (k_cache / v_cache [num_pages, page_size, num_kv_heads,
    head_dim], block_table int32 [num_seqs, max_blocks], seq_lens [num_seqs]) into the shards of
    ``ranks`` (default: all of 0..world_size−1) with the interleaved assignment. Each shard holds
    its tokens in order in pages of its own (``page_size``, default the full cache's); slots past a
    shard's length hold ``pad_value`` (tests pass NaN so that a read past the length shows). A
    sequence whose local length is 0 gets no page (its block-table row points at page 0, unread).
    A setup helper, not for the decode step: it reads seq_lens on the host (one sync)."""
    op = "muh.shard_paged_kv"
    _check_layout(op, world_size, interleave_size)
    ranks = list(range(world_size)) if ranks is None else list(ranks)
    for r in ranks:
        _check_layout(op, world_size, interleave_size, r)
    if k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        _fail(op, "k_cache and v_cache must be 4-D [num_pages, page_size, num_kv_heads, head_dim] (NHD) of one "
              f"shape, got {tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    if v_cache.dtype != k_cache.dtype or v_cache.device != k_cache.device:
        _fail(op, f"v_cache must have k_cache's dtype and device ({k_cache.dtype}, {k_cache.device}), got "
              f"{v_cache.dtype}, {v_cache.device}")
    if block_table.dim() != 2 or block_table.dtype != torch.int32:
        _fail(op, f"block_table must be 2-D int32 [num_seqs, max_blocks], got {block_table.dtype} "
              f"{tuple(block_table.shape)}")
    if seq_lens.dim() != 1 or seq_lens.shape[0] != block_table.shape[0]:
        _fail(op, f"seq_lens must be 1-D [num_seqs = {block_table.shape[0]}], got shape {tuple(seq_lens.shape)}")
    full_page = k_cache.shape[1]
    page = full_page if page_size is None else page_size
    if not isinstance(page, int) or page < 1:
        _fail(op, f"page_size must be an int >= 1, got {page_size!r}")
    lens = [int(x) for x in seq_lens.tolist()]
    if any(L < 0 or L > block_table.shape[1] * full_page for L in lens):
        _fail(op, f"seq_lens {lens} must lie in [0, max_blocks · page_size = {block_table.shape[1] * full_page}]")
    dev, (hkv, d) = k_cache.device, k_cache.shape[2:]
    k_rows, v_rows = k_cache.reshape(-1, hkv, d), v_cache.reshape(-1, hkv, d)  # [num_pages · page_size, H, D]
    bt = block_table.to(device=dev, dtype=torch.int64)
    shards = []
    for r in ranks:
        local = [int(x) for x in dcp_local_seq_lens(torch.tensor(lens, dtype=torch.int64), world_size, r,
                                                    interleave_size)]
        blocks = [-(-L // page) for L in local]
        first = [sum(blocks[:b]) for b in range(len(blocks))]
        num_pages = max(1, sum(blocks))
        sk = torch.full((num_pages, page, hkv, d), pad_value, dtype=k_cache.dtype, device=dev)
        sv = torch.full_like(sk, pad_value)
        table = torch.zeros(len(lens), max(1, max(blocks, default=1)), dtype=torch.int32, device=dev)
        for b, L in enumerate(local):
            if L == 0:
                continue
            table[b, :blocks[b]] = torch.arange(first[b], first[b] + blocks[b], dtype=torch.int32, device=dev)
            j = torch.arange(L, device=dev)
            t = (j // interleave_size) * (interleave_size * world_size) + r * interleave_size + j % interleave_size
            src = bt[b, t // full_page] * full_page + t % full_page    # rows of the full cache
            dst = first[b] * page + j                                   # rows of the shard
            sk.view(-1, hkv, d)[dst] = k_rows[src]
            sv.view(-1, hkv, d)[dst] = v_rows[src]
        shards.append(DcpShard(sk, sv, table, torch.tensor(local, dtype=torch.int32, device=dev)))
    return shards


# ---- The combine ---------------------------------------------------------------------------------
# Why all-gather (out, lse) and fold on every rank, rather than vLLM's cp_lse_ag_out_rs (all-gather
# the LSEs, rescale the local out, reduce-scatter it over heads): a decode step's partials are tiny.
# Per rank, out is B·H·D elements and lse B·H floats; at the shape (B = 1, H = 4 query heads,
# D = 256, fp16) that is 2048 + 16 = 2064 bytes, so the all-gather hands each rank W·2064 bytes
# (16.1 KiB at W = 8), against vLLM's W·16 bytes of LSE plus a reduce-scatter of 2048 bytes. Both
# are small enough that a collective's fixed latency, not its bytes, should set the cost (the
# benchmark's allgather row, python/benchmarks/dcp_decode.py, is to confirm it on 2/4/8 GPUs),
# and ours is one collective instead of two. In exchange every rank gets all heads (no H % W constraint), the
# fold runs in fp32 and rounds once (the reduce-scatter sums W rescaled fp16/bf16 partials in
# NCCL's order), and it runs in one fixed rank order on every rank, so all ranks hold bitwise the
# same result, run after run. The fold reuses merge_attn_states — no merge of its own: W − 1
# launches of a kernel over B·H rows, each a few µs.

def _check_partials(op: str, outs: torch.Tensor, lses: torch.Tensor) -> None:
    if not isinstance(outs, torch.Tensor) or outs.dim() != 4:
        _fail(op, "outs must be a 4-D tensor [world, num_seqs, num_heads, head_dim], got "
              f"{tuple(outs.shape) if isinstance(outs, torch.Tensor) else type(outs).__name__}")
    if not outs.is_cuda:
        _fail(op, f"outs must be a CUDA tensor, got device {outs.device}")
    if outs.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        _fail(op, f"outs must be float16, bfloat16 or float32, got {outs.dtype}")
    want = tuple(outs.shape[:3])
    if not isinstance(lses, torch.Tensor) or tuple(lses.shape) != want or lses.dtype != torch.float32:
        _fail(op, f"lses must be float32 [world, num_seqs, num_heads] = {want}, got "
              f"{(lses.dtype, tuple(lses.shape)) if isinstance(lses, torch.Tensor) else type(lses).__name__}")
    if lses.device != outs.device:
        _fail(op, f"lses is on {lses.device} but outs is on {outs.device}")
    if outs.shape[0] < 1:
        _fail(op, "outs must hold at least one rank's partial (world >= 1)")


def _check_out(op: str, out: Optional[torch.Tensor], shape, dtype, device, name: str = "out") -> None:
    if out is None:
        return
    if not isinstance(out, torch.Tensor):
        _fail(op, f"{name} must be a tensor or None, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or out.device != device:
        _fail(op, f"{name} must be {dtype} {tuple(shape)} on {device}, got {out.dtype} {tuple(out.shape)} on {out.device}")


def dcp_combine(outs: torch.Tensor, lses: torch.Tensor, *, out: Optional[torch.Tensor] = None,
                out_lse: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Combines the partials of ranks 0..W−1: outs [W, num_seqs, num_heads, head_dim] (fp16, bf16
    or fp32), lses float32 [W, num_seqs, num_heads] (paged_decode's lse layout, stacked). Returns
    (out [num_seqs, num_heads, head_dim] in outs' dtype, lse float32 [num_seqs, num_heads]),
    written into ``out`` / ``out_lse`` when given. Any strides (views of a gather buffer are fine).

    The partials are folded in rank order, acc ← merge(acc, partial r) for r = 1..W−1, by
    merge_attn_states on fp32 copies, and rounded to outs' dtype once at the end. merge_attn_states
    takes vLLM's lse layout [num_heads, num_tokens]; viewing each (seq, head) row as a token of one
    head — out [B·H, 1, D], lse [1, B·H] — makes paged_decode's [B, H] lse that layout with no
    transpose or copy. An empty shard's partial (out 0, lse −inf; muh's decode of length 0) has
    weight 0 and is the identity; both sides empty gives the prefix, i.e. 0 and lse −inf, as the
    unsharded decode of an empty sequence (kernels/merge_states.hpp, row_weights())."""
    op = "muh.dcp_combine"
    _check_partials(op, outs, lses)
    world, b, h, d = outs.shape
    _check_out(op, out, (b, h, d), outs.dtype, outs.device)
    _check_out(op, out_lse, (b, h), torch.float32, outs.device, "out_lse")
    rows = b * h
    if out is None:
        out = torch.empty((b, h, d), dtype=outs.dtype, device=outs.device)
    if out_lse is None:
        out_lse = torch.empty((b, h), dtype=torch.float32, device=outs.device)
    if rows == 0:
        return out, out_lse
    acc = torch.empty((world, rows, 1, d), dtype=torch.float32, device=outs.device)
    acc.view(world, b, h, d).copy_(outs)                                   # fp32 partials, packed
    lse_of = [lses[r].reshape(1, rows) for r in range(world)]             # views: [1, B·H]
    lse = lse_of[0]
    if world > 1:
        # The merged lse ping-pongs between two rows: merge_attn_states' output_lse must not
        # overlap an input lse (one thread of a row writes it while the others read theirs).
        lse_buf = torch.empty((2, 1, rows), dtype=torch.float32, device=outs.device)
        merge = _ops().merge_attn_states
        for r in range(1, world):
            nxt = lse_buf[r % 2]
            merge(acc[0], nxt, acc[0], lse, acc[r], lse_of[r])  # in place: output is the prefix
            lse = nxt
    out.copy_(acc[0].view(b, h, d))
    out_lse.copy_(lse.view(b, h))
    return out, out_lse


# ---- The real path -------------------------------------------------------------------------------

def _group_world(group) -> int:
    """The group's size; group None only where there is no one to talk to."""
    initialized = dist.is_available() and dist.is_initialized()
    if group is None:
        if initialized and dist.get_world_size() > 1:
            _fail(_OP, f"group is None but torch.distributed's world has {dist.get_world_size()} ranks: pass the "
                  "decode-context-parallel group (dist.group.WORLD for all ranks); None means one process, "
                  "no communication")
        return 1
    if not initialized:
        _fail(_OP, "group was given but torch.distributed is not initialized (call dist.init_process_group first)")
    if dist.get_rank(group) < 0:
        _fail(_OP, "this process is not a member of group")
    backend = str(dist.get_backend(group)).lower()
    if "nccl" not in backend:
        _fail(_OP, f"group must use the NCCL backend (CUDA tensors, capturable collectives), got '{backend}'")
    return dist.get_world_size(group)


def _check_decode_inputs(q, k, v, block_table, seq_lens, out) -> None:
    def tensor(t, name):
        if not isinstance(t, torch.Tensor):
            _fail(_OP, f"{name} must be a torch.Tensor, got {type(t).__name__}")

    tensor(q, "q")
    if not q.is_cuda:
        _fail(_OP, f"q must be a CUDA tensor, got device {q.device}")
    if q.dim() != 3:
        _fail(_OP, f"q must be 3-D [num_seqs, num_q_heads, head_dim], got shape {tuple(q.shape)}")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        _fail(_OP, f"q must be float16, bfloat16 or float32, got {q.dtype}")
    for t, name in ((k, "local_k_cache"), (v, "local_v_cache")):
        tensor(t, name)
        if t.device != q.device:
            _fail(_OP, f"{name} is on {t.device} but q is on {q.device}")
        if t.dtype != q.dtype:
            _fail(_OP, f"{name} must be {q.dtype} (q's dtype), got {t.dtype}")
        if t.dim() != 4:
            _fail(_OP, f"{name} must be 4-D [num_pages, page_size, num_kv_heads, head_dim] (NHD), got shape "
                  f"{tuple(t.shape)}")
    for t, name, nd, shape in ((block_table, "local_block_table", 2, "[num_seqs, max_blocks]"),
                               (seq_lens, "local_seq_lens", 1, "[num_seqs]")):
        tensor(t, name)
        if t.device != q.device:
            _fail(_OP, f"{name} is on {t.device} but q is on {q.device}")
        if t.dtype != torch.int32 or t.dim() != nd or t.shape[0] != q.shape[0]:
            _fail(_OP, f"{name} must be {nd}-D int32 {shape} with num_seqs = {q.shape[0]} (q's), got "
                  f"{t.dtype} {tuple(t.shape)}")
    _check_out(_OP, out, q.shape, q.dtype, q.device)


def _all_gather_partials(out: torch.Tensor, lse: torch.Tensor, group, world: int):
    """One all_gather_into_tensor of every rank's (out, lse), packed as bytes [out | lse] (one NCCL
    call, not two); returns views outs [W, B, H, D] and lses [W, B, H] of the gathered buffer."""
    b, h, d = out.shape
    out_bytes = out.numel() * out.element_size()  # a multiple of 4 (D even): lse stays 4-B aligned
    send = torch.cat((out.reshape(-1).view(torch.uint8), lse.reshape(-1).view(torch.uint8)))
    # The output is the inputs' concatenation [W · bytes] (the form every backend takes; NCCL
    # also takes a [W, bytes] stack, gloo does not), viewed per rank afterwards.
    recv = torch.empty(world * send.numel(), dtype=torch.uint8, device=out.device)
    dist.all_gather_into_tensor(recv, send, group=group)
    recv = recv.view(world, send.numel())
    outs = recv[:, :out_bytes].view(out.dtype).view(world, b, h, d)
    lses = recv[:, out_bytes:].view(torch.float32).view(world, b, h)
    return outs, lses


def dcp_paged_decode(q: torch.Tensor, local_k_cache: torch.Tensor, local_v_cache: torch.Tensor,
                     local_block_table: torch.Tensor, local_seq_lens: torch.Tensor, group, *,
                     softmax_scale: Optional[float] = None, out: Optional[torch.Tensor] = None,
                     max_local_seq_len: Optional[int] = None, num_splits: int = 0,
                     return_lse: bool = False) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Decode attention over a KV cache sharded by token across ``group`` (decode context
    parallelism): muh's paged decode with LSE over this rank's shard, an all-gather of the partials
    over the group, and :func:`dcp_combine`. Every rank of the group calls it (a collective) with
    the same q and gets the same result, bit for bit. (Under tensor parallelism, where each rank
    holds other query heads, all-gather q's heads over the group first, as vLLM's DCP does, and
    keep the rank's own heads of the result.)

    q [num_seqs, num_q_heads, head_dim] (the same on every rank); local_k_cache / local_v_cache
    this rank's NHD cache [num_pages, page_size, num_kv_heads, head_dim]; local_block_table int32
    [num_seqs, max_local_blocks] and local_seq_lens int32 [num_seqs] (:func:`dcp_local_seq_lens`;
    0 is fine: that rank's partial is empty). ``group``: a torch.distributed NCCL group, or None
    for a single process (then no communication). softmax_scale defaults to 1/sqrt(head_dim) (the
    global sequence's scale, not a shard's); max_local_seq_len bounds the local lengths for muh's
    plan (default: the local block table's capacity; under CUDA-graph capture the plan is fixed,
    so replays may change lengths up to that bound); num_splits as :func:`muh.ops.paged_decode`.
    ``out``: a preallocated result (q's shape and dtype) for CUDA graphs. Returns out, or (out,
    lse float32 [num_seqs, num_q_heads]) with return_lse.

    CUDA-graph capturable: no host sync; NCCL's all_gather_into_tensor is captured on the current
    stream. Run it once eagerly first (NCCL creates its communicator lazily)."""
    world = _group_world(group)
    _check_decode_inputs(q, local_k_cache, local_v_cache, local_block_table, local_seq_lens, out)
    if max_local_seq_len is not None and (not isinstance(max_local_seq_len, int) or max_local_seq_len < 0):
        _fail(_OP, f"max_local_seq_len must be None or an int >= 0, got {max_local_seq_len!r}")
    local_out, local_lse = _ops().paged_decode(
        q, local_k_cache, local_v_cache, local_block_table, local_seq_lens,
        -1 if max_local_seq_len is None else max_local_seq_len, softmax_scale, True, num_splits)
    if group is None:
        outs, lses = local_out.unsqueeze(0), local_lse.unsqueeze(0)
    else:
        outs, lses = _all_gather_partials(local_out, local_lse, group, world)
    res, lse = dcp_combine(outs, lses, out=out)
    return (res, lse) if return_lse else res
