"""A decode step written against vLLM's op signatures, as a vLLM engine calls them: the KV cache
allocated and split the way vLLM's PagedAttention does ([2, num_blocks, block_size * kv_heads *
head_size], viewed as key [blocks, kv_heads, d/x, block, x] and value [blocks, kv_heads, d, block]),
V1 or V2 chosen by vLLM's heuristic, scratch buffers for V2, and every call through
``torch.ops._C``. Nothing here knows about muh: test_vllm_dropin.py substitutes torch.ops.muh
for torch.ops._C and runs this file's code unchanged.

Run on its own it needs vLLM's compiled ops (``import vllm._C``).
"""

import math
from typing import List, Optional, Tuple

import torch

PARTITION_SIZE = 512  # vLLM's v2 partition


def get_kv_cache_shape(num_blocks: int, block_size: int, num_kv_heads: int, head_size: int) -> Tuple[int, ...]:
    return (2, num_blocks, block_size * num_kv_heads * head_size)


def split_kv_cache(kv_cache: torch.Tensor, num_kv_heads: int, head_size: int):
    x = 16 // kv_cache.element_size()
    num_blocks = kv_cache.shape[1]
    key_cache = kv_cache[0].view(num_blocks, num_kv_heads, head_size // x, -1, x)
    value_cache = kv_cache[1].view(num_blocks, num_kv_heads, head_size, -1)
    return key_cache, value_cache


def write_to_paged_cache(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                         value_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """What vLLM's reshape_and_cache does, in plain torch: token t goes to slot_mapping[t]."""
    block_size = value_cache.shape[3]
    x = key_cache.shape[4]
    blocks = slot_mapping // block_size
    offsets = slot_mapping % block_size
    n, h, d = key.shape
    key_cache[blocks, :, :, offsets, :] = key.view(n, h, d // x, x)
    value_cache[blocks, :, :, offsets] = value


def paged_attention_v1(out, query, key_cache, value_cache, num_kv_heads, scale, block_tables,
                       seq_lens, block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale,
                       v_scale, tp_rank=0, blocksparse_local_blocks=0, blocksparse_vert_stride=0,
                       blocksparse_block_size=64, blocksparse_head_sliding_step=0) -> None:
    torch.ops._C.paged_attention_v1(
        out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size,
        max_seq_len, alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank,
        blocksparse_local_blocks, blocksparse_vert_stride, blocksparse_block_size,
        blocksparse_head_sliding_step)


def paged_attention_v2(out, exp_sum, max_logits, tmp_out, query, key_cache, value_cache,
                       num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len,
                       alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank=0,
                       blocksparse_local_blocks=0, blocksparse_vert_stride=0,
                       blocksparse_block_size=64, blocksparse_head_sliding_step=0) -> None:
    torch.ops._C.paged_attention_v2(
        out, exp_sum, max_logits, tmp_out, query, key_cache, value_cache, num_kv_heads, scale,
        block_tables, seq_lens, block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale,
        v_scale, tp_rank, blocksparse_local_blocks, blocksparse_vert_stride,
        blocksparse_block_size, blocksparse_head_sliding_step)


def forward_decode(query, key_cache, value_cache, block_tables, seq_lens, max_seq_len: int,
                   kv_cache_dtype: str, num_kv_heads: int, scale: float,
                   alibi_slopes: Optional[torch.Tensor], k_scale, v_scale,
                   force_version: Optional[int] = None) -> torch.Tensor:
    output = torch.empty_like(query)
    block_size = value_cache.shape[3]
    num_seqs, num_heads, head_size = query.shape
    max_num_partitions = (max_seq_len + PARTITION_SIZE - 1) // PARTITION_SIZE
    # vLLM's heuristic: V1 when one partition suffices or the batch alone fills the GPU.
    use_v1 = max_seq_len <= 8192 and (max_num_partitions == 1 or num_seqs * num_heads > 512)
    if force_version is not None:
        use_v1 = force_version == 1
    if use_v1:
        paged_attention_v1(output, query, key_cache, value_cache, num_kv_heads, scale, block_tables,
                           seq_lens, block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale,
                           v_scale)
    else:
        tmp_output = torch.empty(size=(num_seqs, num_heads, max_num_partitions, head_size),
                                 dtype=output.dtype, device=output.device)
        exp_sums = torch.empty(size=(num_seqs, num_heads, max_num_partitions), dtype=torch.float32,
                               device=output.device)
        max_logits = torch.empty_like(exp_sums)
        paged_attention_v2(output, exp_sums, max_logits, tmp_output, query, key_cache, value_cache,
                           num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len,
                           alibi_slopes, kv_cache_dtype, k_scale, v_scale)
    return output


def decode_step(seq_lens_list: List[int], num_heads: int, num_kv_heads: int, head_size: int,
                block_size: int = 16, dtype=torch.bfloat16, force_version: Optional[int] = None,
                seed: int = 0, float_scales: bool = False):
    """Fills a vLLM-shaped cache for the given sequences and runs one decode step. Returns
    (output, query, keys, values) with keys/values the dense per-sequence K/V written.
    float_scales: k_scale / v_scale as vLLM 0.6.3 passes them (Python floats, layer._k_scale),
    else as vLLM 0.7+ does (0-dim fp32 tensors)."""
    torch.manual_seed(seed)
    dev = "cuda"
    blocks_per_seq = [max(1, math.ceil(n / block_size)) for n in seq_lens_list]
    num_blocks = sum(blocks_per_seq) + 4
    kv_cache = torch.zeros(get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size),
                           dtype=dtype, device=dev)
    key_cache, value_cache = split_kv_cache(kv_cache, num_kv_heads, head_size)
    free = torch.randperm(num_blocks, device=dev)
    max_blocks = max(blocks_per_seq)
    block_tables = torch.zeros(len(seq_lens_list), max_blocks, dtype=torch.int32, device=dev)
    keys, values, used = [], [], 0
    for i, n in enumerate(seq_lens_list):
        block_tables[i, :blocks_per_seq[i]] = free[used:used + blocks_per_seq[i]].to(torch.int32)
        used += blocks_per_seq[i]
        k = torch.randn(n, num_kv_heads, head_size, device=dev, dtype=dtype)
        v = torch.randn(n, num_kv_heads, head_size, device=dev, dtype=dtype)
        pos = torch.arange(n, device=dev)
        slots = block_tables[i, pos // block_size].long() * block_size + pos % block_size
        write_to_paged_cache(k, v, key_cache, value_cache, slots)
        keys.append(k)
        values.append(v)
    query = torch.randn(len(seq_lens_list), num_heads, head_size, device=dev, dtype=dtype)
    seq_lens = torch.tensor(seq_lens_list, dtype=torch.int32, device=dev)
    if float_scales:
        k_scale = v_scale = 1.0
    else:
        k_scale = torch.tensor(1.0, dtype=torch.float32, device=dev)  # vLLM's layer._k_scale
        v_scale = torch.tensor(1.0, dtype=torch.float32, device=dev)
    out = forward_decode(query, key_cache, value_cache, block_tables, seq_lens, max(seq_lens_list),
                         "auto", num_kv_heads, 1.0 / math.sqrt(head_size), None, k_scale, v_scale,
                         force_version)
    return out, query, keys, values


if __name__ == "__main__":
    import vllm._C  # noqa: F401  (registers torch.ops._C)
    out, *_ = decode_step([1, 100, 3000], 32, 8, 128)
    print(out.shape)
