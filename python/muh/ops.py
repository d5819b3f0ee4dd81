"""muh.ops — muh's kernels as PyTorch custom ops (``torch.ops.muh.*``), usable under
``torch.compile(fullgraph=True)`` and inside captured CUDA graphs.

* ``paged_attention_v1`` / ``paged_attention_v2``: vLLM's ``torch.ops._C`` ops, argument for
  argument, on vLLM's cache layout — ``torch.ops.muh`` can stand in for ``torch.ops._C``: the
  default overloads take vLLM 0.6.3's float ``k_scale`` / ``v_scale``, the ``.tensor_scales``
  overloads later vLLM's 0-dim tensors (a call picks the one its arguments match).
  ``alibi_slopes`` is the ALiBi attention variant (muh/variant.hpp); ``kv_cache_dtype`` 'auto'
  (a cache of the query's dtype) or an fp8 cache — 'fp8' (= 'fp8_e4m3'), 'fp8_e4m3', 'fp8_e5m2':
  uint8 (or the kind's float8) codes, x = 16, dequantised by ``k_scale`` / ``v_scale`` (a CUDA
  tensor scale is read to the host: a sync per call, refused under CUDA-graph capture);
  block-sparse attention raises NotImplementedError. The paged prefill drop-ins read fp8 caches
  too (below), with the attention variants.
* ``flash_attn_varlen_func``: FlashAttention's ``flash_attn_varlen_func``, its positional order,
  defaults and return convention; what muh cannot honour raises NotImplementedError naming it.
* ``paged_decode``: one query token per sequence over an NHD cache
  ``[num_pages, page_size, num_kv_heads, head_dim]``, split as muh's decode plan decides.
* ``flash_attn_varlen_func(..., block_table=, seqused_k=, out=)``: prefill whose K/V are read
  from a paged cache through a block table (vLLM V1's chunked prefill / prefix reuse call); a
  torch.float8_e4m3fn / float8_e5m2 cache is an fp8 cache, dequantised by ``k_descale`` /
  ``v_descale`` (vLLM's fork's keywords, per-tensor).
* ``context_attention_fwd``: vLLM 0.6.3's chunked prefill over a cached prefix
  (``vllm/attention/ops/prefix_prefill.py``), argument for argument; ``kv_cache_dtype`` and
  ``k_scale`` / ``v_scale`` as ``paged_attention_v1``'s (floats, or later vLLM's tensors: the
  ``.tensor_scales`` overload).
* ``reshape_and_cache`` / ``reshape_and_cache_flash`` (the cache writes, vLLM's layout and NHD)
  and ``merge_attn_states`` (two partials merged by their LSE), vLLM's ``_custom_ops`` signatures.

Bad arguments raise ValueError naming the argument (NotImplementedError for what muh does not do).
Bad device-side inputs — block ids outside [0, num_pages), seq_lens past the block table,
cu_seqlens not from 0 / not monotonic / not ending at the total / longer than max_seqlen — are
guarded by the kernels (the sequence concerned is not computed; nothing outside the tensors is
read) and raise ValueError naming the input: by default at the next muh op on that device, or at
``check_errors()``; ``MUH_VALIDATE=sync`` raises at the op itself (a sync per op), ``MUH_VALIDATE=0``
only at ``check_errors()`` (README, "Bad device-side inputs").
muh has no backward: with grad mode on, an input that requires grad raises NotImplementedError
(the ops' Autograd kernel, python/src/torch_ops.cpp), for torch.ops.muh.* as for these wrappers.
The C++ side lives in python/src/torch_ops.cpp; the fake implementations here give torch.compile
the output shapes (and the same argument errors at trace time) without running a kernel.
"""

from __future__ import annotations

import glob
import os
from typing import Optional, Tuple, Union

import torch

__all__ = ["paged_attention_v1", "paged_attention_v2", "flash_attn_varlen_func", "paged_decode",
           "context_attention_fwd", "check_errors", "library_path"]


def _find_library() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "_muh_torch_ops*.so")))
    if not found:
        raise ImportError(
            "muh.ops is not built: torch was not importable when muh was built. Install muh where "
            "torch is: `pip install --no-build-isolation ./python` (or configure the top-level "
            "CMake project with the Python that has torch).")
    return found[0]


library_path = _find_library()
if not hasattr(torch.ops.muh, "paged_decode"):  # loading twice would register the ops twice
    torch.ops.load_library(library_path)

_PARTITION_SIZE = 512  # vLLM's PARTITION_SIZE for the v2 scratch buffers' shapes

# paged_attention_v1/v2's fp8 kv_cache_dtype strings (muh/kv_quant.hpp's parse_kv_dtype) → the
# float8 dtype a cache may have besides torch.uint8.
_FP8_KV_CACHE_DTYPES = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn, "e4m3": torch.float8_e4m3fn,
                        "fp8_e5m2": torch.float8_e5m2, "e5m2": torch.float8_e5m2}


