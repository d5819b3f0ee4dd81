"""The paged-prefill drop-ins against SDPA in fp32 on the gathered K/V:
vLLM 0.6.3's context_attention_fwd (prefix from the 5-D/4-D cache, the chunk from k/v) and
flash_attn_varlen_func(..., block_table=, seqused_k=, out=) (vLLM V1's call; NHD and vLLM layouts).
Caches are in random page order with NaN in every slot no sequence owns (PagedBatch), so a read past
a sequence's length shows up as NaN; outputs are pre-filled with NaN, so a row not written does too."""

import pytest

from gpu_helpers import (COMPILED_16, PagedBatch, assert_close_to_reference, causal_mask, lse_reference, ops,
                         pick, sdpa, seed_of, torch)

DT = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _reference(q, ks, vs, q_lens, scale):
    """Per sequence b: q rows of length q_lens[b] against ks[b]/vs[b] [L, Hkv, D], causal bottom-right."""
    o32 = torch.zeros(q.shape, device="cuda")
    olp = torch.zeros(q.shape, device="cuda")
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), device="cuda")
    start = 0
    for b, lq in enumerate(q_lens):
        kb, vb = ks[b].permute(1, 0, 2), vs[b].permute(1, 0, 2)
        qb = q[start:start + lq].permute(1, 0, 2)
        mask = causal_mask(lq, kb.shape[1], "cuda")
        o32[start:start + lq] = sdpa(qb.float(), kb.float(), vb.float(), scale, mask).permute(1, 0, 2)
        olp[start:start + lq] = sdpa(qb, kb, vb, scale, mask).permute(1, 0, 2).float()
        lse[:, start:start + lq] = lse_reference(qb, kb, scale, mask)
        start += lq
    return o32, olp, lse


def _cu(lens):
    c = [0]
    for n in lens:
        c.append(c[-1] + n)
    return torch.tensor(c, dtype=torch.int32, device="cuda")


# ---- vLLM 0.6.3's context_attention_fwd ------------------------------------------------------------

