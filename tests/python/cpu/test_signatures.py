"""The drop-ins take their originals' signatures: FlashAttention's flash_attn_varlen_func
(flash_attn/flash_attn_interface.py) and vLLM 0.6.3's paged_attention_v1/v2
(vllm/_custom_ops.py). Read from python/muh/ops.py's source, so this runs without torch (CI);
where torch and muh.ops load, the imported functions and the op schemas are checked too."""

import ast
import inspect
import os

import pytest

OPS_PY = os.path.join(os.path.dirname(__file__), "..", "..", "..", "python", "muh", "ops.py")


# ---- The originals' signatures (parameter names, order and defaults; bodies elided) ---------------

def fa_flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False,
                              return_attn_probs=False, block_table=None):
    ...


def vllm063_paged_attention_v1(out, query, key_cache, value_cache, num_kv_heads, scale, block_tables,
                               seq_lens, block_size, max_seq_len, alibi_slopes, kv_cache_dtype,
                               k_scale, v_scale, tp_rank=0, blocksparse_local_blocks=0,
                               blocksparse_vert_stride=0, blocksparse_block_size=64,
                               blocksparse_head_sliding_step=0):
    ...


def vllm063_paged_attention_v2(out, exp_sum, max_logits, tmp_out, query, key_cache, value_cache,
                               num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len,
                               alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank=0,
                               blocksparse_local_blocks=0, blocksparse_vert_stride=0,
                               blocksparse_block_size=64, blocksparse_head_sliding_step=0):
    ...


def vllm063_context_attention_fwd(q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc, b_start_loc,
                                  b_seq_len, b_ctx_len, max_input_len, k_scale=1.0, v_scale=1.0,
                                  alibi_slopes=None, sliding_window=None, sm_scale=None):
    ...  # vLLM 0.6.3's, plus the keyword sm_scale of later vLLM


# muh's flash_attn_varlen_func: FlashAttention's, defaults included, plus vLLM's fork's paged-call
# keywords seqused_k and out, its sinks s_aux and its fp8 cache's k_descale / v_descale, and muh's
# host copies of the lengths for a mixed batch, keyword-only (no positional call of FlashAttention's
# binds differently: test_fa_positional_calls_bind_the_same).
def muh_flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                               softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
                               block_table=None, *, seqused_k=None, out=None, s_aux=None, k_descale=None,
                               v_descale=None, cu_seqlens_q_host=None, seqused_k_host=None):
    ...


ORIGINALS = {
    "flash_attn_varlen_func": muh_flash_attn_varlen_func,
    "paged_attention_v1": vllm063_paged_attention_v1,
    "paged_attention_v2": vllm063_paged_attention_v2,
    "context_attention_fwd": vllm063_context_attention_fwd,
}


def test_fa_positional_calls_bind_the_same():
    fa, muh = inspect.signature(fa_flash_attn_varlen_func), inspect.signature(muh_flash_attn_varlen_func)
    names = list(fa.parameters)
    assert [p for p in muh.parameters if muh.parameters[p].kind.name == "POSITIONAL_OR_KEYWORD"] == names
    for n in range(7, len(names) + 1):  # every positional call FlashAttention accepts
        args = tuple(range(n))
        assert dict(fa.bind(*args).arguments) == dict(muh.bind(*args).arguments)
    for p in names:
        assert muh.parameters[p].default == fa.parameters[p].default

_EMPTY = object()


def params_of(fn):
    """[(name, kind, default)] of a live function."""
    return [(p.name, p.kind.name, _EMPTY if p.default is inspect.Parameter.empty else p.default)
            for p in inspect.signature(fn).parameters.values()]


def params_in_source(name):
    """[(name, kind, default)] of `def name(...)` in ops.py, read with ast (no import, no torch)."""
    with open(OPS_PY, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [_EMPTY] * (len(positional) - len(a.defaults)) + [ast.literal_eval(d) for d in a.defaults]
    out = [(p.arg, "POSITIONAL_OR_KEYWORD", d) for p, d in zip(positional, defaults)]
    if a.vararg or a.kwarg:
        out.append(("*args/**kwargs", "VAR", _EMPTY))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, "KEYWORD_ONLY", _EMPTY if d is None else ast.literal_eval(d)))
    return out


