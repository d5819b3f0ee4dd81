"""muh.ops on the GPU: each op against SDPA in fp32 on gathered KV (random shapes), under
torch.compile(fullgraph=True), inside a captured CUDA graph, and its argument errors."""

import gc
import math
import random

import pytest

from gpu_helpers import (COMPILED_16, PagedBatch, VarlenBatch, assert_close_to_reference, capture_graph, ops,
                         pick, seed_of, torch)

DTYPE_IDS = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


def _id(case):
    return "-".join(str(x) for x in case)


# ---- paged_decode (NHD, muh's plan) -------------------------------------------------------------

def decode_cases():
    rng = random.Random(5)
    cases = []
    # (dtype, head_dim, num_seqs / lens, q heads, kv heads, page size)
    for dtype, hd in COMPILED_16:
        cases.append((dtype, hd, (1,), 8, 8, 16))                       # seq_len 1, MHA
        cases.append((dtype, hd, (0, 17, 512, 513), 16, 4, 16))         # empty, odd, one / two partitions
        cases.append((dtype, hd, tuple(rng.randint(1, 3000) for _ in range(5)), 32, 4, 16))  # GQA 8
        cases.append((dtype, hd, (4096, 33), 8, 1, 32))                 # MQA, page 32, many partitions
    return cases


@pytest.mark.parametrize("case", decode_cases(), ids=lambda c: f"{DTYPE_IDS[c[0]]}-hd{c[1]}-{_id(c[2])}-{c[3]}q{c[4]}kv-p{c[5]}")
def test_paged_decode_matches_sdpa(case):
    dtype, hd, lens, hq, hkv, page = case
    b = PagedBatch(lens, hq, hkv, hd, page, dtype, "nhd", seed=seed_of(case))
    scale = 1.0 / math.sqrt(hd)
    out, lse = ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.max_seq_len,
                                return_lse=True)
    ref32, naive, lse_ref = b.reference(scale)
    assert out.shape == b.q.shape and out.dtype == dtype
    assert_close_to_reference(out, ref32, naive, "paged_decode out")
    finite = torch.isfinite(lse_ref)
    assert torch.equal(torch.isfinite(lse), finite), "lse must be -inf exactly for empty sequences"
    torch.testing.assert_close(lse[finite], lse_ref[finite], atol=2e-3, rtol=1e-3)


@pytest.mark.parametrize("splits", [1, 2, 7])
def test_paged_decode_forced_splits_agree(splits):
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    b = PagedBatch((3000, 700, 1), 16, 4, hd, 16, dtype, "nhd", seed=11)
    ref32, naive, _ = b.reference(1.0 / math.sqrt(hd))
    out = ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.max_seq_len,
                           num_splits=splits)
    assert_close_to_reference(out, ref32, naive, f"paged_decode num_splits={splits}")


def test_paged_decode_default_max_seq_len_and_scale():
    dtype = torch.float16
    hd = pick(dtype, (128, 64, 256))
    b = PagedBatch((100, 250), 8, 2, hd, 16, dtype, "nhd", seed=3)
    ref32, naive, _ = b.reference(0.05)
    out = ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, softmax_scale=0.05)
    assert_close_to_reference(out, ref32, naive, "paged_decode scale=0.05")


# ---- vLLM's paged_attention_v1 / v2 (vLLM layout) -------------------------------------------------

