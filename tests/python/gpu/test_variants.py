"""flash_attn_varlen_func's attention variants (window_size, softcap, alibi_slopes, s_aux) on the
GPU, dense and paged, against a reference written here from the definitions (muh/variant.hpp):
fp32 scores with an explicit mask, soft-cap and ALiBi bias, and the sink as an extra logit with no
value. Tolerance as the other op tests: 3 x the same computation at the input precision + 2e-3."""

import pytest

from gpu_helpers import COMPILED_16, VarlenBatch, ops, pick, seed_of, torch


def variant_reference(b, scale, causal, window, softcap, alibi, sinks, dtype):
    """(out fp32, out at the input precision, lse fp32) for VarlenBatch b."""
    outs = []
    for prec in (torch.float32, dtype):
        out = torch.zeros(b.q.shape, device="cuda", dtype=torch.float32)
        lse = torch.full((b.num_q_heads, b.q.shape[0]), float("-inf"), device="cuda")
        rep = b.num_q_heads // b.num_kv_heads
        for s in range(len(b.q_lens)):
            lq, lk = b.q_lens[s], b.k_lens[s]
            if lq == 0:
                continue
            q = b.q[b.cq[s]:b.cq[s + 1]].permute(1, 0, 2).to(prec)
            k = b.k[b.ck[s]:b.ck[s + 1]].permute(1, 0, 2).repeat_interleave(rep, 0).to(prec)
            v = b.v[b.ck[s]:b.ck[s + 1]].permute(1, 0, 2).repeat_interleave(rep, 0).to(prec)
            x = (q @ k.transpose(1, 2)).float() * scale  # [H, lq, lk]
            if softcap > 0:
                x = softcap * torch.tanh(x / softcap)
            i = torch.arange(lq, device="cuda")[:, None] + lk - lq  # the query's key position
            j = torch.arange(lk, device="cuda")[None, :]
            if alibi is not None:
                x = x - alibi.float()[:, None, None] * (i - j).abs()[None]
            visible = torch.ones(lq, lk, dtype=torch.bool, device="cuda")
            left, right = window
            if causal:
                right = 0 if right < 0 else min(right, 0)
            if left >= 0:
                visible &= j >= i - left
            if right >= 0:
                visible &= j <= i + right
            x = x.masked_fill(~visible[None], float("-inf"))
            if sinks is not None:
                x = torch.cat([x, sinks.float()[:, None, None].expand(-1, lq, 1)], dim=2)
            m = x.amax(dim=2, keepdim=True).clamp_min(-1e30)
            p = torch.exp(x - m)
            den = p.sum(dim=2, keepdim=True)
            p = (p / den.clamp_min(1e-30))[:, :, :lk]
            o = (p.to(prec) @ v).float()
            out[b.cq[s]:b.cq[s + 1]] = o.permute(1, 0, 2)
            lse[:, b.cq[s]:b.cq[s + 1]] = torch.where(den[..., 0] > 0, m[..., 0] + torch.log(den[..., 0]),
                                                      torch.full_like(den[..., 0], float("-inf")))
        outs.append((out, lse))
    return outs[0][0], outs[1][0], outs[0][1]


SLOPES = [2.0 ** -(h + 1) for h in range(8)]
SINKS = [-40.0, -3.0, 0.0, 1.0, 2.5, 6.0, 20.0, 60.0]

CASES = [
    # name, causal, window, softcap, alibi, sinks, q_lens, k_lens
    ("win7_causal", True, (7, 0), 0.0, False, False, (1, 70, 130), (1, 70, 130)),
    ("win_two_sided", False, (20, 5), 0.0, False, False, (50, 129), (90, 129)),
    ("softcap30", True, (-1, -1), 30.0, False, False, (100, 3), (130, 3)),
    ("alibi_gqa4", True, (-1, -1), 0.0, True, False, (65, 200), (65, 300)),
    ("sinks", False, (-1, -1), 0.0, False, True, (40, 9), (60, 9)),
    ("all", True, (32, 0), 50.0, True, True, (200, 1, 64), (260, 1, 64)),
]