def _check_cache_dtypes(op, kv_cache_dtype, fp8, key_cache, value_cache, ref, ref_name, fp32_text,
                        names=("key_cache", "value_cache")):
    """The caches' dtype under kv_cache_dtype (fp8: its torch.float8 kind, None for 'auto'): 'auto'
    — ref's dtype (ref_name: "the query's", "key's"); fp8 — uint8 or that float8, and ref not
    float32 (fp32_text says why). names: the op's names of the two caches."""
    if fp8 is None:
        if key_cache.dtype != ref.dtype or value_cache.dtype != ref.dtype:
            raise NotImplementedError(f"muh.{op}: {names[0]}/{names[1]} dtype must be {ref_name} ({ref.dtype}) "
                                      f"with kv_cache_dtype='{kv_cache_dtype}' (an fp8 cache is uint8 or float8 "
                                      "with kv_cache_dtype 'fp8', 'fp8_e4m3' or 'fp8_e5m2')")
        return
    if ref.dtype == torch.float32:
        raise NotImplementedError(f"muh.{op}: {fp32_text}")
    for name, cache in zip(names, (key_cache, value_cache)):
        _check(cache.dtype in (torch.uint8, fp8), op, f"{name} must be uint8 or {fp8} with "
               f"kv_cache_dtype='{kv_cache_dtype}', got {cache.dtype}")


# ---- fake (meta) implementations: shapes for torch.compile, argument errors at trace time -------

def _check(cond: bool, op: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"muh.{op}: {msg}")


def _check_vllm(op: str, out, query, key_cache, value_cache, num_kv_heads, block_tables, seq_lens,
                block_size, alibi_slopes, kv_cache_dtype, blocksparse_vert_stride) -> None:
    if alibi_slopes is not None:  # ALiBi (muh/variant.hpp): fp32 [num_heads]
        _check(alibi_slopes.dim() == 1 and alibi_slopes.dtype == torch.float32
               and alibi_slopes.shape[0] == query.shape[1], op,
               f"alibi_slopes must be float32 [num_heads = {query.shape[1]}], got {alibi_slopes.dtype} "
               f"{tuple(alibi_slopes.shape)}")
    fp8 = _FP8_KV_CACHE_DTYPES.get(kv_cache_dtype)
    if fp8 is None and kv_cache_dtype not in ("auto", "same"):
        raise NotImplementedError(
            f"muh.{op}: kv_cache_dtype='{kv_cache_dtype}' is not supported (muh takes 'auto', 'fp8' "
            "(= 'fp8_e4m3'), 'fp8_e4m3' and 'fp8_e5m2')")
    if blocksparse_vert_stride > 1:
        raise NotImplementedError(
            f"muh.{op}: block-sparse attention (blocksparse_vert_stride={blocksparse_vert_stride}) "
            "is not supported; pass 0")
    _check(query.dim() == 3, op, f"query must be 3-D [num_seqs, num_heads, head_size], got shape {tuple(query.shape)}")
    _check(query.dtype in (torch.float16, torch.bfloat16, torch.float32), op,
           f"query must be float16, bfloat16 or float32, got {query.dtype}")
    _check(out.shape == query.shape, op, f"out must have query's shape {tuple(query.shape)}, got {tuple(out.shape)}")
    _check(out.dtype == query.dtype, op, f"out must be {query.dtype}, got {out.dtype}")
    _check(key_cache.dim() == 5, op, "key_cache must be 5-D [num_blocks, num_kv_heads, head_size/x, "
           f"block_size, x], got shape {tuple(key_cache.shape)}")
    _check(value_cache.dim() == 4, op, "value_cache must be 4-D [num_blocks, num_kv_heads, head_size, "
           f"block_size], got shape {tuple(value_cache.shape)}")
    _check_cache_dtypes(op, kv_cache_dtype, fp8, key_cache, value_cache, query, "the query's",
                        f"query is float32 with kv_cache_dtype='{kv_cache_dtype}': muh reads an fp8 KV cache "
                        "with a float16 or bfloat16 query only")
    _check(block_tables.dim() == 2 and block_tables.dtype == torch.int32, op,
           f"block_tables must be 2-D int32 [num_seqs, max_num_blocks_per_seq], got "
           f"{block_tables.dtype} {tuple(block_tables.shape)}")
    _check(seq_lens.dim() == 1 and seq_lens.dtype == torch.int32, op,
           f"seq_lens must be 1-D int32 [num_seqs], got {seq_lens.dtype} {tuple(seq_lens.shape)}")
    _check(num_kv_heads >= 1 and query.shape[1] % num_kv_heads == 0, op,
           f"num_kv_heads ({num_kv_heads}) must divide query's num_heads ({query.shape[1]})")