def vllm_cases():
    rng = random.Random(7)
    cases = []
    for dtype, hd in COMPILED_16:
        cases.append((dtype, hd, (1, 16, 31), 8, 8, 16))
        cases.append((dtype, hd, tuple(rng.randint(1, 2500) for _ in range(4)), 32, 8, 16))
        cases.append((dtype, hd, (513, 1500), 16, 4, 8))
    return cases


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("case", vllm_cases(), ids=lambda c: f"{DTYPE_IDS[c[0]]}-hd{c[1]}-{_id(c[2])}-{c[3]}q{c[4]}kv-p{c[5]}")
def test_vllm_paged_attention_matches_sdpa(case, version):
    dtype, hd, lens, hq, hkv, page = case
    b = PagedBatch(lens, hq, hkv, hd, page, dtype, "vllm", seed=seed_of(case))
    scale = 1.0 / math.sqrt(hd)
    out = torch.full_like(b.q, float("nan"))
    one = torch.ones((), device="cuda")
    if version == 1:
        torch.ops.muh.paged_attention_v1(out, b.q, b.k_cache, b.v_cache, hkv, scale, b.block_table,
                                         b.seq_lens, page, b.max_seq_len, None, "auto", one, one,
                                         0, 0, 0, 64, 0)
    else:
        parts = (b.max_seq_len + 511) // 512
        exp_sums = torch.empty(len(lens), hq, parts, device="cuda")
        max_logits = torch.empty_like(exp_sums)
        tmp_out = torch.empty(len(lens), hq, parts, hd, dtype=dtype, device="cuda")
        torch.ops.muh.paged_attention_v2(out, exp_sums, max_logits, tmp_out, b.q, b.k_cache, b.v_cache,
                                         hkv, scale, b.block_table, b.seq_lens, page, b.max_seq_len,
                                         None, "auto", one, one, 0, 0, 0, 64, 0)
    ref32, naive, _ = b.reference(scale)
    assert_close_to_reference(out, ref32, naive, f"paged_attention_v{version}")


def test_vllm_strided_query_rows():
    # vLLM slices query out of a fused qkv projection: rows strided, heads packed.
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    b = PagedBatch((40, 300), 16, 4, hd, 16, dtype, "vllm", seed=9)
    qkv = torch.randn(2, (16 + 2 * 4) * hd, device="cuda").to(dtype)
    q = qkv[:, :16 * hd].view(2, 16, hd)
    assert not q.is_contiguous()
    out = torch.empty(2, 16, hd, dtype=dtype, device="cuda")
    # vLLM 0.6.3's positional arguments after max_seq_len: alibi_slopes, kv_cache_dtype, k_scale,
    # v_scale (floats there), tp_rank and the block-sparse ones.
    ops.paged_attention_v1(out, q, b.k_cache, b.v_cache, 4, hd ** -0.5, b.block_table, b.seq_lens, 16,
                           b.max_seq_len, None, "auto", 1.0, 1.0, 0, 0, 0, 64, 0)
    ref32, naive, _ = b.reference(hd ** -0.5, q=q.contiguous())
    assert_close_to_reference(out, ref32, naive, "paged_attention_v1 strided query")


# ---- flash_attn_varlen_func -----------------------------------------------------------------------

def prefill_cases():
    rng = random.Random(13)
    cases = []
    for dtype, hd in COMPILED_16:
        for causal in (False, True):
            cases.append((dtype, hd, causal, (1,), (1,), 8, 8))
            ql = tuple(rng.randint(1, 300) for _ in range(3))
            kl = tuple(q + rng.randint(0, 200) for q in ql)           # k ≥ q: bottom-right causal
            cases.append((dtype, hd, causal, ql, kl, 16, 4))
            cases.append((dtype, hd, causal, (777, 64), (777, 1000), 32, 4))
            cases.append((dtype, hd, causal, (130,), (130,), 8, 1))   # MQA
    return cases