@pytest.mark.parametrize("dtype", sorted({t for t, _ in COMPILED_16}, key=str) or [torch.float16],
                         ids=lambda t: str(t).split(".")[-1])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_flash_attn_varlen_variants_match_reference(case, dtype):
    name, causal, window, softcap, use_alibi, use_sinks, ql, kl = case
    hd = pick(dtype, (128, 64, 256, 96))
    b = VarlenBatch(ql, kl, 8, 2, hd, dtype, seed=seed_of(case))
    scale = 2.0 / hd ** 0.5  # sharp enough for the cap and the sinks to matter
    alibi = torch.tensor(SLOPES, device="cuda") if use_alibi else None
    sinks = torch.tensor(SINKS, device="cuda") if use_sinks else None
    out, lse, _ = ops.flash_attn_varlen_func(b.q, b.k, b.v, b.cu_q, b.cu_k, max(ql), max(kl), 0.0, scale, causal,
                                             window, softcap, alibi, False, True, s_aux=sinks)
    ref32, naive, ref_lse = variant_reference(b, scale, causal, window, softcap, alibi, sinks, dtype)
    assert torch.isfinite(out).all()
    err = (out.float() - ref32).abs().max().item()
    bound = 3.0 * (naive - ref32).abs().max().item() + 2e-3
    assert err <= bound, f"{name}: max error {err:.3e} > {bound:.3e}"
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    assert (lse[finite] - ref_lse[finite]).abs().max().item() <= 1e-3 * (1 + ref_lse[finite].abs().max().item())