@torch.library.register_fake("muh::paged_attention_v1.tensor_scales")
@torch.library.register_fake("muh::paged_attention_v1")
def _paged_attention_v1_fake(out, query, key_cache, value_cache, num_kv_heads, scale, block_tables,
                             seq_lens, block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale,
                             v_scale, tp_rank, blocksparse_local_blocks, blocksparse_vert_stride,
                             blocksparse_block_size, blocksparse_head_sliding_step) -> None:
    _check_vllm("paged_attention_v1", out, query, key_cache, value_cache, num_kv_heads, block_tables,
                seq_lens, block_size, alibi_slopes, kv_cache_dtype, blocksparse_vert_stride)


@torch.library.register_fake("muh::paged_attention_v2.tensor_scales")
@torch.library.register_fake("muh::paged_attention_v2")
def _paged_attention_v2_fake(out, exp_sums, max_logits, tmp_out, query, key_cache, value_cache,
                             num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len,
                             alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank,
                             blocksparse_local_blocks, blocksparse_vert_stride, blocksparse_block_size,
                             blocksparse_head_sliding_step) -> None:
    _check_vllm("paged_attention_v2", out, query, key_cache, value_cache, num_kv_heads, block_tables,
                seq_lens, block_size, alibi_slopes, kv_cache_dtype, blocksparse_vert_stride)


@torch.library.register_fake("muh::flash_attn_varlen")
def _flash_attn_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            softmax_scale=None, causal=False, return_lse=False, window_left=-1,
                            window_right=-1, softcap=0.0, alibi_slopes=None, s_aux=None):
    op = "flash_attn_varlen_func"
    _check(q.dim() == 3, op, f"q must be 3-D [total_q, num_heads, head_dim], got shape {tuple(q.shape)}")
    _check(k.dim() == 3 and v.shape == k.shape, op,
           f"k and v must be 3-D [total_k, num_kv_heads, head_dim] of one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    _check(k.dtype == q.dtype and v.dtype == q.dtype, op, f"k and v must be {q.dtype}, got {k.dtype} and {v.dtype}")
    _check(cu_seqlens_q.dtype == torch.int32 and cu_seqlens_k.dtype == torch.int32, op,
           "cu_seqlens_q and cu_seqlens_k must be int32")
    out = q.new_empty(q.shape)
    lse = (q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32) if return_lse
           else q.new_empty((0,), dtype=torch.float32))
    return out, lse


@torch.library.register_fake("muh::paged_decode")
def _paged_decode_fake(q, k_cache, v_cache, block_table, seq_lens, max_seq_len=-1, softmax_scale=None,
                       return_lse=False, num_splits=0):
    op = "paged_decode"
    _check(q.dim() == 3, op, f"q must be 3-D [num_seqs, num_q_heads, head_dim], got shape {tuple(q.shape)}")
    _check(k_cache.dim() == 4 and v_cache.shape == k_cache.shape, op,
           "k_cache and v_cache must be 4-D [num_pages, page_size, num_kv_heads, head_dim] (NHD) of one "
           f"shape, got {tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    _check(block_table.dtype == torch.int32 and seq_lens.dtype == torch.int32, op,
           "block_table and seq_lens must be int32")
    out = q.new_empty(q.shape)
    lse = (q.new_empty((q.shape[0], q.shape[1]), dtype=torch.float32) if return_lse
           else q.new_empty((0,), dtype=torch.float32))
    return out, lse


_FP8_TORCH_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def _check_descale(op, name, t):
    """flash_attn_varlen_func's k_descale / v_descale: one value (a 0-dim or 1-element tensor, or
    one value expanded: stride 0 in every dim of size > 1, as vLLM's layer._k_scale.expand(...),
    whose size-1 dims keep their strides)."""
    if t is None:
        return
    if t.numel() > 1 and any(s != 0 for s, n in zip(t.stride(), t.shape) if n > 1):
        raise NotImplementedError(f"muh.{op}: {name} of shape {tuple(t.shape)} holds more than one value: muh "
                                  "takes per-tensor descales only (one value: a 0-dim or 1-element tensor, a "
                                  "float, or one value expanded, as vLLM's layer._k_scale.expand(...))")
    _check(t.numel() >= 1, op, f"{name} must hold one value (a 0-dim or 1-element tensor), got shape "
           f"{tuple(t.shape)}")