@pytest.mark.parametrize("case", prefill_cases(), ids=lambda c: f"{DTYPE_IDS[c[0]]}-hd{c[1]}-{'causal' if c[2] else 'full'}-q{_id(c[3])}-k{_id(c[4])}-{c[5]}q{c[6]}kv")
def test_flash_attn_varlen_matches_sdpa(case):
    dtype, hd, causal, ql, kl, hq, hkv = case
    b = VarlenBatch(ql, kl, hq, hkv, hd, dtype, seed=seed_of(case))
    scale = 1.0 / math.sqrt(hd)
    out, lse, s_dmask = ops.flash_attn_varlen_func(b.q, b.k, b.v, b.cu_q, b.cu_k, max(ql), max(kl),
                                                   causal=causal, return_attn_probs=True)
    assert s_dmask.numel() == 0  # FlashAttention's S_dmask at dropout_p 0
    ref32, naive, lse_ref = b.reference(scale, causal)
    assert out.shape == b.q.shape and lse.shape == (hq, b.q.shape[0]) and lse.dtype == torch.float32
    assert_close_to_reference(out, ref32, naive, "flash_attn_varlen_func out")
    torch.testing.assert_close(lse, lse_ref, atol=2e-3, rtol=1e-3)


def test_flash_attn_varlen_scale_and_plain_return():
    dtype = torch.float16
    hd = pick(dtype, (64, 128, 256))
    b = VarlenBatch((50, 9), (70, 9), 8, 2, hd, dtype, seed=1)
    out = ops.flash_attn_varlen_func(b.q, b.k, b.v, b.cu_q, b.cu_k, 50, 70, softmax_scale=0.3)
    assert isinstance(out, torch.Tensor)
    ref32, naive, _ = b.reference(0.3, False)
    assert_close_to_reference(out, ref32, naive, "flash_attn_varlen_func scale=0.3")


def test_flash_attn_varlen_strided_qkv():
    # FlashAttention accepts q/k/v sliced from one packed qkv tensor (last dim contiguous).
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    b = VarlenBatch((64, 100), (64, 100), 8, 8, hd, dtype, seed=2)
    qkv = torch.stack([b.q, b.k, b.v], dim=1)  # [T, 3, H, D]
    q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    assert not q.is_contiguous()
    out = ops.flash_attn_varlen_func(q, k, v, b.cu_q, b.cu_k, 100, 100, causal=True)
    ref32, naive, _ = b.reference(hd ** -0.5, True)
    assert_close_to_reference(out, ref32, naive, "flash_attn_varlen_func strided qkv")


# ---- Argument errors: ValueError naming the argument, NotImplementedError for what muh lacks -------

@pytest.fixture(scope="module")
def vllm_batch():
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    return PagedBatch((20, 40), 8, 2, hd, 16, dtype, "vllm", seed=41)


def _v1_args(b, **over):
    one = torch.ones((), device="cuda")
    args = dict(out=torch.empty_like(b.q), query=b.q, key_cache=b.k_cache, value_cache=b.v_cache,
                num_kv_heads=2, scale=0.1, block_tables=b.block_table, seq_lens=b.seq_lens,
                block_size=16, max_seq_len=40, alibi_slopes=None, kv_cache_dtype="auto",
                k_scale=one, v_scale=one, tp_rank=0, blocksparse_local_blocks=0,
                blocksparse_vert_stride=0, blocksparse_block_size=64, blocksparse_head_sliding_step=0)
    args.update(over)
    return list(args.values())