def test_paged_call_takes_the_variants():
    """The paged form (block_table) with a window, ALiBi and sinks: the dense call's result."""
    dtype = COMPILED_16[0][0] if COMPILED_16 else torch.float16
    hd = pick(dtype, (128, 64, 256, 96))
    page = 16
    b = VarlenBatch((5, 33), (40, 100), 8, 2, hd, dtype, seed=5)
    pages_per = [(n + page - 1) // page for n in b.k_lens]
    num_pages = sum(pages_per) + 2
    perm = torch.randperm(num_pages, generator=torch.Generator().manual_seed(1)).tolist()
    k_cache = torch.zeros(num_pages, page, 2, hd, dtype=dtype, device="cuda")
    v_cache = torch.zeros_like(k_cache)
    bt = torch.zeros(len(b.k_lens), max(pages_per), dtype=torch.int32)
    nxt = 0
    for s, n in enumerate(b.k_lens):
        for p in range(pages_per[s]):
            pid = perm[nxt]
            nxt += 1
            bt[s, p] = pid
            lo, hi = b.ck[s] + p * page, min(b.ck[s] + (p + 1) * page, b.ck[s + 1])
            k_cache[pid, :hi - lo] = b.k[lo:hi]
            v_cache[pid, :hi - lo] = b.v[lo:hi]
    bt = bt.cuda()
    seqused = torch.tensor(b.k_lens, dtype=torch.int32, device="cuda")
    alibi = torch.tensor(SLOPES, device="cuda")
    sinks = torch.tensor(SINKS, device="cuda")
    kw = dict(causal=True, window_size=(20, 0), alibi_slopes=alibi, s_aux=sinks)
    dense = ops.flash_attn_varlen_func(b.q, b.k, b.v, b.cu_q, b.cu_k, 33, 100, **kw)
    paged = ops.flash_attn_varlen_func(b.q, k_cache, v_cache, b.cu_q, None, 33, 100, block_table=bt,
                                       seqused_k=seqused, **kw)
    assert (dense.float() - paged.float()).abs().max().item() <= 2e-3


def test_vllm_paged_attention_alibi_matches_reference():
    """vLLM's paged_attention_v1 / v2 with alibi_slopes (the decode agents' general kind)
    against the definition: the last token's attention with bias -slope * (seq_len - 1 - j)."""
    from gpu_helpers import PagedBatch
    dtype = COMPILED_16[0][0] if COMPILED_16 else torch.float16
    hd = pick(dtype, (128, 64, 256, 96))
    b = PagedBatch((1, 37, 700), 8, 2, hd, 16, dtype, "vllm", seed=7)
    scale = 1.0 / hd ** 0.5
    alibi = torch.tensor(SLOPES, device="cuda")
    ref = torch.zeros(len(b.lens), 8, hd, device="cuda")
    for s, n in enumerate(b.lens):
        q = b.q[s].float()[:, None, :]                                           # [H, 1, D]
        k = b.k[s].permute(1, 0, 2).repeat_interleave(4, 0).float()              # [H, n, D]
        v = b.v[s].permute(1, 0, 2).repeat_interleave(4, 0).float()
        x = (q @ k.transpose(1, 2)) * scale - alibi[:, None, None] * (n - 1 - torch.arange(n, device="cuda")).float()
        ref[s] = (torch.softmax(x, dim=-1) @ v)[:, 0]
    one = torch.ones((), device="cuda")
    out1 = torch.empty_like(b.q)
    ops.paged_attention_v1(out1, b.q, b.k_cache, b.v_cache, 2, scale, b.block_table, b.seq_lens, 16,
                           b.max_seq_len, alibi, "auto", one, one, 0, 0, 0, 64, 0)
    parts = (b.max_seq_len + 511) // 512
    out2 = torch.empty_like(b.q)
    ops.paged_attention_v2(out2, torch.empty(3, 8, parts, device="cuda"), torch.empty(3, 8, parts, device="cuda"),
                           torch.empty(3, 8, parts, hd, dtype=dtype, device="cuda"), b.q, b.k_cache, b.v_cache, 2,
                           scale, b.block_table, b.seq_lens, 16, b.max_seq_len, alibi, "auto", one, one, 0, 0, 0,
                           64, 0)
    tol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    for out in (out1, out2):
        assert torch.isfinite(out).all()
        assert (out.float() - ref).abs().max().item() <= tol


@pytest.mark.parametrize("sliding_window,use_alibi", [(8, False), (30, True), (0, True), (1, False)],
                         ids=["win8", "win30_alibi", "alibi", "win1"])
def test_context_attention_fwd_variants_match_the_dense_call(sliding_window, use_alibi):
    """context_attention_fwd with vLLM's sliding_window / alibi_slopes (prefix from the cache, chunk
    from k/v: two parts merged by their lse) equals one dense causal call over prefix + chunk with
    window_size = (sliding_window - 1, 0) and the same slopes."""
    from gpu_helpers import PagedBatch
    t = COMPILED_16[0][0] if COMPILED_16 else torch.float16
    d = pick(t, (128, 64, 256, 96))
    ctx, chunk = [40, 0, 17], [9, 5, 33]
    cache = PagedBatch(ctx, 8, 2, d, 16, t, "vllm", seed=13)
    g = torch.Generator(device="cuda").manual_seed(14)
    n = sum(chunk)
    q = torch.randn(n, 8, d, generator=g, device="cuda").to(t)
    k = torch.randn(n, 2, d, generator=g, device="cuda").to(t)
    v = torch.randn(n, 2, d, generator=g, device="cuda").to(t)
    o = torch.full_like(q, float("nan"))
    cq = [0]
    for c in chunk:
        cq.append(cq[-1] + c)
    cu_q = torch.tensor(cq, dtype=torch.int32, device="cuda")
    b_ctx = torch.tensor(ctx, dtype=torch.int32, device="cuda")
    b_seq = b_ctx + torch.tensor(chunk, dtype=torch.int32, device="cuda")
    alibi = torch.tensor(SLOPES, device="cuda") if use_alibi else None
    ops.context_attention_fwd(q, k, v, o, "auto", cache.k_cache, cache.v_cache, cache.block_table, cu_q, b_seq,
                              b_ctx, max(chunk), alibi_slopes=alibi, sliding_window=sliding_window or None)
    kd = torch.cat([torch.cat([cache.k[b], k[cq[b]:cq[b + 1]]]) for b in range(3)])
    vd = torch.cat([torch.cat([cache.v[b], v[cq[b]:cq[b + 1]]]) for b in range(3)])
    ck = [0]
    for b in range(3):
        ck.append(ck[-1] + ctx[b] + chunk[b])
    cu_k = torch.tensor(ck, dtype=torch.int32, device="cuda")
    window = (sliding_window - 1, 0) if sliding_window else (-1, -1)
    dense = ops.flash_attn_varlen_func(q, kd, vd, cu_q, cu_k, max(chunk), max(ck[i + 1] - ck[i] for i in range(3)),
                                       causal=True, window_size=window, alibi_slopes=alibi)
    assert torch.isfinite(o).all()
    assert (o.float() - dense.float()).abs().max().item() <= (2e-2 if t == torch.bfloat16 else 4e-3)