CTX_CASES = [
    # (prefix lens, chunk lens, q heads, kv heads, page)
    ([0], [7], 4, 1, 16),
    ([1], [1], 4, 1, 16),
    ([15], [16], 6, 1, 16),
    ([16], [2], 8, 8, 16),
    ([100, 33], [64, 5], 6, 1, 16),
    ([257, 0], [1, 129], 4, 1, 16),
    ([40], [9], 8, 2, 32),
    # Equal chunks over long prefixes: the prefix part is the sm80 agent's key split of every q tile
    # (with MUH_CONTEXT_FUSE=1 the op runs both parts in one launch: plan_context_prefill) — a
    # seed-like chunk, GQA 6 with a sequence of no prefix and one shorter than its chunk, one token
    # each.
    ([2000], [256], 4, 1, 16),
    ([2000, 0, 37], [100, 100, 100], 6, 1, 16),
    ([3000, 700], [1, 1], 4, 1, 16),
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("head_dims", [(256,), (128,)])
@pytest.mark.parametrize("case", CTX_CASES, ids=lambda c: f"ctx{c[0]}_q{c[1]}_h{c[2]}x{c[3]}_p{c[4]}")
@pytest.mark.parametrize("start_loc", ["batch+1", "batch"])
def test_context_attention_fwd_matches_sdpa(dtype, head_dims, case, start_loc):
    t = DT[dtype]
    d = pick(t, head_dims)
    ctx, chunk, hq, hkv, page = case
    seed = seed_of((dtype, d, case, start_loc))
    cache = PagedBatch(ctx, hq, hkv, d, page, t, "vllm", seed=seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    n = sum(chunk)
    q = torch.randn(n, hq, d, generator=g, device="cuda").to(t)
    k = torch.randn(n, hkv, d, generator=g, device="cuda").to(t)
    v = torch.randn(n, hkv, d, generator=g, device="cuda").to(t)
    o = torch.full_like(q, float("nan"))
    cu = _cu(chunk)
    b_start_loc = cu if start_loc == "batch+1" else cu[:-1].contiguous()
    b_ctx = torch.tensor(ctx, dtype=torch.int32, device="cuda")
    b_seq = b_ctx + torch.tensor(chunk, dtype=torch.int32, device="cuda")
    with torch.no_grad():
        ops.context_attention_fwd(q, k, v, o, "auto", cache.k_cache, cache.v_cache, cache.block_table,
                                  b_start_loc, b_seq, b_ctx, max(chunk))
    scale = d ** -0.5
    ks, vs, start = [], [], 0
    for b, lq in enumerate(chunk):
        ks.append(torch.cat([cache.k[b], k[start:start + lq]]))
        vs.append(torch.cat([cache.v[b], v[start:start + lq]]))
        start += lq
    o32, olp, _ = _reference(q, ks, vs, chunk, scale)
    assert_close_to_reference(o, o32, olp, f"context_attention_fwd {dtype} hd{d} {case}")


@pytest.mark.parametrize("shape", [([300, 40], [64, 200]), ([2000, 900], [128, 128])], ids=["varlen", "split"])
def test_context_attention_fwd_streams_and_graph_replay(shape):
    """The op runs its chunk part on a stream of torch's pool beside the prefix part, joined before
    the merge — or, with MUH_CONTEXT_FUSE=1 and equal chunks over long prefixes (the second shape),
    both parts in one launch: the same bits on the default stream, on a caller's stream, and
    replayed from a CUDA graph captured on one (the fork and join are captured as two branches)."""
    t = torch.bfloat16 if (torch.bfloat16, 128) in COMPILED_16 else torch.float16
    d = pick(t, (128, 256))
    ctx, chunk = shape
    hq, hkv = 4, 1
    cache = PagedBatch(ctx, hq, hkv, d, 16, t, "vllm", seed=7)
    g = torch.Generator(device="cuda").manual_seed(8)
    n = sum(chunk)
    q = torch.randn(n, hq, d, generator=g, device="cuda").to(t)
    k = torch.randn(n, hkv, d, generator=g, device="cuda").to(t)
    v = torch.randn(n, hkv, d, generator=g, device="cuda").to(t)
    cu = _cu(chunk)
    b_ctx = torch.tensor(ctx, dtype=torch.int32, device="cuda")
    b_seq = b_ctx + torch.tensor(chunk, dtype=torch.int32, device="cuda")

    def run(o):
        ops.context_attention_fwd(q, k, v, o, "auto", cache.k_cache, cache.v_cache, cache.block_table, cu, b_seq, b_ctx,
                                  max(chunk))

    with torch.no_grad():
        eager = torch.full_like(q, float("nan"))
        run(eager)
        torch.cuda.synchronize()
        assert torch.isfinite(eager).all()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        on_stream = torch.full_like(q, float("nan"))
        with torch.cuda.stream(s):
            run(on_stream)
            run(on_stream)  # (also the warm-up the capture below wants on a side stream)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        assert torch.equal(on_stream, eager)
        replayed = torch.full_like(q, float("nan"))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run(replayed)
        replayed.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(replayed, eager)


def test_context_attention_fwd_sm_scale_and_refusals():
    t = torch.float16
    d = pick(t, (128, 256))
    cache = PagedBatch([20], 4, 1, d, 16, t, "vllm", seed=3)
    q = torch.randn(5, 4, d, device="cuda", dtype=t)
    k = torch.randn(5, 1, d, device="cuda", dtype=t)
    v = torch.randn(5, 1, d, device="cuda", dtype=t)
    o = torch.empty_like(q)
    cu = _cu([5])
    ctx = torch.tensor([20], dtype=torch.int32, device="cuda")
    seq = ctx + 5
    args = (q, k, v, o, "auto", cache.k_cache, cache.v_cache, cache.block_table, cu, seq, ctx, 5)
    ops.context_attention_fwd(*args, sm_scale=0.05)
    o32, olp, _ = _reference(q, [torch.cat([cache.k[0], k])], [torch.cat([cache.v[0], v])], [5], 0.05)
    assert_close_to_reference(o, o32, olp, "context_attention_fwd sm_scale=0.05")
    with pytest.raises(ValueError, match=r"alibi_slopes.shape\[0\]"):
        ops.context_attention_fwd(*args, alibi_slopes=torch.ones(3, device="cuda"))
    with pytest.raises(ValueError, match="sliding_window must be >= 0"):
        ops.context_attention_fwd(*args, sliding_window=-8)
    # An fp8 kv_cache_dtype needs a cache of 1-byte codes (the fp8 tests below read one).
    with pytest.raises(ValueError, match="k_cache must be uint8 or"):
        ops.context_attention_fwd(q, k, v, o, "fp8", *args[5:])
    with pytest.raises(ValueError, match="k_cache must be 5-D"):
        ops.context_attention_fwd(q, k, v, o, "auto", cache.v_cache, cache.v_cache, *args[7:])
    with pytest.raises(ValueError, match="b_ctx_len"):
        ops.context_attention_fwd(q, k, v, o, "auto", cache.k_cache, cache.v_cache, cache.block_table, cu, seq,
                                  torch.tensor([20, 1], dtype=torch.int32, device="cuda"), 5)
    with pytest.raises(ValueError, match="o must have q's shape"):
        ops.context_attention_fwd(q, k, v, o[:4], *args[4:])


# ---- flash_attn_varlen_func over a paged cache ------------------------------------------------------

PAGED_CASES = [
    # (kv lens = prefix + chunk, chunk lens, q heads, kv heads, page)
    ([7], [7], 4, 1, 16),
    ([1], [1], 4, 1, 16),
    ([16 + 2], [2], 6, 1, 16),
    ([1000, 17], [511, 17], 8, 2, 16),
    ([300, 64, 5], [16, 64, 1], 6, 1, 16),
    ([1056 + 40], [40], 4, 1, 528),
    ([200], [33], 8, 8, 8),
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("head_dims", [(256,), (128,)])
@pytest.mark.parametrize("layout", ["nhd", "vllm"])
@pytest.mark.parametrize("case", PAGED_CASES, ids=lambda c: f"kv{c[0]}_q{c[1]}_h{c[2]}x{c[3]}_p{c[4]}")
def test_flash_attn_varlen_paged_matches_sdpa(dtype, head_dims, layout, case):
    t = DT[dtype]
    d = pick(t, head_dims)
    kv_lens, q_lens, hq, hkv, page = case
    seed = seed_of((dtype, d, layout, case))
    cache = PagedBatch(kv_lens, hq, hkv, d, page, t, layout, seed=seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    q = torch.randn(sum(q_lens), hq, d, generator=g, device="cuda").to(t)
    out = torch.full_like(q, float("nan"))
    cu_q = _cu(q_lens)
    with torch.no_grad():
        res, lse, _ = ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu_q, None, max(q_lens),
                                                 max(kv_lens), causal=True, return_attn_probs=True,
                                                 block_table=cache.block_table, seqused_k=cache.seq_lens, out=out)
    assert res.data_ptr() == out.data_ptr()
    o32, olp, lse_ref = _reference(q, cache.k, cache.v, q_lens, d ** -0.5)
    assert_close_to_reference(out, o32, olp, f"paged flash_attn_varlen_func {dtype} hd{d} {layout} {case}")
    assert torch.allclose(lse, lse_ref, atol=2e-3, rtol=1e-3), (lse - lse_ref).abs().max().item()
    # FlashAttention 2's form: kv lengths from cu_seqlens_k, no seqused_k, a new output tensor.
    with torch.no_grad():
        res2 = ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu_q, _cu(kv_lens), max(q_lens),
                                          max(kv_lens), causal=True, block_table=cache.block_table)
    assert torch.equal(res2, out), "the same call through cu_seqlens_k differs"


def test_flash_attn_varlen_paged_is_deterministic_and_matches_dense():
    t = torch.bfloat16
    d = pick(t, (128, 256))
    kv_lens, q_lens = [700, 123], [300, 123]
    cache = PagedBatch(kv_lens, 8, 2, d, 16, t, "nhd", seed=11)
    q = torch.randn(sum(q_lens), 8, d, device="cuda", dtype=t)
    cu_q = _cu(q_lens)
    call = lambda: ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu_q, None, 300, 700, causal=True,  # noqa: E731
                                              block_table=cache.block_table, seqused_k=cache.seq_lens)
    a, b = call(), call()
    assert torch.equal(a, b), "paged prefill is not bitwise reproducible"
    dense = ops.flash_attn_varlen_func(q, torch.cat(cache.k), torch.cat(cache.v), cu_q, _cu(kv_lens), 300, 700,
                                       causal=True)
    assert (a.float() - dense.float()).abs().max().item() <= 2e-2  # two legitimate kernels, bf16 rounding


# A mixed batch as vLLM V1 builds one per step: decodes, then verification rows (2-16 tokens),
# then chunks; given the host copies of the lengths, the call runs as muh's mixed plan
# (mixed_plan.hpp: decodes and the short rows leading with them through the decode kernel).
MIXED_CASES = [
    # (kv lens, q lens, q heads, kv heads, page)
    ([900, 37, 1200, 64, 300], [1, 1, 4, 16, 100], 8, 2, 16),  # decodes, 2 verification rows, a chunk
    ([4096] * 6, [4] * 6, 32, 8, 16),                            # verification rows only
    ([513, 2000, 5], [1, 3, 5], 6, 1, 16),                        # GQA 6, a row of 5 over its 5 keys
]


@pytest.mark.parametrize("layout", ["nhd", "vllm"])
@pytest.mark.parametrize("case", MIXED_CASES, ids=lambda c: f"kv{c[0][:3]}_q{c[1][:4]}_h{c[2]}x{c[3]}")
def test_flash_attn_varlen_paged_with_host_lengths_runs_the_mixed_plan(layout, case):
    t = torch.bfloat16 if any(x == torch.bfloat16 for x, _ in COMPILED_16) else torch.float16
    d = pick(t, (128, 256))
    kv_lens, q_lens, hq, hkv, page = case
    seed = seed_of(("mixed", layout, case))
    cache = PagedBatch(kv_lens, hq, hkv, d, page, t, layout, seed=seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    q = torch.randn(sum(q_lens), hq, d, generator=g, device="cuda").to(t)
    cu_q = _cu(q_lens)
    host = dict(cu_seqlens_q_host=cu_q.cpu(), seqused_k_host=cache.seq_lens.cpu())
    out = torch.full_like(q, float("nan"))
    with torch.no_grad():
        ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu_q, None, max(q_lens), max(kv_lens), causal=True,
                                   block_table=cache.block_table, seqused_k=cache.seq_lens, out=out, **host)
        again = ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu_q, None, max(q_lens), max(kv_lens),
                                           causal=True, block_table=cache.block_table, seqused_k=cache.seq_lens,
                                           **host)
    ops.check_errors()
    assert torch.equal(out, again), "the mixed plan is not bitwise reproducible"
    o32, olp, _ = _reference(q, cache.k, cache.v, q_lens, d ** -0.5)
    assert_close_to_reference(out, o32, olp, f"mixed flash_attn_varlen_func {layout} {case}")
    # Bad host copies: named.
    with pytest.raises(ValueError, match="seqused_k_host"):
        ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu_q, None, max(q_lens), max(kv_lens),
                                   causal=True, block_table=cache.block_table, seqused_k=cache.seq_lens,
                                   cu_seqlens_q_host=cu_q.cpu())
    with pytest.raises(ValueError, match="must be a CPU tensor"):
        ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu_q, None, max(q_lens), max(kv_lens),
                                   causal=True, block_table=cache.block_table, seqused_k=cache.seq_lens,
                                   cu_seqlens_q_host=cu_q, seqused_k_host=cache.seq_lens)
    bad = cu_q.cpu().clone()
    bad[0] = 1  # cu_seqlens_q_host[0] is not 0
    with pytest.raises(ValueError, match=r"cu_seqlens_q_host\[0\] is 1"):
        ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu_q, None, max(q_lens), max(kv_lens),
                                   causal=True, block_table=cache.block_table, seqused_k=cache.seq_lens,
                                   cu_seqlens_q_host=bad, seqused_k_host=cache.seq_lens.cpu())


