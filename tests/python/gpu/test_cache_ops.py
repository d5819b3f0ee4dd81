"""muh.ops.reshape_and_cache / reshape_and_cache_flash / merge_attn_states on the GPU.

Cache writes: the tokens of a PagedBatch (gpu_helpers.py: K/V scattered into a NaN-filled cache by
torch indexing, random page order) are written by muh into a fresh NaN-filled cache of the same
shape through slot_mapping (with padding tokens, slot −1, holding junk, mixed in): the result must
equal torch's cache bit for bit (NaN where no token was mapped), and paged decode over it must
give SDPA's answer (≤ 3 × SDPA at the input precision, gpu_helpers.assert_close_to_reference).
fp8 caches (kv_cache_dtype 'fp8' / 'fp8_e4m3' / 'fp8_e5m2', uint8 or float8 caches, float or
tensor scales): against vLLM's quantisation in torch — x / scale in fp32, clamped to the format's
finite range (torch's cast to float8 does not saturate), cast (round to nearest even) — byte for
byte, NaN sources as NaN codes with their sign, unmapped bytes untouched.
Merge: against the same math in torch (fp32 on the rounded inputs), and prefix + suffix partials
of attention merged against attention over all keys."""

import math

import pytest

from gpu_helpers import PagedBatch, assert_close_to_reference, compiled, ops, torch

DT16 = [torch.float16, torch.bfloat16]


def bits(t):
    """The raw bits (NaN compares equal to the same NaN)."""
    return t.contiguous().view({2: torch.int16, 4: torch.int32}[t.element_size()])


