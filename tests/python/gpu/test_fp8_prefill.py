"""The paged-prefill drop-ins over an fp8 KV cache, against SDPA in fp32 on the dequantised K/V:
vLLM 0.6.3's context_attention_fwd with kv_cache_dtype 'fp8' / 'fp8_e5m2' (uint8 or float8 caches
in vLLM's layout, x = 16; k_scale / v_scale floats or tensors; only the prefix is read from the
cache, the chunk's k/v are q's dtype) and flash_attn_varlen_func(..., block_table=) over
torch.float8_e4m3fn / float8_e5m2 caches (NHD and vLLM's layout) with k_descale / v_descale.
The caches are PagedBatch's (random page order, NaN in every slot no sequence owns: a NaN code
once quantised, so a read past a sequence's length shows up as NaN), quantised as vLLM's cache
write does (the code of x / scale, saturated). The tolerance is the fp8 decode tests'
(assert_close_to_reference: the yardstick is SDPA at q's precision on the same dequantised
values)."""

import pytest

from types import SimpleNamespace

from gpu_helpers import PagedBatch, assert_close_to_reference, ops, pick, run_fp8, torch
from test_paged_dropins import _cu, _reference
from test_variants import SINKS, SLOPES, variant_reference

FP8_KINDS = {"fp8": (torch.float8_e4m3fn, 448.0), "fp8_e4m3": (torch.float8_e4m3fn, 448.0),
             "fp8_e5m2": (torch.float8_e5m2, 57344.0)}
K_SCALE, V_SCALE = 0.5, 2.0


def skip_unless_fp8():
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("muh reads an fp8 KV cache on sm_80+ GPUs only")


def quantize(x, kind, scale):
    """vLLM's fp8 cache write in plain torch: the code of x / scale, saturated (NaN stays NaN)."""
    fdt, fmax = FP8_KINDS[kind]
    return (x.float() / scale).clamp(-fmax, fmax).to(fdt)


def dequantize(codes, kind, scale):
    """code → value · scale, as torch reads the codes (cache.view(torch.float8_*).float() * scale)."""
    return codes.view(FP8_KINDS[kind][0]).float() * scale