@pytest.mark.parametrize("over,exc,words", [
    (dict(alibi_slopes="alibi7"), ValueError, "alibi_slopes"),
    (dict(kv_cache_dtype="int8"), NotImplementedError, "kv_cache_dtype='int8'"),
    # fp8 is read (test_vllm_dropin.py), from uint8 / float8 caches: a bf16 cache is refused.
    (dict(kv_cache_dtype="fp8"), ValueError, "key_cache must be uint8 or"),
    (dict(kv_cache_dtype="fp8_e5m2"), ValueError, "key_cache must be uint8 or"),
    (dict(blocksparse_vert_stride=4), NotImplementedError, "block-sparse"),
    (dict(block_tables="int64"), ValueError, "block_tables must be Int"),
    (dict(seq_lens="cpu"), ValueError, "seq_lens must be a CUDA tensor"),
    (dict(num_kv_heads=3), ValueError, "num_kv_heads (3)"),
    (dict(block_size=8), ValueError, "block_size"),
    (dict(out="short"), ValueError, "out must have query's shape"),
    (dict(key_cache="noncontig"), ValueError, "key_cache must be contiguous"),
    (dict(key_cache="fp16"), NotImplementedError, "key_cache dtype"),
    (dict(query="lastdim"), ValueError, "query must have a contiguous last dimension"),
    (dict(scale=-1.0), ValueError, "scale must be a finite number > 0"),
])
def test_vllm_bad_arguments(vllm_batch, over, exc, words):
    b = vllm_batch
    subst = {
        "alibi7": torch.ones(7, device="cuda"),  # one slope short of the 8 heads
        "int64": b.block_table.long(),
        "cpu": b.seq_lens.cpu(),
        "short": torch.empty(1, 8, b.head_dim, dtype=b.dtype, device="cuda"),
        "noncontig": b.k_cache.transpose(0, 1).contiguous().transpose(0, 1),
        "fp16": b.k_cache.half(),
        "lastdim": b.q.transpose(1, 2).contiguous().transpose(1, 2),
    }
    over = {k: subst.get(v, v) if isinstance(v, str) and k not in ("kv_cache_dtype",) else v
            for k, v in over.items()}
    with pytest.raises(exc) as e:
        torch.ops.muh.paged_attention_v1(*_v1_args(b, **over))
    assert words in str(e.value), str(e.value)


def test_flash_attn_bad_arguments():
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    b = VarlenBatch((10,), (10,), 8, 2, hd, dtype)
    f = ops.flash_attn_varlen_func
    with pytest.raises(ValueError, match="cu_seqlens_q must be Int"):
        f(b.q, b.k, b.v, b.cu_q.long(), b.cu_k, 10, 10)
    with pytest.raises(ValueError, match="must be a multiple of k's num_kv_heads"):
        f(b.q[:, :7], b.k, b.v, b.cu_q, b.cu_k, 10, 10)
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        f(b.q.cpu(), b.k.cpu(), b.v.cpu(), b.cu_q.cpu(), b.cu_k.cpu(), 10, 10)
    with pytest.raises(ValueError, match="k must be a CUDA tensor"):
        f(b.q, b.k.cpu(), b.v, b.cu_q, b.cu_k, 10, 10)
    with pytest.raises(ValueError, match="v must be"):
        f(b.q, b.k, b.v.half(), b.cu_q, b.cu_k, 10, 10)
    with pytest.raises(ValueError, match="softmax_scale must be a finite number > 0"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, softmax_scale=float("nan"))
    with pytest.raises(ValueError, match="q must be float16, bfloat16 or float32"):
        f(b.q.double(), b.k.double(), b.v.double(), b.cu_q, b.cu_k, 10, 10)
    # FlashAttention's arguments muh cannot honour, positional as FlashAttention orders them.
    with pytest.raises(NotImplementedError, match="dropout_p=0.1 "):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, dropout_p=0.1)
    with pytest.raises(NotImplementedError, match="dropout_p=0.125 "):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, 0.125, 0.5)
    # The variants (tests/python/gpu/test_variants.py): bad values name the argument, no launch.
    with pytest.raises(ValueError, match=r"window_size = \(-2, 0\)"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, 0.0, None, True, (-2, 0))
    with pytest.raises(ValueError, match="softcap must be a finite number >= 0"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, 0.0, None, False, (-1, -1), -30.0)
    with pytest.raises(ValueError, match="softcap must be a finite number >= 0"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, softcap=float("nan"))
    with pytest.raises(ValueError, match=r"alibi_slopes.shape\[0\] \(num_heads, as q\) must be 8"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, alibi_slopes=torch.ones(7, device="cuda"))
    with pytest.raises(ValueError, match="alibi_slopes must be Float"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, alibi_slopes=torch.ones(8, device="cuda", dtype=torch.half))
    with pytest.raises(NotImplementedError, match="alibi_slopes must be 1-D"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, alibi_slopes=torch.ones(2, 8, device="cuda"))
    with pytest.raises(ValueError, match=r"s_aux.shape\[0\] \(num_heads, as q\) must be 8"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, s_aux=torch.zeros(9, device="cuda"))
    with pytest.raises(ValueError, match="s_aux must be a CUDA tensor"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, s_aux=torch.zeros(8))
    # block_table is supported (the paged call, test_paged_dropins.py); dense k/v passed with one
    # are named as the wrong cache shape, before any launch.
    with pytest.raises(ValueError, match=r"k \(the key cache\) must be 4-D"):
        f(b.q, b.k, b.v, b.cu_q, b.cu_k, 10, 10, block_table=torch.zeros(1, 1, dtype=torch.int32, device="cuda"))