@torch.library.register_fake("muh::paged_prefill")
def _paged_prefill_fake(out, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, max_seqlen_q,
                        max_seqlen_k, softmax_scale=None, causal=False, return_lse=False, window_left=-1,
                        window_right=-1, softcap=0.0, alibi_slopes=None, s_aux=None, k_descale=None,
                        v_descale=None, cu_seqlens_q_host=None, seqused_k_host=None):
    op = "flash_attn_varlen_func"
    _check(q.dim() == 3, op, f"q must be 3-D [total_q, num_heads, head_dim], got shape {tuple(q.shape)}")
    _check(out.shape == q.shape, op, f"out must have q's shape {tuple(q.shape)}, got {tuple(out.shape)}")
    if k_cache.dtype in _FP8_TORCH_DTYPES:  # an fp8 cache (python/src/torch_ops.cpp, paged_prefill)
        _check(v_cache.dtype == k_cache.dtype, op, f"v (the value cache) must be {k_cache.dtype} as k (the key "
               f"cache) is (one fp8 kind for both caches), got {v_cache.dtype}")
        if q.dtype == torch.float32:
            raise NotImplementedError(f"muh.{op}: q is float32 with an fp8 KV cache: muh reads an fp8 KV cache "
                                      "with a float16 or bfloat16 query only")
        _check_descale(op, "k_descale", k_descale)
        _check_descale(op, "v_descale", v_descale)
    _check(k_cache.dim() in (4, 5), op, "k (the key cache) must be 4-D [num_pages, page_size, num_kv_heads, "
           f"head_dim] (NHD) or 5-D in vLLM's layout, got shape {tuple(k_cache.shape)}")
    _check(block_table.dtype == torch.int32 and seqused_k.dtype == torch.int32 and cu_seqlens_q.dtype == torch.int32,
           op, "cu_seqlens_q, seqused_k and block_table must be int32")
    return (q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32) if return_lse
            else q.new_empty((0,), dtype=torch.float32))


@torch.library.register_fake("muh::context_attention_fwd.tensor_scales")
@torch.library.register_fake("muh::context_attention_fwd")
def _context_attention_fwd_fake(q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc, b_start_loc, b_seq_len,
                                b_ctx_len, max_input_len, k_scale=1.0, v_scale=1.0, alibi_slopes=None,
                                sliding_window=None, sm_scale=None) -> None:
    op = "context_attention_fwd"
    fp8 = _FP8_KV_CACHE_DTYPES.get(kv_cache_dtype)
    if fp8 is None and kv_cache_dtype not in ("auto", "same"):
        raise NotImplementedError(
            f"muh.{op}: kv_cache_dtype='{kv_cache_dtype}' is not supported (muh takes 'auto', 'fp8' "
            "(= 'fp8_e4m3'), 'fp8_e4m3' and 'fp8_e5m2')")
    _check(sliding_window is None or sliding_window >= 0, op,
           f"sliding_window must be >= 0 (None or 0: no window), got {sliding_window}")
    if alibi_slopes is not None:  # ALiBi (muh/variant.hpp): fp32 [num_heads]
        _check(alibi_slopes.dim() == 1 and alibi_slopes.dtype == torch.float32
               and alibi_slopes.shape[0] == q.shape[1], op,
               f"alibi_slopes must be float32 [num_heads = {q.shape[1]}], got {alibi_slopes.dtype} "
               f"{tuple(alibi_slopes.shape)}")
    _check(o.shape == q.shape, op, f"o must have q's shape {tuple(q.shape)}, got {tuple(o.shape)}")
    _check(k_cache.dim() == 5, op, "k_cache must be 5-D [num_blocks, num_kv_heads, head_size/x, block_size, x] "
           f"(vLLM's layout), got shape {tuple(k_cache.shape)}")
    _check_cache_dtypes(op, kv_cache_dtype, fp8, k_cache, v_cache, q, "q's",
                        f"q is float32 with kv_cache_dtype='{kv_cache_dtype}': muh reads an fp8 KV cache with a "
                        "float16 or bfloat16 query only", names=("k_cache", "v_cache"))


# ---- Python entry points -------------------------------------------------------------------------

# vLLM 0.6.3's vllm/_custom_ops.py signatures, name for name and default for default (the seed's
# deployment); k_scale / v_scale are floats there and 0-dim tensors from vLLM 0.7 on: both are
# taken (torch.ops.muh picks the overload that matches) and, with kv_cache_dtype 'auto', unused.
Scale = Union[float, torch.Tensor]


def paged_attention_v1(out: torch.Tensor, query: torch.Tensor, key_cache: torch.Tensor,
                       value_cache: torch.Tensor, num_kv_heads: int, scale: float,
                       block_tables: torch.Tensor, seq_lens: torch.Tensor, block_size: int,
                       max_seq_len: int, alibi_slopes: Optional[torch.Tensor], kv_cache_dtype: str,
                       k_scale: Scale, v_scale: Scale, tp_rank: int = 0,
                       blocksparse_local_blocks: int = 0, blocksparse_vert_stride: int = 0,
                       blocksparse_block_size: int = 64, blocksparse_head_sliding_step: int = 0) -> None:
    """vLLM's ``_custom_ops.paged_attention_v1``: writes ``out`` [num_seqs, num_heads, head_size]."""
    torch.ops.muh.paged_attention_v1(
        out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size,
        max_seq_len, alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank,
        blocksparse_local_blocks, blocksparse_vert_stride, blocksparse_block_size,
        blocksparse_head_sliding_step)