class Fp8Cache:
    """A PagedBatch (NHD, q's dtype) quantised: k_cache / v_cache in `layout` ("nhd" or "vllm":
    key [pages, kv_heads, d/16, page, 16], value [pages, kv_heads, d, page]) as `storage`
    ("uint8" or "float8"); k / v the dequantised keys and values per sequence, in q's dtype (exact:
    an fp8 value times a power-of-two scale is an fp16 / bf16 value here)."""

    def __init__(self, seq_lens, hq, hkv, d, page, dtype, kind, layout, storage, seed):
        self.paged = PagedBatch(seq_lens, hq, hkv, d, page, dtype, "nhd", seed=seed)
        fdt = FP8_KINDS[kind][0]
        kq = quantize(self.paged.k_cache, kind, K_SCALE)  # [pages, page, kv_heads, d]
        vq = quantize(self.paged.v_cache, kind, V_SCALE)
        if layout == "vllm":
            n = kq.shape[0]
            kq = kq.permute(0, 2, 1, 3).reshape(n, hkv, page, d // 16, 16).permute(0, 1, 3, 2, 4).contiguous()
            vq = vq.permute(0, 2, 3, 1).contiguous()
        view = torch.uint8 if storage == "uint8" else fdt
        self.k_cache, self.v_cache = kq.view(view), vq.view(view)
        self.k = [dequantize(quantize(k, kind, K_SCALE), kind, K_SCALE).to(dtype) for k in self.paged.k]
        self.v = [dequantize(quantize(v, kind, V_SCALE), kind, V_SCALE).to(dtype) for v in self.paged.v]
        self.block_table, self.seq_lens = self.paged.block_table, self.paged.seq_lens


def _scales(how):
    if how == "float":  # vLLM 0.6.3
        return K_SCALE, V_SCALE
    if how == "tensor":  # later vLLM: fp32 tensors on the GPU (read to the host)
        return (torch.tensor(K_SCALE, dtype=torch.float32, device="cuda"),
                torch.tensor([V_SCALE], dtype=torch.float32, device="cuda"))
    return torch.tensor([K_SCALE]), V_SCALE  # a CPU tensor beside a float


# ---- context_attention_fwd ------------------------------------------------------------------------

CTX_CASES = [
    # (prefix lens, chunk lens, q heads, kv heads, page)
    ([40], [9], 4, 1, 16),
    ([100, 33], [64, 5], 4, 1, 16),
    ([0, 70], [7, 16], 8, 2, 32),
]


@pytest.mark.parametrize("case", CTX_CASES, ids=lambda c: f"ctx{c[0]}_q{c[1]}_h{c[2]}x{c[3]}_p{c[4]}")
@pytest.mark.parametrize("kind,storage,scales", [
    ("fp8", "uint8", "float"),
    ("fp8_e4m3", "float8", "tensor"),
    ("fp8_e5m2", "uint8", "tensor-cpu"),
])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_context_attention_fwd_fp8_matches_reference(case, kind, storage, scales, dtype):
    skip_unless_fp8()
    d = pick(dtype, (128,))
    ctx, chunk, hq, hkv, page = case
    seed = len(ctx) * 100 + len(kind) * 10 + (dtype == torch.bfloat16)
    c = Fp8Cache(ctx, hq, hkv, d, page, dtype, kind, "vllm", storage, seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    n = sum(chunk)
    q = torch.randn(n, hq, d, generator=g, device="cuda").to(dtype)
    k = torch.randn(n, hkv, d, generator=g, device="cuda").to(dtype)
    v = torch.randn(n, hkv, d, generator=g, device="cuda").to(dtype)
    o = torch.full_like(q, float("nan"))
    cu = _cu(chunk)
    b_ctx = torch.tensor(ctx, dtype=torch.int32, device="cuda")
    b_seq = b_ctx + torch.tensor(chunk, dtype=torch.int32, device="cuda")
    k_scale, v_scale = _scales(scales)
    with torch.no_grad():
        run_fp8(lambda: ops.context_attention_fwd(q, k, v, o, kind, c.k_cache, c.v_cache, c.block_table, cu, b_seq,
                                                  b_ctx, max(chunk), k_scale, v_scale))
    ks, vs, start = [], [], 0
    for b, lq in enumerate(chunk):
        ks.append(torch.cat([c.k[b], k[start:start + lq]]))  # the prefix dequantised, the chunk as given
        vs.append(torch.cat([c.v[b], v[start:start + lq]]))
        start += lq
    o32, olp, _ = _reference(q, ks, vs, chunk, d ** -0.5)
    assert_close_to_reference(o, o32, olp, f"context_attention_fwd {kind} {storage} {scales} {dtype} {case}")


def test_context_attention_fwd_fp8_through_the_op_overloads():
    # torch.ops.muh directly, as vLLM calls its own op: floats take the default overload, tensors
    # the .tensor_scales one; both read the same cache the same way.
    skip_unless_fp8()
    t = torch.float16
    d = pick(t, (128,))
    c = Fp8Cache([40], 4, 1, d, 16, t, "fp8", "vllm", "uint8", seed=21)
    q, k, v = (torch.randn(9, h, d, device="cuda").to(t) for h in (4, 1, 1))
    cu, ctx = _cu([9]), torch.tensor([40], dtype=torch.int32, device="cuda")
    args = (q, k, v, None, "fp8", c.k_cache, c.v_cache, c.block_table, cu, ctx + 9, ctx, 9)
    o1, o2 = torch.empty_like(q), torch.empty_like(q)
    with torch.no_grad():
        run_fp8(lambda: torch.ops.muh.context_attention_fwd(*args[:3], o1, *args[4:], K_SCALE, V_SCALE))
        torch.ops.muh.context_attention_fwd(*args[:3], o2, *args[4:], torch.tensor(K_SCALE, device="cuda"),
                                            torch.tensor(V_SCALE, device="cuda"))
    assert torch.equal(o1, o2)
    o32, olp, _ = _reference(q, [torch.cat([c.k[0], k])], [torch.cat([c.v[0], v])], [9], d ** -0.5)
    assert_close_to_reference(o1, o32, olp, "torch.ops.muh.context_attention_fwd fp8")


def _variant_batch(q, ks, vs, q_lens, hq, hkv):
    """test_variants.variant_reference's batch: q rows per sequence, its dequantised keys/values."""
    k_lens = [k.shape[0] for k in ks]
    cq, ck = [0], [0]
    for lq, lk in zip(q_lens, k_lens):
        cq.append(cq[-1] + lq)
        ck.append(ck[-1] + lk)
    return SimpleNamespace(q=q, k=torch.cat(ks), v=torch.cat(vs), q_lens=q_lens, k_lens=k_lens, cq=cq, ck=ck,
                           num_q_heads=hq, num_kv_heads=hkv)


@pytest.mark.parametrize("variant", ["alibi", "window", "alibi_window"])
@pytest.mark.parametrize("kind", ["fp8", "fp8_e5m2"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_context_attention_fwd_fp8_with_variants(variant, kind, dtype):
    # vLLM's alibi_slopes and sliding_window over an fp8 prefix: the prefix part runs the fp8
    # instance's general kind, the chunk part the 16-bit one; the whole equals one attention of
    # each new token over prefix + chunk (bottom-right causal) with the variant.
    skip_unless_fp8()
    d = pick(dtype, (128,))
    ctx, chunk, hq, hkv, page = [100, 33], [64, 5], 8, 2, 16
    seed = len(variant) * 10 + len(kind) + (dtype == torch.bfloat16)
    c = Fp8Cache(ctx, hq, hkv, d, page, dtype, kind, "vllm", "uint8", seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    n = sum(chunk)
    q, k, v = (torch.randn(n, h, d, generator=g, device="cuda").to(dtype) for h in (hq, hkv, hkv))
    o = torch.full_like(q, float("nan"))
    b_ctx = torch.tensor(ctx, dtype=torch.int32, device="cuda")
    b_seq = b_ctx + torch.tensor(chunk, dtype=torch.int32, device="cuda")
    alibi = torch.tensor(SLOPES, device="cuda") if "alibi" in variant else None
    window = 40 if "window" in variant else None  # vLLM's: i' - j < 40, window_size left 39
    with torch.no_grad():
        run_fp8(lambda: ops.context_attention_fwd(q, k, v, o, kind, c.k_cache, c.v_cache, c.block_table, _cu(chunk),
                                                  b_seq, b_ctx, max(chunk), K_SCALE, V_SCALE, alibi_slopes=alibi,
                                                  sliding_window=window))
    ks, vs, start = [], [], 0
    for b, lq in enumerate(chunk):
        ks.append(torch.cat([c.k[b], k[start:start + lq]]))
        vs.append(torch.cat([c.v[b], v[start:start + lq]]))
        start += lq
    ref32, naive, _ = variant_reference(_variant_batch(q, ks, vs, chunk, hq, hkv), d ** -0.5, True,
                                        (window - 1 if window else -1, 0), 0.0, alibi, None, dtype)
    assert_close_to_reference(o, ref32, naive, f"context_attention_fwd {kind} {variant} {dtype}")


def test_context_attention_fwd_fp8_bad_arguments():
    # All refused before any plan or kernel (so on any GPU, any build).
    t = torch.float16
    d = pick(t, (128, 256))
    c = Fp8Cache([20], 4, 1, d, 16, t, "fp8", "vllm", "uint8", seed=5)
    q = torch.randn(5, 4, d, device="cuda", dtype=t)
    k = torch.randn(5, 1, d, device="cuda", dtype=t)
    o = torch.empty_like(q)
    cu, ctx = _cu([5]), torch.tensor([20], dtype=torch.int32, device="cuda")

    def call(kind="fp8", k_cache=c.k_cache, v_cache=c.v_cache, q=q, k=k, o=o, **kw):
        ops.context_attention_fwd(q, k, k, o, kind, k_cache, v_cache, c.block_table, cu, ctx + 5, ctx, 5, **kw)

    # The decode ops' cache-dtype rule: fp8 = uint8 or the kind's float8; 'auto' = q's dtype.
    cache16 = PagedBatch([20], 4, 1, d, 16, t, "vllm", seed=5)
    with pytest.raises(ValueError, match="k_cache must be uint8 or"):
        call(k_cache=cache16.k_cache, v_cache=cache16.v_cache)
    with pytest.raises(ValueError, match="v_cache must be uint8 or"):
        call(kind="fp8_e5m2", k_cache=c.k_cache, v_cache=c.v_cache.view(torch.float8_e4m3fn))
    with pytest.raises(NotImplementedError, match="k_cache dtype"):
        call(kind="auto")
    with pytest.raises(NotImplementedError, match="kv_cache_dtype='int8'"):
        call(kind="int8")
    with pytest.raises(ValueError, match="k_scale"):
        call(k_scale=0.0)
    with pytest.raises(ValueError, match="v_scale"):
        call(v_scale=torch.tensor(float("nan"), device="cuda"))
    with pytest.raises(ValueError, match="k_scale"):
        call(k_scale=torch.ones(2, device="cuda"))  # not one value
    # x is 16 for a 1-byte cache: a key cache shaped for fp16's x = 8 is refused.
    with pytest.raises(ValueError, match=r"k_cache\.shape\[2\]"):
        call(k_cache=c.k_cache.view(c.k_cache.shape[0], 1, d // 8, 16, 8))
    with pytest.raises(NotImplementedError, match="float32"):
        call(q=q.float(), k=k.float(), o=o.float())


# ---- flash_attn_varlen_func over a paged fp8 cache --------------------------------------------------

PAGED_CASES = [
    # (kv lens = prefix + chunk, chunk lens, q heads, kv heads, page)
    ([40 + 9], [9], 4, 1, 16),
    ([300, 64, 5], [16, 64, 1], 6, 1, 16),
    ([200, 17], [33, 17], 8, 2, 32),
]


def _descales(how, batch, hkv):
    if how == "float":
        return K_SCALE, V_SCALE
    if how == "expanded":  # vLLM V1's flash-attn backend: layer._k_scale.expand((batch, num_kv_heads))
        return (torch.tensor([K_SCALE], device="cuda").expand(batch, hkv),
                torch.tensor([V_SCALE], device="cuda").expand(batch, hkv))
    return torch.tensor(K_SCALE, device="cuda"), torch.tensor([V_SCALE])  # 0-dim CUDA, 1-element CPU


@pytest.mark.parametrize("case", PAGED_CASES, ids=lambda c: f"kv{c[0]}_q{c[1]}_h{c[2]}x{c[3]}_p{c[4]}")
@pytest.mark.parametrize("layout", ["nhd", "vllm"])
@pytest.mark.parametrize("kind,descales", [("fp8_e4m3", "float"), ("fp8_e4m3", "expanded"),
                                           ("fp8_e5m2", "tensors")])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_flash_attn_varlen_fp8_cache_matches_reference(case, layout, kind, descales, dtype):
    skip_unless_fp8()
    d = pick(dtype, (128,))
    kv_lens, q_lens, hq, hkv, page = case
    seed = sum(kv_lens) + len(kind) + (layout == "vllm") * 7 + (dtype == torch.bfloat16) * 13
    c = Fp8Cache(kv_lens, hq, hkv, d, page, dtype, kind, layout, "float8", seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    q = torch.randn(sum(q_lens), hq, d, generator=g, device="cuda").to(dtype)
    out = torch.full_like(q, float("nan"))
    k_descale, v_descale = _descales(descales, len(q_lens), hkv)
    with torch.no_grad():
        run_fp8(lambda: ops.flash_attn_varlen_func(q, c.k_cache, c.v_cache, _cu(q_lens), None, max(q_lens),
                                                   max(kv_lens), causal=True, block_table=c.block_table,
                                                   seqused_k=c.seq_lens, out=out, k_descale=k_descale,
                                                   v_descale=v_descale))
    o32, olp, _ = _reference(q, c.k, c.v, q_lens, d ** -0.5)
    assert_close_to_reference(out, o32, olp, f"paged flash_attn_varlen_func {kind} {layout} {descales} {dtype} {case}")


def test_flash_attn_varlen_fp8_cache_bad_arguments():
    # Refused before any plan or kernel, except the vLLM page size (the plan's check): any GPU.
    t = torch.float16
    d = pick(t, (128, 256))
    c = Fp8Cache([20], 4, 1, d, 16, t, "fp8_e4m3", "nhd", "float8", seed=9)
    q = torch.randn(5, 4, d, device="cuda", dtype=t)
    cu = _cu([5])

    def call(k_cache=c.k_cache, v_cache=c.v_cache, q=q, block_table=c.block_table, **kw):
        return ops.flash_attn_varlen_func(q, k_cache, v_cache, cu, None, 5, 20, causal=True, block_table=block_table,
                                          seqused_k=c.seq_lens, **kw)

    with pytest.raises(NotImplementedError, match="per-tensor descales only"):
        call(k_descale=torch.tensor([[0.5], [1.0]], device="cuda"))
    with pytest.raises(NotImplementedError, match="per-tensor descales only"):
        call(v_descale=torch.tensor([2.0, 2.0]))  # two values, even equal ones: not an expanded view
    with pytest.raises(ValueError, match="k_descale must be finite and > 0"):
        call(k_descale=0.0)
    with pytest.raises(ValueError, match="v_descale must be finite and > 0"):
        call(v_descale=torch.tensor(float("inf"), device="cuda"))
    with pytest.raises(ValueError, match="must be Float8_e4m3fn as k"):
        call(v_cache=c.v_cache.view(torch.float8_e5m2))
    with pytest.raises(NotImplementedError, match="does not say which fp8 kind"):
        call(k_cache=c.k_cache.view(torch.uint8), v_cache=c.v_cache.view(torch.uint8))
    with pytest.raises(NotImplementedError, match="float32"):
        call(q=q.float())
    # fp8 K/V are read from a paged cache only.
    k8 = torch.zeros(20, 1, d, device="cuda").to(torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match="paged cache only"):
        ops.flash_attn_varlen_func(q, k8, k8, cu, _cu([20]), 5, 20, causal=True)
    # vLLM's layout: an fp8 value page is read 16 slots at a time.
    c8 = Fp8Cache([20], 4, 1, d, 8, t, "fp8_e4m3", "vllm", "float8", seed=10)
    with pytest.raises(ValueError, match="multiple of 16"):
        run_fp8(lambda: call(k_cache=c8.k_cache, v_cache=c8.v_cache, block_table=c8.block_table))
    # A cache of q's dtype: the descales are not read (FlashAttention 3 applies them to fp8 only).
    cache16 = PagedBatch([20], 4, 1, d, 16, t, "nhd", seed=9)
    with torch.no_grad():
        a = call(k_cache=cache16.k_cache, v_cache=cache16.v_cache, block_table=cache16.block_table)
        b = call(k_cache=cache16.k_cache, v_cache=cache16.v_cache, block_table=cache16.block_table,
                 k_descale=0.25, v_descale=torch.tensor(4.0, device="cuda"))
    assert torch.equal(a, b)


# The attention variants over an fp8 cache (the fp8 instances' general kind), both layouts: soft-
# cap, window, ALiBi with GQA, sinks with large positive / negative logits, and all of them.
FP8_VARIANT_CASES = [
    # name, window, softcap, alibi, sinks
    ("win7", (7, 0), 0.0, False, False),
    ("softcap30", (-1, -1), 30.0, False, False),
    ("alibi", (-1, -1), 0.0, True, False),
    ("sinks", (-1, -1), 0.0, False, True),
    ("all", (32, 0), 50.0, True, True),
]


@pytest.mark.parametrize("case", FP8_VARIANT_CASES, ids=lambda c: c[0])
@pytest.mark.parametrize("layout", ["nhd", "vllm"])
@pytest.mark.parametrize("kind", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_flash_attn_varlen_fp8_cache_with_variants(case, layout, kind, dtype):
    skip_unless_fp8()
    name, window, softcap, use_alibi, use_sinks = case
    d = pick(dtype, (128,))
    kv_lens, q_lens, hq, hkv, page = [300, 64, 5], [70, 64, 1], 8, 2, 16
    seed = len(name) * 7 + len(kind) + (layout == "vllm") * 3 + (dtype == torch.bfloat16) * 13
    c = Fp8Cache(kv_lens, hq, hkv, d, page, dtype, kind, layout, "float8", seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    q = torch.randn(sum(q_lens), hq, d, generator=g, device="cuda").to(dtype)
    out = torch.full_like(q, float("nan"))
    scale = 2.0 / d ** 0.5  # sharp enough for the cap and the sinks to matter
    alibi = torch.tensor(SLOPES, device="cuda") if use_alibi else None
    sinks = torch.tensor(SINKS, device="cuda") if use_sinks else None
    with torch.no_grad():
        run_fp8(lambda: ops.flash_attn_varlen_func(q, c.k_cache, c.v_cache, _cu(q_lens), None, max(q_lens),
                                                   max(kv_lens), softmax_scale=scale, causal=True,
                                                   window_size=window, softcap=softcap, alibi_slopes=alibi,
                                                   block_table=c.block_table, seqused_k=c.seq_lens, out=out,
                                                   k_descale=K_SCALE, v_descale=V_SCALE, s_aux=sinks))
    ref32, naive, _ = variant_reference(_variant_batch(q, c.k, c.v, q_lens, hq, hkv), scale, True, window, softcap,
                                        alibi, sinks, dtype)
    assert_close_to_reference(out, ref32, naive, f"paged flash_attn_varlen_func {kind} {layout} {name} {dtype}")