def test_paged_decode_bad_arguments():
    dtype = torch.float16
    hd = pick(dtype, (128, 64, 256))
    b = PagedBatch((20, 40), 8, 2, hd, 16, dtype, "nhd", seed=43)
    f = ops.paged_decode
    with pytest.raises(ValueError, match="k_cache must be 4-D"):
        f(b.q, b.k_cache[0], b.v_cache, b.block_table, b.seq_lens)
    with pytest.raises(ValueError, match="v_cache must have k_cache's shape"):
        f(b.q, b.k_cache, b.v_cache[:1], b.block_table, b.seq_lens)
    with pytest.raises(ValueError, match="block_table.shape\\[0\\]"):
        f(b.q, b.k_cache, b.v_cache, b.block_table[:1], b.seq_lens)
    with pytest.raises(ValueError, match="seq_lens must be Int"):
        f(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens.float())
    with pytest.raises(ValueError, match="num_splits must be >= 0"):
        f(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, num_splits=-2)
    with pytest.raises(ValueError, match="k_cache must be Half"):
        f(b.q, b.k_cache.bfloat16(), b.v_cache.bfloat16(), b.block_table, b.seq_lens)
    # muh's own validation (plan_decode): a sequence longer than its block table covers.
    with pytest.raises(ValueError):
        f(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, max_seq_len=10 ** 6)


# ---- torch.compile(fullgraph=True) -----------------------------------------------------------------

def test_ops_under_torch_compile_fullgraph():
    torch._dynamo.reset()
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    nb = PagedBatch((33, 700), 16, 4, hd, 16, dtype, "nhd", seed=21)
    vb = PagedBatch((33, 700), 16, 4, hd, 16, dtype, "vllm", seed=21)
    fb = VarlenBatch((40, 90), (60, 90), 16, 4, hd, dtype, seed=22)
    one = torch.ones((), device="cuda")
    scale = hd ** -0.5

    def decode(q):
        out, lse = ops.paged_decode(q, nb.k_cache, nb.v_cache, nb.block_table, nb.seq_lens, 700,
                                    return_lse=True)
        return out * 2, lse

    def v1(q):
        out = torch.empty_like(q)
        torch.ops.muh.paged_attention_v1(out, q, vb.k_cache, vb.v_cache, 4, scale, vb.block_table,
                                         vb.seq_lens, 16, 700, None, "auto", one, one, 0, 0, 0, 64, 0)
        return out + 1

    def v2(q):
        out = torch.empty_like(q)
        es = torch.empty(2, 16, 2, device=q.device)
        ml = torch.empty_like(es)
        tmp = torch.empty(2, 16, 2, hd, dtype=q.dtype, device=q.device)
        torch.ops.muh.paged_attention_v2(out, es, ml, tmp, q, vb.k_cache, vb.v_cache, 4, scale,
                                         vb.block_table, vb.seq_lens, 16, 700, None, "auto", one, one,
                                         0, 0, 0, 64, 0)
        return out - 1

    def prefill(q, k, v):
        out, lse, _ = ops.flash_attn_varlen_func(q, k, v, fb.cu_q, fb.cu_k, 90, 90, causal=True,
                                                 return_attn_probs=True)
        return out * 2, lse

    for name, fn, args in (("paged_decode", decode, (nb.q,)), ("paged_attention_v1", v1, (vb.q,)),
                           ("paged_attention_v2", v2, (vb.q,)), ("flash_attn_varlen_func", prefill, (fb.q, fb.k, fb.v))):
        compiled_fn = torch.compile(fn, fullgraph=True)
        got = compiled_fn(*args)
        want = fn(*args)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, atol=0, rtol=0, msg=lambda m: f"{name} compiled != eager: {m}")
    del compiled_fn, got, want
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.synchronize()