def paged_attention_v2(out: torch.Tensor, exp_sum: torch.Tensor, max_logits: torch.Tensor,
                       tmp_out: torch.Tensor, query: torch.Tensor, key_cache: torch.Tensor,
                       value_cache: torch.Tensor, num_kv_heads: int, scale: float,
                       block_tables: torch.Tensor, seq_lens: torch.Tensor, block_size: int,
                       max_seq_len: int, alibi_slopes: Optional[torch.Tensor], kv_cache_dtype: str,
                       k_scale: Scale, v_scale: Scale, tp_rank: int = 0,
                       blocksparse_local_blocks: int = 0, blocksparse_vert_stride: int = 0,
                       blocksparse_block_size: int = 64, blocksparse_head_sliding_step: int = 0) -> None:
    """vLLM's ``_custom_ops.paged_attention_v2``. muh's plan picks the split count; ``tmp_out``
    serves as its workspace when large enough (exp_sum / max_logits are left untouched)."""
    torch.ops.muh.paged_attention_v2(
        out, exp_sum, max_logits, tmp_out, query, key_cache, value_cache, num_kv_heads, scale,
        block_tables, seq_lens, block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale,
        v_scale, tp_rank, blocksparse_local_blocks, blocksparse_vert_stride, blocksparse_block_size,
        blocksparse_head_sliding_step)


def _refuse(op: str, cond: bool, what: str) -> None:
    if cond:
        raise NotImplementedError(f"{op}: {what}")


