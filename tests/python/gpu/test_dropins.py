"""Each drop-in called positionally exactly as its original's callers call it, and muh's lack of
a backward: an input that requires grad raises instead of a silent missing gradient.

* FlashAttention's flash_attn_varlen_func: as flash-attention's tests/test_flash_attn.py calls it
  (dropout_p positional, the rest by keyword, return_attn_probs=True → (out, lse, S_dmask)), and
  with every argument positional up to causal (the call the issue found muh misreading).
* vLLM 0.6.3's paged_attention_v1/v2: as its tests/kernels/test_attention.py and
  PagedAttention.forward_decode call vllm._custom_ops (float k_scale / v_scale).
"""

import math

import pytest

from gpu_helpers import PagedBatch, VarlenBatch, assert_close_to_reference, ops, pick, torch


def _varlen(seed=3):
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    return VarlenBatch((37, 100, 1), (37, 160, 9), 8, 2, hd, dtype, seed=seed)


def test_flash_attn_as_flash_attentions_own_test_calls_it():
    b = _varlen()
    q_unpad, k_unpad, v_unpad = b.q, b.k, b.v
    cu_seqlens_q, cu_seqlens_k = b.cu_q, b.cu_k
    max_seqlen_q, max_seqlen_k = max(b.q_lens), max(b.k_lens)
    dropout_p, causal, window_size, softcap, alibi_slopes, deterministic = 0.0, True, (-1, -1), 0.0, None, False
    out_unpad, sm_lse, S_dmask = ops.flash_attn_varlen_func(
        q_unpad, k_unpad, v_unpad, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
        causal=causal, window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes,
        deterministic=deterministic, return_attn_probs=True)
    ref32, naive, lse_ref = b.reference(b.head_dim ** -0.5, True)
    assert_close_to_reference(out_unpad, ref32, naive, "flash_attn_varlen_func (FA's test call)")
    assert sm_lse.shape == (8, b.q.shape[0]) and sm_lse.dtype == torch.float32
    torch.testing.assert_close(sm_lse, lse_ref, atol=2e-3, rtol=1e-3)
    assert S_dmask.numel() == 0  # FlashAttention returns an empty S_dmask at dropout_p 0


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_all_positional(causal):
    b = _varlen(seed=4)
    scale = 0.07
    out = ops.flash_attn_varlen_func(b.q, b.k, b.v, b.cu_q, b.cu_k, max(b.q_lens), max(b.k_lens),
                                     0.0, scale, causal, (-1, -1), 0.0, None, False, False, None)
    assert isinstance(out, torch.Tensor)  # FlashAttention returns out alone by default
    ref32, naive, _ = b.reference(scale, causal)
    assert_close_to_reference(out, ref32, naive, f"flash_attn_varlen_func positional causal={causal}")


def test_flash_attn_causal_window_is_causal():
    # FlashAttention sets window_size[1] = 0 under causal: (-1, 0) is the causal mask itself.
    b = _varlen(seed=5)
    out = ops.flash_attn_varlen_func(b.q, b.k, b.v, b.cu_q, b.cu_k, max(b.q_lens), max(b.k_lens),
                                     causal=True, window_size=(-1, 0))
    ref32, naive, _ = b.reference(b.head_dim ** -0.5, True)
    assert_close_to_reference(out, ref32, naive, "flash_attn_varlen_func causal window (-1, 0)")


# ---- vLLM 0.6.3 ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vllm_cache():
    dtype = torch.float16
    hd = pick(dtype, (128, 64, 256))
    return PagedBatch((1, 300, 1100), 16, 4, hd, 16, dtype, "vllm", seed=31)


def test_paged_attention_v1_as_vllm_063_test_attention_calls_it(vllm_cache):
    b = vllm_cache
    output = torch.empty_like(b.q)
    query, key_cache, value_cache = b.q, b.k_cache, b.v_cache
    num_kv_heads, scale = 4, 1.0 / math.sqrt(b.head_dim)
    block_tables, seq_lens, block_size, max_seq_len = b.block_table, b.seq_lens, 16, b.max_seq_len
    alibi_slopes, kv_cache_dtype, k_scale, v_scale = None, "auto", 1.0, 1.0
    ops.paged_attention_v1(output, query, key_cache, value_cache, num_kv_heads, scale, block_tables,
                           seq_lens, block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale,
                           v_scale)
    ref32, naive, _ = b.reference(scale)
    assert_close_to_reference(output, ref32, naive, "paged_attention_v1 (vLLM 0.6.3 call)")


