"""The paged-prefill drop-ins' contracts that need no GPU: the schema of
torch.ops.muh.context_attention_fwd (vLLM 0.6.3's argument names and order, plus sm_scale), and
the refusals and argument errors that come before any kernel (CPU tensors reach the same checks
and are then refused as not CUDA). Skipped where torch or muh.ops is not importable (CI has no torch)."""

import pytest

torch = pytest.importorskip("torch")
try:
    import muh.ops as ops
except ImportError as e:  # torch without muh.ops built against it
    pytest.skip(f"muh.ops not importable: {e}", allow_module_level=True)

VLLM063_CONTEXT_ATTENTION_FWD = (
    "q k v o kv_cache_dtype k_cache v_cache b_loc b_start_loc b_seq_len b_ctx_len max_input_len k_scale "
    "v_scale alibi_slopes sliding_window sm_scale").split()


def test_context_attention_fwd_schema_is_vllms():
    args = [a.name for a in torch.ops.muh.context_attention_fwd.default._schema.arguments]
    assert args == VLLM063_CONTEXT_ATTENTION_FWD


def _ctx_args(d=128):
    q = torch.randn(5, 4, d, dtype=torch.float16)
    k, v = torch.randn(5, 1, d, dtype=torch.float16), torch.randn(5, 1, d, dtype=torch.float16)
    o = torch.empty_like(q)
    kc = torch.zeros(4, 1, d // 8, 16, 8, dtype=torch.float16)
    vc = torch.zeros(4, 1, d, 16, dtype=torch.float16)
    i32 = dict(dtype=torch.int32)
    return (q, k, v, o, "auto", kc, vc, torch.zeros(1, 4, **i32), torch.tensor([0, 5], **i32),
            torch.tensor([25], **i32), torch.tensor([20], **i32), 5)


@pytest.mark.parametrize("kw,match", [
    (dict(sliding_window=-3), "sliding_window must be >= 0"),
    # The variants are taken (muh/variant.hpp): these reach the tensors' own checks.
    (dict(alibi_slopes=torch.ones(4)), "q must be a CUDA tensor"),
    (dict(sliding_window=4096), "q must be a CUDA tensor"),
])
def test_context_attention_fwd_checks_the_variants(kw, match):
    with pytest.raises(ValueError, match=match):
        ops.context_attention_fwd(*_ctx_args(), **kw)


def test_context_attention_fwd_fp8_gate_and_cpu_tensors():
    # An fp8 kv_cache_dtype is taken (the prefix part reads the fp8 cache), with or without a
    # variant, and goes on to the tensors' checks; unknown strings are refused before them. Both
    # overloads (float and tensor scales).
    a = list(_ctx_args())
    for kind in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        a[4] = kind
        for scale in (0.5, torch.tensor(0.5)):
            with pytest.raises(ValueError, match="q must be a CUDA tensor"):
                ops.context_attention_fwd(*a, k_scale=scale, v_scale=2.0)
    a[4] = "fp8"
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        ops.context_attention_fwd(*a, alibi_slopes=torch.ones(4))
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        ops.context_attention_fwd(*a, sliding_window=64)
    a[4] = "int8"
    with pytest.raises(NotImplementedError, match="kv_cache_dtype='int8' is not supported"):
        ops.context_attention_fwd(*a)
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        ops.context_attention_fwd(*_ctx_args(), sliding_window=None)  # None and 0 mean no window


def test_flash_attn_varlen_paged_arguments():
    q = torch.randn(5, 4, 128, dtype=torch.float16)
    kc = torch.zeros(4, 16, 1, 128, dtype=torch.float16)
    cu = torch.tensor([0, 5], dtype=torch.int32)
    bt = torch.zeros(1, 4, dtype=torch.int32)
    with pytest.raises(TypeError, match="max_seqlen_q"):  # FlashAttention's signature: no defaults there
        ops.flash_attn_varlen_func(q, kc, kc, cu, block_table=bt, seqused_k=torch.tensor([5], dtype=torch.int32))
    with pytest.raises(TypeError, match="needs seqused_k"):
        ops.flash_attn_varlen_func(q, kc, kc, cu, None, 5, 20, block_table=bt)
    with pytest.raises(NotImplementedError, match="seqused_k without block_table"):
        ops.flash_attn_varlen_func(q, q, q, cu, cu, 5, 5, seqused_k=torch.tensor([5], dtype=torch.int32))
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        ops.flash_attn_varlen_func(q, kc, kc, cu, None, 5, 20, block_table=bt,
                                   seqused_k=torch.tensor([5], dtype=torch.int32))


@pytest.mark.parametrize("k_scale", [1.0, "tensor"], ids=["float-scales", "tensor-scales"])
def test_paged_attention_kv_cache_dtype_gate(k_scale):
    # paged_attention_v1/v2 take kv_cache_dtype 'auto', 'fp8', 'fp8_e4m3' and 'fp8_e5m2' and refuse any
    # other before looking at the tensors; an fp8 one goes on to the tensors' checks (with CPU
    # tensors: the CUDA check). Both overloads (float and tensor scales).
    if k_scale == "tensor":
        k_scale = torch.ones(())
    d = 128
    out, query = torch.empty(2, 8, d, dtype=torch.bfloat16), torch.randn(2, 8, d, dtype=torch.bfloat16)
    kc, vc = torch.zeros(4, 2, d // 16, 16, 16, dtype=torch.uint8), torch.zeros(4, 2, d, 16, dtype=torch.uint8)
    bt, sl = torch.zeros(2, 1, dtype=torch.int32), torch.ones(2, dtype=torch.int32)
    v2_scratch = (torch.empty(2, 8, 1), torch.empty(2, 8, 1), torch.empty(2, 8, 1, d, dtype=torch.bfloat16))
    for kv_cache_dtype, exc, match in (("int8", NotImplementedError, "kv_cache_dtype='int8' is not supported"),
                                       ("fp8", ValueError, "query must be a CUDA tensor"),
                                       ("fp8_e4m3", ValueError, "query must be a CUDA tensor"),
                                       ("fp8_e5m2", ValueError, "query must be a CUDA tensor")):
        with pytest.raises(exc, match=match):
            torch.ops.muh.paged_attention_v1(out, query, kc, vc, 2, 0.1, bt, sl, 16, 16, None, kv_cache_dtype,
                                             k_scale, k_scale, 0, 0, 0, 64, 0)
        with pytest.raises(exc, match=match):
            torch.ops.muh.paged_attention_v2(out, *v2_scratch, query, kc, vc, 2, 0.1, bt, sl, 16, 16, None,
                                             kv_cache_dtype, k_scale, k_scale, 0, 0, 0, 64, 0)