def flash_attn_varlen_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           cu_seqlens_q: torch.Tensor, cu_seqlens_k: Optional[torch.Tensor],
                           max_seqlen_q: int, max_seqlen_k: int,
                           dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                           causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                           softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None,
                           deterministic: bool = False, return_attn_probs: bool = False,
                           block_table: Optional[torch.Tensor] = None, *,
                           seqused_k: Optional[torch.Tensor] = None, out: Optional[torch.Tensor] = None,
                           s_aux: Optional[torch.Tensor] = None, k_descale: Optional[Scale] = None,
                           v_descale: Optional[Scale] = None, cu_seqlens_q_host: Optional[torch.Tensor] = None,
                           seqused_k_host: Optional[torch.Tensor] = None
                           ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """FlashAttention's ``flash_attn_varlen_func``: its positional order, defaults and return
    convention. q [total_q, num_heads, head_dim], k/v [total_k, num_kv_heads, head_dim] (GQA when
    num_kv_heads divides num_heads), cu_seqlens int32 [batch + 1]. Causal masks are bottom-right
    aligned, as FlashAttention's. Returns out; with return_attn_probs, (out, softmax_lse, S_dmask)
    as FlashAttention does at dropout_p 0: softmax_lse [num_heads, total_q] fp32 and S_dmask an
    empty tensor (FlashAttention fills it only under dropout).

    Paged K/V (``block_table`` int32 [batch, max_blocks_per_seq]): k and v are the caches, NHD
    [num_pages, page_size, num_kv_heads, head_dim] as FlashAttention's, or vLLM's 5-D key / 4-D
    value layout; sequence b's keys are 0 .. seqused_k[b] − 1 (the cached prefix and the chunk's
    tokens, already written to the cache) — ``seqused_k`` (int32 [batch], vLLM V1's argument) or,
    as FlashAttention 2 takes it, the lengths of ``cu_seqlens_k``. ``out``, keyword-only as in
    vLLM's fork: the tensor to write (q's shape and dtype); else a new one. The signature is
    FlashAttention's, defaults included: a paged call that gives seqused_k passes
    cu_seqlens_k=None.

    An fp8 paged cache: k and v of dtype torch.float8_e4m3fn or torch.float8_e5m2 (vLLM views its
    uint8 cache so), in either layout (vLLM's key cache then [num_pages, num_kv_heads,
    head_dim/16, page_size, 16], page_size a multiple of 16), read as code * k_descale /
    code * v_descale — keyword-only as in vLLM's fork, each None (1.0), a float or a tensor of one
    value (0-dim, one element, or one value expanded, as vLLM's ``layer._k_scale.expand(...)``;
    distinct values per sequence or head raise NotImplementedError: muh's scales are per tensor).
    A CUDA tensor is read to the host (a sync per call, refused under CUDA-graph capture). q is
    float16 or bfloat16; the attention variants below apply. For a cache of q's dtype the descales are not
    read, as FlashAttention 3 applies them to fp8 inputs only.

    A mixed batch (a paged call of decodes, verification rows and chunks, as vLLM V1 makes one
    per step): ``cu_seqlens_q_host`` and ``seqused_k_host``, keyword-only, the CPU int32 copies
    of cu_seqlens_q and seqused_k an engine keeps (vLLM's ``query_start_loc_cpu`` and
    ``seq_lens_cpu``), let muh plan the batch as a whole (mixed_plan.hpp): the q_len-1 rows, and
    rows of 2–16 tokens leading with them, through the paged decode kernel where its model says
    so, the rest through the paged prefill. Without them (or with a variant, or
    return_attn_probs) the call is one paged prefill. They must describe the device arrays of the
    call; a device array that differs is flagged by the kernels' input guard.

    Attention variants (muh/variant.hpp), as FlashAttention and vLLM's fork name them:
    ``window_size=(left, right)`` a sliding window (-1 = unbounded; causal caps right at 0),
    ``softcap`` logit soft-capping (0.0 = off), ``alibi_slopes`` fp32 [num_heads] (FlashAttention's
    bias -slope * |i + seqlen_k - seqlen_q - j|), ``s_aux`` (keyword-only, vLLM's fork) the
    attention sinks, fp32 [num_heads]: a logit per head added to the softmax's denominator. Bad
    values raise ValueError naming the argument.

    muh computes the inference forward only: dropout_p != 0 raises NotImplementedError;
    deterministic is accepted (it concerns FlashAttention's backward; muh's forward is run-to-run
    bitwise reproducible)."""
    op = "muh.flash_attn_varlen_func"
    _refuse(op, dropout_p != 0.0, f"dropout_p={dropout_p} is not supported (inference only: pass 0.0)")
    window = tuple(window_size)
    if len(window) != 2:
        raise ValueError(f"{op}: window_size must be a pair (left, right), got {window_size!r}")
    variant = (int(window[0]), int(window[1]), float(softcap), alibi_slopes, s_aux)
    if block_table is None:
        _refuse(op, seqused_k is not None,
                "seqused_k without block_table (contiguous k/v with unused tail rows) is not supported; "
                "pass cu_seqlens_k")
        _refuse(op, k.dtype in _FP8_TORCH_DTYPES or v.dtype in _FP8_TORCH_DTYPES,
                f"k/v of dtype {k.dtype}/{v.dtype}: muh reads fp8 K/V from a paged cache only (pass block_table)")
        if cu_seqlens_q_host is not None or seqused_k_host is not None:
            raise ValueError(f"{op}: cu_seqlens_q_host / seqused_k_host are for a paged call (pass block_table)")
        if cu_seqlens_k is None:
            raise TypeError(f"{op}: cu_seqlens_k is required unless block_table and seqused_k are given")
        res, lse = torch.ops.muh.flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                   max_seqlen_k, softmax_scale, bool(causal),
                                                   bool(return_attn_probs), *variant)
        if out is not None:
            _check(out.shape == q.shape and out.dtype == q.dtype, "flash_attn_varlen_func",
                   f"out must be {q.dtype} of q's shape {tuple(q.shape)}, got {out.dtype} {tuple(out.shape)}")
            out.copy_(res)
            res = out
    else:
        if seqused_k is None:
            if cu_seqlens_k is None:
                raise TypeError(f"{op}: a paged call needs seqused_k (or cu_seqlens_k, whose lengths it takes)")
            seqused_k = cu_seqlens_k[1:] - cu_seqlens_k[:-1]
        res = out if out is not None else torch.empty_like(q)
        # The op takes the descales as tensors (None = 1.0): a float becomes a CPU one (no sync).
        descales = [d if d is None or isinstance(d, torch.Tensor) else torch.tensor(float(d), dtype=torch.float32)
                    for d in (k_descale, v_descale)]
        lse = torch.ops.muh.paged_prefill(res, q, k, v, cu_seqlens_q, seqused_k, block_table, max_seqlen_q,
                                          max_seqlen_k, softmax_scale, bool(causal), bool(return_attn_probs),
                                          *variant, *descales, cu_seqlens_q_host, seqused_k_host)
    if not return_attn_probs:
        return res
    return res, lse, q.new_empty((0,))