def test_paged_attention_v2_as_vllm_063_forward_decode_calls_it(vllm_cache):
    b = vllm_cache
    scale = 1.0 / math.sqrt(b.head_dim)
    num_seqs, num_heads, head_size = b.q.shape
    partitions = (b.max_seq_len + 511) // 512
    output = torch.empty_like(b.q)
    tmp_output = torch.empty(num_seqs, num_heads, partitions, head_size, dtype=b.dtype, device="cuda")
    exp_sums = torch.empty(num_seqs, num_heads, partitions, dtype=torch.float32, device="cuda")
    max_logits = torch.empty_like(exp_sums)
    # PagedAttention.forward_decode passes every argument positionally, the block-sparse ones too.
    ops.paged_attention_v2(output, exp_sums, max_logits, tmp_output, b.q, b.k_cache, b.v_cache, 4, scale,
                           b.block_table, b.seq_lens, 16, b.max_seq_len, None, "auto", 1.0, 1.0, 0, 0,
                           0, 64, 0)
    ref32, naive, _ = b.reference(scale)
    assert_close_to_reference(output, ref32, naive, "paged_attention_v2 (vLLM 0.6.3 call)")


@pytest.mark.parametrize("scales", ["float", "tensor"])
def test_torch_ops_muh_takes_both_scale_forms(vllm_cache, scales):
    # torch.ops.muh standing in for torch.ops._C: vLLM 0.6.3 passes floats, 0.7+ 0-dim tensors.
    b = vllm_cache
    k_scale = 1.0 if scales == "float" else torch.ones((), device="cuda")
    output = torch.empty_like(b.q)
    scale = 1.0 / math.sqrt(b.head_dim)
    torch.ops.muh.paged_attention_v1(output, b.q, b.k_cache, b.v_cache, 4, scale, b.block_table, b.seq_lens,
                                     16, b.max_seq_len, None, "auto", k_scale, k_scale, 0, 0, 0, 64, 0)
    ref32, naive, _ = b.reference(scale)
    assert_close_to_reference(output, ref32, naive, f"torch.ops.muh.paged_attention_v1 ({scales} scales)")


def test_float_scales_capture_in_a_cuda_graph(vllm_cache):
    # The float overload needs no device read, so vLLM 0.6.3's call captures.
    b = vllm_cache
    scale = 1.0 / math.sqrt(b.head_dim)
    output = torch.empty_like(b.q)
    args = (output, b.q, b.k_cache, b.v_cache, 4, scale, b.block_table, b.seq_lens, 16, b.max_seq_len,
            None, "auto", 1.0, 1.0)
    ops.paged_attention_v1(*args)  # warm-up outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ops.paged_attention_v1(*args)
    output.zero_()
    g.replay()
    torch.cuda.synchronize()
    ref32, naive, _ = b.reference(scale)
    assert_close_to_reference(output, ref32, naive, "paged_attention_v1 graph replay (float scales)")


# ---- No backward ---------------------------------------------------------------------------------

def test_requires_grad_raises_naming_the_argument():
    b = _varlen(seed=6)
    q = b.q.clone().requires_grad_()
    with pytest.raises(NotImplementedError, match=r"flash_attn_varlen: q requires grad.*no backward"):
        ops.flash_attn_varlen_func(q, b.k, b.v, b.cu_q, b.cu_k, max(b.q_lens), max(b.k_lens))
    k = b.k.clone().requires_grad_()
    with pytest.raises(NotImplementedError, match=r"k requires grad"):
        ops.flash_attn_varlen_func(b.q, k, b.v, b.cu_q, b.cu_k, max(b.q_lens), max(b.k_lens))
    with torch.no_grad():  # inference under no_grad / inference_mode runs
        out = ops.flash_attn_varlen_func(q, b.k, b.v, b.cu_q, b.cu_k, max(b.q_lens), max(b.k_lens))
    assert not out.requires_grad
    with torch.inference_mode():
        ops.flash_attn_varlen_func(q, b.k, b.v, b.cu_q, b.cu_k, max(b.q_lens), max(b.k_lens))


def test_requires_grad_raises_for_decode_ops(vllm_cache):
    b = vllm_cache
    q = b.q.clone().requires_grad_()
    with pytest.raises(NotImplementedError, match=r"paged_attention_v1: query requires grad"):
        ops.paged_attention_v1(torch.empty_like(b.q), q, b.k_cache, b.v_cache, 4, 0.1, b.block_table,
                               b.seq_lens, 16, b.max_seq_len, None, "auto", 1.0, 1.0)
    nb = PagedBatch((5, 70), 8, 2, b.head_dim, 16, b.dtype, "nhd", seed=7)
    with pytest.raises(NotImplementedError, match=r"paged_decode: q requires grad"):
        ops.paged_decode(nb.q.clone().requires_grad_(), nb.k_cache, nb.v_cache, nb.block_table, nb.seq_lens)