# ---- CUDA graph capture and replay -----------------------------------------------------------------

def test_ops_in_cuda_graph():
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    scale = hd ** -0.5
    one = torch.ones((), device="cuda")
    # Capture with some lengths, replay with others (within max_seq_len): the plan is fixed.
    nb = PagedBatch((2000, 1, 700), 16, 4, hd, 16, dtype, "nhd", seed=31)
    vb = PagedBatch((2000, 1, 700), 16, 4, hd, 16, dtype, "vllm", seed=31)
    fb = VarlenBatch((40, 90), (60, 90), 16, 4, hd, dtype, seed=32)
    v1_out = torch.empty_like(vb.q)
    v2_out = torch.empty_like(vb.q)
    parts = 4
    es = torch.empty(3, 16, parts, device="cuda")
    ml = torch.empty_like(es)
    tmp = torch.empty(3, 16, parts, hd, dtype=dtype, device="cuda")

    def step():
        d = ops.paged_decode(nb.q, nb.k_cache, nb.v_cache, nb.block_table, nb.seq_lens, 2000)
        torch.ops.muh.paged_attention_v1(v1_out, vb.q, vb.k_cache, vb.v_cache, 4, scale, vb.block_table,
                                         vb.seq_lens, 16, 2000, None, "auto", one, one, 0, 0, 0, 64, 0)
        torch.ops.muh.paged_attention_v2(v2_out, es, ml, tmp, vb.q, vb.k_cache, vb.v_cache, 4, scale,
                                         vb.block_table, vb.seq_lens, 16, 2000, None, "auto", one, one,
                                         0, 0, 0, 64, 0)
        p = ops.flash_attn_varlen_func(fb.q, fb.k, fb.v, fb.cu_q, fb.cu_k, 90, 90, causal=True)
        return d, p

    g, (d_out, p_out) = capture_graph(step)
    for replay in range(2):
        # New inputs in place: other lengths (shorter, and 0), new queries.
        new_lens = [[1500, 0, 700], [2000, 1, 1]][replay]  # each ≤ its captured length
        for bt in (nb, vb):
            bt.lens = list(new_lens)
            bt.seq_lens.copy_(torch.tensor(new_lens, dtype=torch.int32))
            bt.q.copy_(torch.randn_like(bt.q))
        fb.q.copy_(torch.randn_like(fb.q))
        g.replay()
        torch.cuda.synchronize()
        for bt, out, name in ((nb, d_out, "paged_decode"), (vb, v1_out, "paged_attention_v1"),
                              (vb, v2_out, "paged_attention_v2")):
            ref32, naive, _ = bt.reference(scale)
            # reference() trusts self.lens; the dense K/V of the longer capture lengths still hold.
            assert_close_to_reference(out, ref32, naive, f"{name} graph replay {replay}")
        ref32, naive, _ = fb.reference(scale, True)
        assert_close_to_reference(p_out, ref32, naive, f"flash_attn_varlen_func graph replay {replay}")
    del g, d_out, p_out
    gc.collect()
    torch.cuda.synchronize()