def context_attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                          kv_cache_dtype: str, k_cache: torch.Tensor, v_cache: torch.Tensor,
                          b_loc: torch.Tensor, b_start_loc: torch.Tensor, b_seq_len: torch.Tensor,
                          b_ctx_len: torch.Tensor, max_input_len: int, k_scale: Scale = 1.0,
                          v_scale: Scale = 1.0, alibi_slopes: Optional[torch.Tensor] = None,
                          sliding_window: Optional[int] = None, sm_scale: Optional[float] = None) -> None:
    """vLLM 0.6.3's ``context_attention_fwd`` (``vllm/attention/ops/prefix_prefill.py``): chunked
    prefill over a cached prefix. q/k/v [num_tokens, heads, head_size] are the chunks' new tokens
    (sequence b's at b_start_loc[b] .., b_seq_len[b] − b_ctx_len[b] of them), k_cache / v_cache
    vLLM's 5-D / 4-D cache holding the prefixes, b_loc the block table, b_ctx_len the prefix
    lengths; writes o. sm_scale (a later vLLM's keyword) defaults to 1/sqrt(head_size).
    kv_cache_dtype as paged_attention_v1's: 'auto' (a cache of q's dtype; k_scale / v_scale unused)
    or 'fp8' (= 'fp8_e4m3'), 'fp8_e4m3', 'fp8_e5m2': uint8 (or the kind's float8) caches of codes,
    x = 16, read as code * k_scale / code * v_scale — only the prefix comes from the cache, the
    chunk's k/v are q's dtype. The scales are floats (vLLM 0.6.3) or one-element tensors (later
    vLLM; a CUDA one is read to the host: a sync per call, refused under CUDA-graph capture).
    alibi_slopes (fp32 [num_heads]) and sliding_window (vLLM's: a key is seen while the query's
    position minus its own is < sliding_window) are the attention variants (muh/variant.hpp), with
    'auto' only: with an fp8 cache they raise NotImplementedError."""
    args = (q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc, b_start_loc, b_seq_len, b_ctx_len, max_input_len)
    if isinstance(k_scale, torch.Tensor) or isinstance(v_scale, torch.Tensor):
        # Later vLLM's tensor scales: the .tensor_scales overload (a float beside one becomes a CPU tensor).
        k_scale, v_scale = (s if isinstance(s, torch.Tensor) else torch.tensor(float(s), dtype=torch.float32)
                            for s in (k_scale, v_scale))
        torch.ops.muh.context_attention_fwd.tensor_scales(*args, k_scale, v_scale, alibi_slopes, sliding_window,
                                                          sm_scale)
    else:
        torch.ops.muh.context_attention_fwd.default(*args, float(k_scale), float(v_scale), alibi_slopes,
                                                    sliding_window, sm_scale)


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 block_table: torch.Tensor, seq_lens: torch.Tensor, max_seq_len: Optional[int] = None,
                 softmax_scale: Optional[float] = None, return_lse: bool = False,
                 num_splits: int = 0) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Decode attention over an NHD paged cache, planned by muh.

    q [num_seqs, num_q_heads, head_dim]; k_cache / v_cache [num_pages, page_size, num_kv_heads,
    head_dim]; block_table int32 [num_seqs, max_blocks_per_seq]; seq_lens int32 [num_seqs].
    max_seq_len: a host-side bound on seq_lens that sizes the plan (default: the block table's
    capacity, max_blocks_per_seq × page_size). num_splits: 0 lets muh's plan choose V1/V2 and the
    split count; n > 0 forces n partitions. A sequence of length 0 gives zeros (lse −inf).
    Returns out, or (out, lse [num_seqs, num_q_heads] fp32)."""
    out, lse = torch.ops.muh.paged_decode(q, k_cache, v_cache, block_table, seq_lens,
                                          -1 if max_seq_len is None else max_seq_len,
                                          softmax_scale, return_lse, num_splits)
    return (out, lse) if return_lse else out


# ---- Cache writes and the state merge (python/src/torch_ops_cache.cpp) ---------------------------
# vLLM's vllm/_custom_ops.py signatures, name for name: reshape_and_cache (vLLM's 5-D key / 4-D
# value cache), reshape_and_cache_flash (NHD) and merge_attn_states. torch.ops.muh's schemas are
# torch.ops._C's (merge_attn_states there takes output_lse second).

__all__ += ["reshape_and_cache", "reshape_and_cache_flash", "merge_attn_states"]


def _check_cache_write(op, key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, vllm_layout):
    fp8 = _FP8_KV_CACHE_DTYPES.get(kv_cache_dtype)
    if fp8 is None and kv_cache_dtype not in ("auto", "same"):
        raise NotImplementedError(
            f"muh.{op}: kv_cache_dtype='{kv_cache_dtype}' is not supported (muh takes 'auto', 'fp8' "
            "(= 'fp8_e4m3'), 'fp8_e4m3' and 'fp8_e5m2')")
    _check(key.dim() == 3, op, f"key must be 3-D [num_tokens, num_kv_heads, head_size], got shape {tuple(key.shape)}")
    _check(value.shape == key.shape, op, f"value must have key's shape {tuple(key.shape)}, got {tuple(value.shape)}")
    _check(key.dtype in (torch.float16, torch.bfloat16, torch.float32), op,
           f"key must be float16, bfloat16 or float32, got {key.dtype}")
    _check_cache_dtypes(op, kv_cache_dtype, fp8, key_cache, value_cache, key, "key's",
                        f"key is float32 with kv_cache_dtype='{kv_cache_dtype}': muh writes an fp8 cache from "
                        "float16 or bfloat16 keys only")
    _check(slot_mapping.dim() == 1 and slot_mapping.dtype == torch.int64, op,
           f"slot_mapping must be 1-D int64 [num_tokens], got {slot_mapping.dtype} {tuple(slot_mapping.shape)}")
    if vllm_layout:
        _check(key_cache.dim() == 5, op, "key_cache must be 5-D [num_blocks, num_kv_heads, head_size/x, block_size, "
               f"x], got shape {tuple(key_cache.shape)}")
        _check(value_cache.dim() == 4, op, "value_cache must be 4-D [num_blocks, num_kv_heads, head_size, "
               f"block_size], got shape {tuple(value_cache.shape)}")
    else:
        _check(key_cache.dim() == 4 and value_cache.shape == key_cache.shape, op,
               "key_cache and value_cache must be 4-D [num_blocks, block_size, num_kv_heads, head_size] (NHD) of "
               f"one shape, got {tuple(key_cache.shape)} and {tuple(value_cache.shape)}")


@torch.library.register_fake("muh::reshape_and_cache.tensor_scales")
@torch.library.register_fake("muh::reshape_and_cache")
def _reshape_and_cache_fake(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale,
                            v_scale) -> None:
    _check_cache_write("reshape_and_cache", key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, True)


@torch.library.register_fake("muh::reshape_and_cache_flash.tensor_scales")
@torch.library.register_fake("muh::reshape_and_cache_flash")
def _reshape_and_cache_flash_fake(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale,
                                  v_scale) -> None:
    _check_cache_write("reshape_and_cache_flash", key, value, key_cache, value_cache, slot_mapping,
                       kv_cache_dtype, False)


@torch.library.register_fake("muh::merge_attn_states")
def _merge_attn_states_fake(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse) -> None:
    op = "merge_attn_states"
    _check(output.dim() == 3, op, f"output must be 3-D [num_tokens, num_heads, head_size], got {tuple(output.shape)}")
    _check(prefix_output.shape == output.shape and suffix_output.shape == output.shape, op,
           "prefix_output and suffix_output must have output's shape")
    want = (output.shape[1], output.shape[0])
    for name, lse in (("prefix_lse", prefix_lse), ("suffix_lse", suffix_lse), ("output_lse", output_lse)):
        if lse is not None:
            _check(tuple(lse.shape) == want and lse.dtype == torch.float32, op,
                   f"{name} must be float32 [num_heads, num_tokens] = {want}, got {lse.dtype} {tuple(lse.shape)}")


def reshape_and_cache(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                      value_cache: torch.Tensor, slot_mapping: torch.Tensor, kv_cache_dtype: str,
                      k_scale: Scale, v_scale: Scale) -> None:
    """vLLM's ``_custom_ops.reshape_and_cache``: key/value [num_tokens, num_kv_heads, head_size]
    (strided views such as slices of a fused qkv buffer are fine) written into key_cache
    [num_blocks, num_kv_heads, head_size/x, block_size, x] and value_cache [num_blocks,
    num_kv_heads, head_size, block_size] at slot_mapping's slots (int64, slot = block · block_size
    + offset; −1 = padding, skipped). kv_cache_dtype 'auto' (the caches hold key's dtype; k_scale /
    v_scale, floats or 0-dim tensors, are then unread) or 'fp8' (= 'fp8_e4m3'), 'fp8_e4m3',
    'fp8_e5m2': uint8 (or float8) caches of codes of x / scale (x = 16), rounded to nearest even and
    saturated as vLLM's. A slot outside the cache is skipped, never written."""
    torch.ops.muh.reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
                                    k_scale, v_scale)