@pytest.mark.parametrize("name", sorted(ORIGINALS))
def test_source_signature_is_the_originals(name):
    assert params_in_source(name) == params_of(ORIGINALS[name])


def _muh_ops():
    pytest.importorskip("torch")
    try:
        import muh.ops
    except ImportError as e:  # torch without muh.ops built against it
        pytest.skip(f"muh.ops not importable: {e}")
    return muh.ops


@pytest.mark.parametrize("name", sorted(ORIGINALS))
def test_imported_signature_is_the_originals(name):
    assert params_of(getattr(_muh_ops(), name)) == params_of(ORIGINALS[name])


# vLLM 0.6.3's csrc/torch_bindings.cpp schemas (argument types and names): the default overloads.
# The .tensor_scales overloads differ only in k_scale / v_scale being Tensors (vLLM 0.7 on).
VLLM063_V1 = ("Tensor! out, Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, "
              "float scale, Tensor block_tables, Tensor seq_lens, int block_size, int max_seq_len, "
              "Tensor? alibi_slopes, str kv_cache_dtype, float k_scale, float v_scale, int tp_rank, "
              "int blocksparse_local_blocks, int blocksparse_vert_stride, int blocksparse_block_size, "
              "int blocksparse_head_sliding_step")
VLLM063_V2 = ("Tensor! out, Tensor! exp_sums, Tensor! max_logits, Tensor! tmp_out, Tensor query, "
              "Tensor key_cache, Tensor value_cache, int num_kv_heads, float scale, Tensor block_tables, "
              "Tensor seq_lens, int block_size, int max_seq_len, Tensor? alibi_slopes, "
              "str kv_cache_dtype, float k_scale, float v_scale, int tp_rank, "
              "int blocksparse_local_blocks, int blocksparse_vert_stride, int blocksparse_block_size, "
              "int blocksparse_head_sliding_step")


def _schema_args(overload):
    def arg(a):
        t = str(a.type)
        t = t[len("Optional["):-1] + "?" if t.startswith("Optional[") else t
        return f"{t}{'!' if a.alias_info is not None and a.alias_info.is_write else ''} {a.name}"
    return ", ".join(arg(a) for a in overload._schema.arguments)


@pytest.mark.parametrize("name,want", [("paged_attention_v1", VLLM063_V1), ("paged_attention_v2", VLLM063_V2)])
def test_op_schemas_are_vllms(name, want):
    _muh_ops()
    import torch
    packet = getattr(torch.ops.muh, name)
    assert _schema_args(packet.default) == want
    assert _schema_args(packet.tensor_scales) == want.replace("float k_scale, float v_scale",
                                                             "Tensor k_scale, Tensor v_scale")


def test_requires_grad_raises_before_any_kernel():
    # The ops' Autograd kernel refuses an input that requires grad (muh has no backward) before
    # any device check, so CPU tensors show it; under no_grad the call goes on (to the CUDA check).
    ops = _muh_ops()
    import torch
    q = torch.randn(10, 8, 64, requires_grad=True)
    k, v = torch.randn(10, 2, 64), torch.randn(10, 2, 64)
    cu = torch.tensor([0, 10], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="q requires grad, but muh's kernels have no backward"):
        ops.flash_attn_varlen_func(q, k, v, cu, cu, 10, 10)
    with torch.no_grad(), pytest.raises(ValueError, match="q must be a CUDA tensor"):
        ops.flash_attn_varlen_func(q, k, v, cu, cu, 10, 10)
    out, query = torch.empty(2, 8, 64), torch.randn(2, 8, 64, requires_grad=True)
    kc, vc = torch.zeros(4, 2, 8, 16, 8), torch.zeros(4, 2, 64, 16)
    bt, sl = torch.zeros(2, 1, dtype=torch.int32), torch.ones(2, dtype=torch.int32)
    for k_scale in (1.0, torch.ones(())):  # both overloads
        with pytest.raises(NotImplementedError, match="query requires grad"):
            torch.ops.muh.paged_attention_v1(out, query, kc, vc, 2, 0.1, bt, sl, 16, 16, None, "auto",
                                             k_scale, k_scale, 0, 0, 0, 64, 0)