def tokens_of(batch, pad_every=5, junk_tail=0, qkv_heads=None):
    """Token-major key/value [T, Hkv, D] of every sequence, a padding token after every pad_every
    real ones (slot −1, random values), junk_tail extra tokens past slot_mapping's end; with
    qkv_heads, key/value are slices of one [T, (qkv_heads + 2 Hkv) · D] buffer."""
    ks, vs, slots = [], [], []
    ps, hkv, d = batch.page_size, batch.num_kv_heads, batch.head_dim
    real = 0
    for b, L in enumerate(batch.lens):
        for j in range(L):
            ks.append(batch.k[b][j])
            vs.append(batch.v[b][j])
            slots.append(int(batch.block_table[b, j // ps]) * ps + j % ps)
            real += 1
            if real % pad_every == 0:
                ks.append(torch.randn(hkv, d, device="cuda").to(batch.dtype))
                vs.append(torch.randn(hkv, d, device="cuda").to(batch.dtype))
                slots.append(-1)
    n = len(slots)
    for _ in range(junk_tail):
        ks.append(torch.randn(hkv, d, device="cuda").to(batch.dtype))
        vs.append(torch.randn(hkv, d, device="cuda").to(batch.dtype))
    key, value = torch.stack(ks), torch.stack(vs)
    if qkv_heads is not None:
        t = key.shape[0]
        qkv = torch.randn(t, (qkv_heads + 2 * hkv) * d, device="cuda").to(batch.dtype)
        qkv[:, qkv_heads * d:(qkv_heads + hkv) * d] = key.reshape(t, hkv * d)
        qkv[:, (qkv_heads + hkv) * d:] = value.reshape(t, hkv * d)
        key = qkv[:, qkv_heads * d:(qkv_heads + hkv) * d].view(t, hkv, d)
        value = qkv[:, (qkv_heads + hkv) * d:].view(t, hkv, d)
        assert not key.is_contiguous() and key.stride(0) == (qkv_heads + 2 * hkv) * d
    return key, value, torch.tensor(slots, dtype=torch.int64, device="cuda"), n


def scales(tensor_scales):
    if tensor_scales:
        one = torch.ones((), device="cuda")
        return one, one
    return 1.0, 1.0


@pytest.mark.parametrize("tensor_scales", [False, True], ids=["float-scales", "tensor-scales"])
@pytest.mark.parametrize("view", ["packed", "qkv-slices", "padded-key"])
@pytest.mark.parametrize("layout", ["vllm", "nhd"])
@pytest.mark.parametrize("dtype", DT16 + [torch.float32], ids=["fp16", "bf16", "fp32"])
def test_write_then_decode(dtype, layout, view, tensor_scales):
    # The write needs no compiled instance; the decode that reads it back does.
    hd = next((d for d in (128, 64, 256) if compiled(dtype, d)), 128)
    batch = PagedBatch([1, 17, 40], 8, 2, hd, 16, dtype, layout, seed=4)
    key, value, slots, n = tokens_of(batch, junk_tail=3 if view == "padded-key" else 0,
                                     qkv_heads=8 if view == "qkv-slices" else None)
    assert n % 2 == 1, "an odd token count"
    kc = torch.full_like(batch.k_cache, float("nan"))
    vc = torch.full_like(batch.v_cache, float("nan"))
    ks, vs = scales(tensor_scales)
    if layout == "vllm":
        ops.reshape_and_cache(key, value, kc, vc, slots, "auto", ks, vs)
    else:
        ops.reshape_and_cache_flash(key, value, kc, vc, slots, "auto", ks, vs)
    assert torch.equal(bits(kc), bits(batch.k_cache)), "key_cache differs from torch's scatter (or a -1 slot was written)"
    assert torch.equal(bits(vc), bits(batch.v_cache)), "value_cache differs from torch's scatter"
    if not compiled(dtype, hd):
        return  # the write is checked; decode needs a compiled instance
    scale = 1.0 / math.sqrt(hd)
    ref32, naive, _ = batch.reference(scale)
    if layout == "vllm":
        out = torch.empty_like(batch.q)
        ops.paged_attention_v1(out, batch.q, kc, vc, 2, scale, batch.block_table, batch.seq_lens, 16,
                               batch.max_seq_len, None, "auto", 1.0, 1.0)
    else:
        out = ops.paged_decode(batch.q, kc, vc, batch.block_table, batch.seq_lens, softmax_scale=scale)
    assert_close_to_reference(out, ref32, naive, f"decode after reshape_and_cache ({layout}, {view})")


def test_flash_into_interleaved_v1_cache():
    # vLLM V1's cache [num_blocks, 2, block_size, kv_heads, d]: key_cache = kv[:, 0] has a block
    # stride of two blocks.
    dtype = torch.bfloat16
    batch = PagedBatch([33, 5], 4, 2, 64, 16, dtype, "nhd", seed=2)
    key, value, slots, _ = tokens_of(batch)
    kv = torch.full((batch.k_cache.shape[0], 2) + tuple(batch.k_cache.shape[1:]), float("nan"), dtype=dtype,
                    device="cuda")
    kc, vc = kv[:, 0], kv[:, 1]
    assert not kc.is_contiguous()
    ops.reshape_and_cache_flash(key, value, kc, vc, slots, "auto", 1.0, 1.0)
    assert torch.equal(bits(kv[:, 0]), bits(batch.k_cache))
    assert torch.equal(bits(kv[:, 1]), bits(batch.v_cache))


def test_out_of_range_slot_is_skipped_not_written():
    dtype = torch.float16
    batch = PagedBatch([20], 4, 1, 64, 16, dtype, "nhd", seed=5)
    key, value, slots, _ = tokens_of(batch)
    num_slots = batch.k_cache.shape[0] * 16
    slots = slots.clone()
    slots[2] = num_slots + 7  # past the cache
    kc = torch.full_like(batch.k_cache, float("nan"))
    vc = torch.full_like(batch.v_cache, float("nan"))
    ops.reshape_and_cache_flash(key, value, kc, vc, slots, "auto", 1.0, 1.0)
    want_k, want_v = batch.k_cache.clone(), batch.v_cache.clone()
    s = int(batch.block_table[0, 0]) * 16 + 2  # token 2's real slot stays NaN
    want_k.view(-1, 1, 64)[s] = float("nan")
    want_v.view(-1, 1, 64)[s] = float("nan")
    assert torch.equal(bits(kc), bits(want_k))
    assert torch.equal(bits(vc), bits(want_v))


def test_cuda_graph_replay_with_new_slots():
    dtype = torch.float16
    batch = PagedBatch([9], 4, 2, 64, 16, dtype, "vllm", seed=6)
    key, value, slots, _ = tokens_of(batch, pad_every=100)
    kc = torch.full_like(batch.k_cache, float("nan"))
    vc = torch.full_like(batch.v_cache, float("nan"))
    static_slots = torch.full_like(slots, -1)
    ops.reshape_and_cache(key, value, kc, vc, static_slots, "auto", 1.0, 1.0)  # warm-up: all padding
    assert torch.isnan(kc).all()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ops.reshape_and_cache(key, value, kc, vc, static_slots, "auto", 1.0, 1.0)
    static_slots.copy_(slots)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(bits(kc), bits(batch.k_cache))
    assert torch.equal(bits(vc), bits(batch.v_cache))


def test_bad_inputs_raise_naming_the_argument():
    dtype = torch.float16
    key = torch.randn(3, 2, 64, device="cuda", dtype=dtype)
    kc = torch.zeros(4, 2, 8, 16, 8, device="cuda", dtype=dtype)
    vc = torch.zeros(4, 2, 64, 16, device="cuda", dtype=dtype)
    slots = torch.arange(3, device="cuda")
    with pytest.raises(ValueError, match=r"key_cache must be uint8 or .* with kv_cache_dtype='fp8'"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "fp8", 1.0, 1.0)  # a float16 cache
    with pytest.raises(NotImplementedError, match="kv_cache_dtype='fp8_inc'"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "fp8_inc", 1.0, 1.0)
    with pytest.raises(ValueError, match="slot_mapping must be int64"):
        ops.reshape_and_cache(key, key, kc, vc, slots.int(), "auto", 1.0, 1.0)
    with pytest.raises(ValueError, match="slot_mapping has 3 entries but key only 2"):
        ops.reshape_and_cache(key[:2], key[:2], kc, vc, slots, "auto", 1.0, 1.0)
    with pytest.raises(ValueError, match=r"key_cache.shape\[1\] \(num_kv_heads"):
        ops.reshape_and_cache(key, key, kc[:, :1].contiguous(), vc, slots, "auto", 1.0, 1.0)
    with pytest.raises(ValueError, match="value must have key's shape"):
        ops.reshape_and_cache(key, key[:, :1], kc, vc, slots, "auto", 1.0, 1.0)
    with pytest.raises(ValueError, match="contiguous last dimension"):
        ops.reshape_and_cache(key.transpose(1, 2).contiguous().transpose(1, 2), key, kc, vc, slots, "auto", 1.0, 1.0)
    with pytest.raises(ValueError, match="packed within a block"):
        ops.reshape_and_cache(key, key, torch.zeros(4, 2, 8, 16, 16, device="cuda", dtype=dtype)[..., :8], vc,
                              slots, "auto", 1.0, 1.0)
    with pytest.raises(ValueError, match="expanded tensor"):
        ops.reshape_and_cache(key[:1].expand(3, 2, 64), key, kc, vc, slots, "auto", 1.0, 1.0)
    with pytest.raises(NotImplementedError, match="differs from key dtype .* kv_cache_dtype='auto'"):
        ops.reshape_and_cache(key, key, kc.float(), vc, slots, "auto", 1.0, 1.0)
    nc = torch.zeros(4, 16, 2, 64, device="cuda", dtype=dtype)
    with pytest.raises(ValueError, match="value_cache must have key_cache's shape"):
        ops.reshape_and_cache_flash(key, key, nc, nc[:, :8], slots, "auto", 1.0, 1.0)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        ops.reshape_and_cache_flash(key, key, nc, nc, slots.cpu(), "auto", 1.0, 1.0)


# ---- fp8 caches -----------------------------------------------------------------------------------

FP8 = {"fp8": (torch.float8_e4m3fn, 448.0), "fp8_e4m3": (torch.float8_e4m3fn, 448.0),
       "fp8_e5m2": (torch.float8_e5m2, 57344.0)}
FILL = 0xA5  # the caches' bytes before the write


def fp8_reference(x, scale, kind):
    """vLLM's quantisation in torch, as uint8 codes: x / scale in fp32 (a tensor division: no
    reciprocal), clamped to ±the largest finite value (torch's cast does not saturate), cast to
    float8 (round to nearest even)."""
    dt, top = FP8[kind]
    q = x.float() / torch.full_like(x, scale, dtype=torch.float32)
    return q.clamp(-top, top).to(dt).view(torch.uint8)


def fp8_problem(dtype, kind, ks, vs, seed):
    """key/value [45, 2, 64]: normal values spread past the fp8 range at their scale, plus edges
    (±inf, ±NaN, ±0, ±the largest finite value · scale, twice it) in token 3; slots distinct,
    every 7th token padding (−1)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    T, H, D, nb, bs = 45, 2, 64, 6, 16
    top = FP8[kind][1]
    inf, nan = float("inf"), float("nan")

    def make(scale):
        x = torch.randn(T, H, D, generator=g, device="cuda") * (0.6 * top * scale)
        edges = [inf, -inf, nan, -nan, 0.0, -0.0, top * scale, -top * scale, 2 * top * scale, 1e-30]
        x[3, 1, :len(edges)] = torch.tensor(edges, device="cuda")
        return x.to(dtype)

    key, value = make(ks), make(vs)
    slots = torch.randperm(nb * bs, generator=g, device="cuda")[:T].clone()
    slots[::7] = -1
    return key, value, slots, (nb, bs, H, D)


def fp8_caches(layout, geom, kind, cache_type):
    nb, bs, H, D = geom
    if layout == "vllm":
        shapes = [(nb, H, D // 16, bs, 16), (nb, H, D, bs)]
    else:
        shapes = [(nb, bs, H, D)] * 2
    caches = [torch.full(s, FILL, dtype=torch.uint8, device="cuda") for s in shapes]
    if cache_type == "float8":
        caches = [c.view(FP8[kind][0]) for c in caches]
    return caches


def expected_caches(key, value, slots, layout, geom, kind, ks, vs):
    """The reference codes scattered by torch indexing into NHD, then permuted to the layout."""
    nb, bs, H, D = geom
    out = []
    for which, x, scale in (("key", key, ks), ("value", value, vs)):
        nhd = torch.full((nb * bs, H, D), FILL, dtype=torch.uint8, device="cuda")
        real = slots >= 0
        nhd[slots[real]] = fp8_reference(x[:slots.numel()][real], scale, kind)
        out.append(to_layout(nhd.view(nb, bs, H, D), layout, which))
    return out


def to_layout(nhd, layout, which):
    """An NHD [nb, bs, H, D] tensor in the layout's order: vLLM key [nb, H, D/16, bs, 16] (x = 16
    for 1-byte elements), vLLM value [nb, H, D, bs]."""
    nb, bs, H, D = nhd.shape
    if layout == "vllm":
        nhd = nhd.view(nb, bs, H, D // 16, 16).permute(0, 2, 3, 1, 4) if which == "key" else nhd.permute(0, 2, 3, 1)
    return nhd.contiguous()


def assert_codes(got, want, src_nan_sign, kind, what):
    """got == want byte for byte except where the source was NaN: there a NaN code with the source's
    sign (torch's GPU division may drop a NaN's sign; muh keeps it, muh/kv_quant.hpp)."""
    got = got.contiguous().view(torch.uint8)
    nan_pos = src_nan_sign != 0
    assert torch.equal(got[~nan_pos], want[~nan_pos]), f"{what}: codes differ from torch's quantisation"
    n = got[nan_pos]
    assert n.numel() > 0, f"{what}: the case is meant to write NaN"
    assert torch.isnan(n.view(FP8[kind][0]).float()).all(), f"{what}: NaN sources must give NaN codes, got {n.tolist()}"
    assert torch.equal(n >= 0x80, src_nan_sign[nan_pos] < 0), f"{what}: a NaN code lost its sign"


def nan_signs(x, slots, layout, which, geom):
    """+1 / −1 at the cache bytes written from a NaN source of that sign (the sign bit of x's 16-bit
    pattern), 0 elsewhere; in the layout's order."""
    nb, bs, H, D = geom
    s = torch.zeros((nb * bs, H, D), dtype=torch.int8, device="cuda")
    real = slots >= 0
    src = x[:slots.numel()][real]
    neg = src.view(torch.int16) < 0
    s[slots[real]] = torch.where(torch.isnan(src), torch.where(neg, -1, 1), 0).to(torch.int8)
    return to_layout(s.view(nb, bs, H, D), layout, which)


@pytest.mark.parametrize("scales", ["float", "tensor0d", "tensor1"])
@pytest.mark.parametrize("cache_type", ["uint8", "float8"])
@pytest.mark.parametrize("layout", ["vllm", "nhd"])
@pytest.mark.parametrize("kind", ["fp8", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("dtype", DT16, ids=["fp16", "bf16"])
def test_fp8_write_matches_torch(dtype, kind, layout, cache_type, scales):
    ks, vs = (0.37, 2.5) if kind != "fp8_e4m3" else (2.5, 0.37)
    key, value, slots, geom = fp8_problem(dtype, kind, ks, vs, seed=len(kind) * 7 + (layout == "nhd"))
    kc, vc = fp8_caches(layout, geom, kind, cache_type)
    if scales == "float":
        a, b = ks, vs
    elif scales == "tensor0d":
        a, b = torch.tensor(ks, device="cuda"), torch.tensor(vs, device="cuda")
    else:  # vLLM's [1] scales
        a, b = torch.tensor([ks], device="cuda"), torch.tensor([vs], device="cuda")
    op = ops.reshape_and_cache if layout == "vllm" else ops.reshape_and_cache_flash
    op(key, value, kc, vc, slots, kind, a, b)
    want_k, want_v = expected_caches(key, value, slots, layout, geom, kind, ks, vs)
    for got, want, x, which in ((kc, want_k, key, "key"), (vc, want_v, value, "value")):
        assert_codes(got, want, nan_signs(x, slots, layout, which, geom), kind,
                     f"{which}_cache ({kind}, {layout}, {cache_type}, {scales} scales)")


def test_fp8_into_interleaved_v1_cache_with_qkv_slices():
    # vLLM V1's [num_blocks, 2, block_size, kv_heads, d] uint8 cache, key/value slices of a qkv row.
    kind, ks, vs = "fp8_e4m3", 0.5, 3.0
    key, value, slots, geom = fp8_problem(torch.bfloat16, kind, ks, vs, seed=11)
    nb, bs, H, D = geom
    T = key.shape[0]
    qkv = torch.randn(T, (4 + 2 * H) * D, device="cuda").to(torch.bfloat16)
    qkv[:, 4 * D:(4 + H) * D] = key.reshape(T, H * D)
    qkv[:, (4 + H) * D:] = value.reshape(T, H * D)
    k_view = qkv[:, 4 * D:(4 + H) * D].view(T, H, D)
    v_view = qkv[:, (4 + H) * D:].view(T, H, D)
    kv = torch.full((nb, 2, bs, H, D), FILL, dtype=torch.uint8, device="cuda")
    ops.reshape_and_cache_flash(k_view, v_view, kv[:, 0], kv[:, 1], slots, kind, ks, vs)
    want_k, want_v = expected_caches(key, value, slots, "nhd", geom, kind, ks, vs)
    assert_codes(kv[:, 0], want_k, nan_signs(key, slots, "nhd", "key", geom), kind, "key half")
    assert_codes(kv[:, 1], want_v, nan_signs(value, slots, "nhd", "value", geom), kind, "value half")


def test_fp8_cuda_graph_replay_with_float_scales():
    # Float scales need no host read: the fp8 write captures and replays like 'auto'.
    kind, ks, vs = "fp8", 1.5, 0.75
    key, value, slots, geom = fp8_problem(torch.float16, kind, ks, vs, seed=12)
    kc, vc = fp8_caches("vllm", geom, kind, "uint8")
    static_slots = torch.full_like(slots, -1)
    ops.reshape_and_cache(key, value, kc, vc, static_slots, kind, ks, vs)  # warm-up: all padding
    assert (kc == FILL).all() and (vc == FILL).all()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ops.reshape_and_cache(key, value, kc, vc, static_slots, kind, ks, vs)
    static_slots.copy_(slots)
    g.replay()
    torch.cuda.synchronize()
    want_k, want_v = expected_caches(key, value, slots, "vllm", geom, kind, ks, vs)
    assert_codes(kc, want_k, nan_signs(key, slots, "vllm", "key", geom), kind, "key_cache after replay")
    assert_codes(vc, want_v, nan_signs(value, slots, "vllm", "value", geom), kind, "value_cache after replay")


def test_fp8_bad_inputs_raise_naming_the_argument():
    key = torch.randn(3, 2, 64, device="cuda", dtype=torch.float16)
    kc = torch.zeros(4, 2, 4, 16, 16, device="cuda", dtype=torch.uint8)
    vc = torch.zeros(4, 2, 64, 16, device="cuda", dtype=torch.uint8)
    nc = torch.zeros(4, 16, 2, 64, device="cuda", dtype=torch.uint8)
    slots = torch.arange(3, device="cuda")
    one = torch.ones((), device="cuda")
    with pytest.raises(ValueError, match=r"key_cache must be uint8 or Float8_e4m3fn .*kv_cache_dtype='fp8', got BFloat16"):
        ops.reshape_and_cache_flash(key, key, nc.bfloat16(), nc, slots, "fp8", 1.0, 1.0)
    with pytest.raises(ValueError, match=r"value_cache must be uint8 or Float8_e5m2"):
        ops.reshape_and_cache_flash(key, key, nc, nc.view(torch.float8_e4m3fn), slots, "fp8_e5m2", 1.0, 1.0)
    with pytest.raises(ValueError, match=r"k_scale must be finite and > 0 .*got 0"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "fp8", 0.0, 1.0)
    with pytest.raises(ValueError, match=r"v_scale must be finite and > 0 .*got -1"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "fp8_e5m2", 1.0, -1.0)
    with pytest.raises(ValueError, match=r"v_scale must be finite and > 0 .*got -?nan"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "fp8", one, one * float("nan"))
    with pytest.raises(ValueError, match=r"k_scale must be finite and > 0 .*got inf"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "fp8", 1e300, 1.0)  # inf as a float32
    with pytest.raises(ValueError, match="k_scale must hold one value"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "fp8", torch.ones(2, device="cuda"), one)
    with pytest.raises(NotImplementedError, match="key is float32 with kv_cache_dtype='fp8'"):
        ops.reshape_and_cache(key.float(), key.float(), kc, vc, slots, "fp8", 1.0, 1.0)
    with pytest.raises(ValueError, match=r"head_size / x"):  # x is 16 for fp8, not 8
        ops.reshape_and_cache(key, key, torch.zeros(4, 2, 8, 16, 8, device="cuda", dtype=torch.uint8), vc, slots,
                              "fp8", 1.0, 1.0)
    with pytest.raises(NotImplementedError, match="differs from key dtype"):  # uint8 caches need an fp8 kind
        ops.reshape_and_cache(key, key, kc, vc, slots, "auto", 1.0, 1.0)
    with pytest.raises(NotImplementedError, match="kv_cache_dtype='fp8_e4m3fn'"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "fp8_e4m3fn", 1.0, 1.0)
    # Nothing was written by a refused call.
    assert not kc.any() and not vc.any() and not nc.any()
    # 'auto' reads neither scale (as vLLM): a zero scale is fine there.
    hc = torch.zeros(4, 16, 2, 64, device="cuda", dtype=torch.float16)
    ops.reshape_and_cache_flash(key, key, hc, hc.clone(), slots, "auto", 0.0, float("nan"))


# ---- merge_attn_states --------------------------------------------------------------------------

def merge_reference(p, pl, s, sl):
    """vLLM's merge in torch fp32: +inf lse is −inf; both empty → prefix_output, lse −inf."""
    inf = float("inf")
    pl = torch.where(pl == inf, -inf, pl)
    sl = torch.where(sl == inf, -inf, sl)
    m = torch.maximum(pl, sl)
    both = m == -inf
    m0 = torch.where(both, torch.zeros_like(m), m)
    ep, es = torch.exp(pl - m0), torch.exp(sl - m0)
    tot = ep + es
    wp = torch.where(both, torch.ones_like(m), ep / torch.where(both, torch.ones_like(tot), tot))
    ws = torch.where(both, torch.zeros_like(m), es / torch.where(both, torch.ones_like(tot), tot))
    lse = torch.where(both, m, m0 + torch.log(tot))
    wp_t, ws_t = wp.t()[:, :, None], ws.t()[:, :, None]  # [T, H, 1]
    pf = torch.where(wp_t == 0, torch.zeros_like(p.float()), p.float() * wp_t)
    sf = torch.where(ws_t == 0, torch.zeros_like(s.float()), s.float() * ws_t)
    return pf + sf, lse


def special_lse(h, t, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    pl = torch.rand(h, t, generator=g, device="cuda") * 18 - 6
    sl = torch.rand(h, t, generator=g, device="cuda") * 18 - 6
    inf = float("inf")
    flat_p, flat_s = pl.t().reshape(-1), sl.t().reshape(-1)  # row r = token · H + head
    r = torch.arange(flat_p.numel(), device="cuda")
    flat_p[r % 9 == 0] = -inf
    flat_s[r % 9 == 1] = inf
    flat_p[r % 9 == 2] = -inf
    flat_s[r % 9 == 2] = -inf
    flat_p[r % 9 == 3] = inf
    flat_s[r % 9 == 3] = -inf
    return flat_p.view(t, h).t().contiguous(), flat_s.view(t, h).t().contiguous()


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in-place"])
@pytest.mark.parametrize("tokens,heads,d", [(1, 4, 128), (7, 5, 64), (33, 3, 80), (9, 2, 13)])
@pytest.mark.parametrize("dtype", DT16 + [torch.float32], ids=["fp16", "bf16", "fp32"])
def test_merge_matches_torch(dtype, tokens, heads, d, in_place):
    g = torch.Generator(device="cuda").manual_seed(tokens * 31 + d)
    p = torch.randn(tokens, heads, d, generator=g, device="cuda").to(dtype)
    s = torch.randn(tokens, heads, d, generator=g, device="cuda").to(dtype)
    pl, sl = special_lse(heads, tokens, tokens + d)
    want, want_lse = merge_reference(p, pl, s, sl)
    out = p if in_place else torch.full_like(p, float("nan"))
    p_orig = p.clone()
    out_lse = torch.full_like(pl, float("nan"))
    ops.merge_attn_states(out, p, pl, s, sl, out_lse)
    both = torch.isneginf(torch.where(pl == float("inf"), -float("inf"), pl)) & \
        torch.isneginf(torch.where(sl == float("inf"), -float("inf"), sl))
    both_t = both.t()[:, :, None].expand_as(out)
    assert torch.equal(bits(out[both_t]), bits(p_orig[both_t])), "both empty: the output is prefix_output"
    eps = torch.finfo(dtype).eps
    err = (out.float() - want).abs()
    tol = 2 * eps * want.abs() + 16 * 2.0 ** -24 * (p_orig.float().abs() + s.float().abs())
    assert torch.isfinite(out).all()
    assert (err <= tol).all(), f"max error {err.max().item():.3e}"
    assert torch.equal(torch.isneginf(out_lse), torch.isneginf(want_lse))
    fin = torch.isfinite(want_lse)
    assert torch.allclose(out_lse[fin], want_lse[fin], rtol=4e-6, atol=4e-6)


@pytest.mark.parametrize("split", [0, 1, 37, 100])
@pytest.mark.parametrize("dtype", DT16)
def test_merged_partials_equal_attention_over_all_keys(dtype, split):
    # Prefix keys [0, split) and suffix keys [split, 100): each partial from fp32 softmax, stored
    # in dtype (as a kernel stores its partial), merged by muh; against attention over all keys.
    g = torch.Generator(device="cuda").manual_seed(split)
    T, H, D, L = 11, 4, 64, 100
    q = torch.randn(T, H, D, generator=g, device="cuda")
    k = torch.randn(L, H, D, generator=g, device="cuda")
    v = torch.randn(L, H, D, generator=g, device="cuda")
    scale = 1 / math.sqrt(D)

    def attend(lo, hi, dt):
        qq, kk, vv = (x.to(dt).float() for x in (q, k[lo:hi], v[lo:hi]))
        sc = torch.einsum("thd,lhd->htl", qq, kk) * scale
        if hi == lo:
            return torch.zeros(T, H, D, device="cuda"), torch.full((H, T), float("-inf"), device="cuda")
        # einsum returns [T, H, D] with strides [D, T·D, 1]; a kernel's partial has its heads
        # packed, which merge_attn_states requires (test_merge_bad_inputs_raise).
        o = torch.einsum("htl,lhd->thd", torch.softmax(sc, -1), vv).contiguous()
        return o, torch.logsumexp(sc, -1)

    po, pl = attend(0, split, dtype)
    so, sl = attend(split, L, dtype)
    out = torch.empty(T, H, D, device="cuda", dtype=dtype)
    ops.merge_attn_states(out, po.to(dtype), pl, so.to(dtype), sl)
    ref32, _ = attend(0, L, dtype)
    naive = torch.einsum("htl,lhd->thd", torch.softmax(
        torch.einsum("thd,lhd->htl", q.to(dtype), k.to(dtype)) * scale, -1), v.to(dtype)).float()
    assert_close_to_reference(out, ref32, naive, f"merge at split {split}")


def test_merge_bad_inputs_raise():
    p = torch.randn(3, 2, 64, device="cuda", dtype=torch.float16)
    lse = torch.zeros(2, 3, device="cuda")
    with pytest.raises(ValueError, match=r"prefix_lse must be \[num_heads, num_tokens\]"):
        ops.merge_attn_states(p.clone(), p, lse.t(), p, lse)
    with pytest.raises(ValueError, match="prefix_lse must be float32"):
        ops.merge_attn_states(p.clone(), p, lse.half(), p, lse)
    with pytest.raises(ValueError, match="suffix_output must be"):
        ops.merge_attn_states(p.clone(), p, lse, p.float(), lse)
    with pytest.raises(ValueError, match="heads packed"):
        ops.merge_attn_states(p.clone(), p.transpose(0, 1).contiguous().transpose(0, 1), lse, p, lse)
    with pytest.raises(ValueError, match="output_lse overlaps"):
        ops.merge_attn_states(p.clone(), p, lse, p, lse, lse)


def test_stands_in_for_vllms_namespaces(monkeypatch):
    # vLLM calls torch.ops._C_cache_ops.reshape_and_cache(_flash) and torch.ops._C.merge_attn_states
    # (output_lse second); torch.ops.muh takes the same calls.
    monkeypatch.setattr(torch.ops, "_C_cache_ops", torch.ops.muh, raising=False)
    monkeypatch.setattr(torch.ops, "_C", torch.ops.muh, raising=False)
    batch = PagedBatch([13], 4, 2, 64, 16, torch.bfloat16, "nhd", seed=8)
    key, value, slots, _ = tokens_of(batch)
    kc = torch.full_like(batch.k_cache, float("nan"))
    vc = torch.full_like(batch.v_cache, float("nan"))
    one = torch.ones((), device="cuda")
    torch.ops._C_cache_ops.reshape_and_cache_flash(key, value, kc, vc, slots, "auto", one, one)
    assert torch.equal(bits(kc), bits(batch.k_cache)) and torch.equal(bits(vc), bits(batch.v_cache))
    p = torch.randn(5, 4, 64, device="cuda", dtype=torch.bfloat16)
    lse = torch.randn(4, 5, device="cuda")
    out, out_lse = torch.empty_like(p), torch.empty_like(lse)
    torch.ops._C.merge_attn_states(out, out_lse, p, lse, p, lse)
    assert torch.equal(out, p)  # a partial merged with itself is itself (weights 1/2 each)
    assert torch.allclose(out_lse, lse + math.log(2), rtol=1e-6, atol=1e-6)