def test_flash_attn_varlen_paged_refusals():
    t = torch.float16
    d = pick(t, (128, 256))
    cache = PagedBatch([20], 4, 1, d, 16, t, "nhd", seed=5)
    q = torch.randn(5, 4, d, device="cuda", dtype=t)
    cu = _cu([5])
    with pytest.raises(TypeError, match="seqused_k"):
        ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu, None, 5, 20, block_table=cache.block_table)
    with pytest.raises(NotImplementedError, match="seqused_k without block_table"):
        ops.flash_attn_varlen_func(q, q, q, cu, cu, 5, 5, seqused_k=cache.seq_lens)
    with pytest.raises(ValueError, match="block_table"):
        ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu, None, 5, 20,
                                   block_table=cache.block_table.to(torch.int64), seqused_k=cache.seq_lens)
    with pytest.raises(ValueError, match="out must have q's shape"):
        ops.flash_attn_varlen_func(q, cache.k_cache, cache.v_cache, cu, None, 5, 20, block_table=cache.block_table,
                                   seqused_k=cache.seq_lens, out=q[:3].clone())
    # A uint8 cache does not say its fp8 kind (no kv_cache_dtype here): a torch.float8 view does.
    k8 = torch.zeros(cache.k_cache.shape, dtype=torch.uint8, device="cuda")
    with pytest.raises(NotImplementedError, match="does not say which fp8 kind"):
        ops.flash_attn_varlen_func(q, k8, k8, cu, None, 5, 20, block_table=cache.block_table, seqused_k=cache.seq_lens)


def test_readme_chunked_prefill_example_runs():
    import os
    import runpy
    ex = os.path.join(os.path.dirname(__file__), "..", "..", "..", "python", "examples", "chunked_prefill_example.py")
    pick(torch.float16, (256,))
    g = runpy.run_path(ex)
    assert torch.isfinite(g["o"]).all()