def reshape_and_cache_flash(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                            value_cache: torch.Tensor, slot_mapping: torch.Tensor, kv_cache_dtype: str,
                            k_scale: Scale, v_scale: Scale) -> None:
    """vLLM's ``_custom_ops.reshape_and_cache_flash``: as :func:`reshape_and_cache` into NHD caches
    [num_blocks, block_size, num_kv_heads, head_size] (packed within a block; the block stride is
    free, as in vLLM V1's [num_blocks, 2, ...] cache). num_tokens is slot_mapping's length, which
    may be less than key's (CUDA-graph padding)."""
    torch.ops.muh.reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
                                          k_scale, v_scale)


def merge_attn_states(output: torch.Tensor, prefix_output: torch.Tensor, prefix_lse: torch.Tensor,
                      suffix_output: torch.Tensor, suffix_lse: torch.Tensor,
                      output_lse: Optional[torch.Tensor] = None) -> None:
    """vLLM's ``merge_attn_states``: output [num_tokens, num_heads, head_size] = the merge of the
    prefix and suffix partials by their lse (float32 [num_heads, num_tokens]); output_lse, if
    given, receives the merged lse. An lse of +inf counts as −inf (empty); both empty gives
    prefix_output and lse −inf, as vLLM's CUDA kernel."""
    torch.ops.muh.merge_attn_states(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse)


def check_errors() -> None:
    """Synchronises the current CUDA stream and raises ValueError naming every bad device-side
    input (block_table, seq_lens, cu_seqlens_q/k, max_seqlen_q/k) that muh ops on the current
    device were given since the last check; returns None when there was none. Not inside CUDA-graph
    capture (it synchronises); a replayed graph's errors are raised by the next call of it."""
    torch.ops.muh.check_input_errors()
