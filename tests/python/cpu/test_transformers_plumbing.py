"""muh.integrations.transformers' plumbing on the CPU: with muh's kernel replaced by a reference
varlen attention (SDPA per sequence), generate() under attn_implementation "muh" must give sdpa's
logits — the padding mask, the unpadding into one varlen call, GQA and the bottom-right causal
alignment of decode steps are transformers' and the integration's, not the kernel's. Skips
without torch, transformers or muh.ops (CI); the GPU test runs muh's kernel itself."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
try:
    import muh.integrations.transformers as muh_hf
except ImportError as e:
    pytest.skip(f"muh.ops not importable: {e}", allow_module_level=True)


def reference_varlen(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p=0.0, softmax_scale=None, causal=False, **_):
    out = torch.zeros_like(q)
    for b in range(len(cu_q) - 1):
        qs, qe, ks, ke = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        qb, kb, vb = (t.transpose(0, 1) for t in (q[qs:qe], k[ks:ke], v[ks:ke]))
        rep = qb.shape[0] // kb.shape[0]
        kb, vb = kb.repeat_interleave(rep, 0), vb.repeat_interleave(rep, 0)
        lq, lk = qe - qs, ke - ks
        mask = (torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + (lk - lq)) if causal else None
        out[qs:qe] = torch.nn.functional.scaled_dot_product_attention(
            qb, kb, vb, attn_mask=mask, scale=softmax_scale).transpose(0, 1)
    return out


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
@pytest.mark.parametrize("padded", [True, False])
def test_generate_with_reference_kernel_matches_sdpa(monkeypatch, arch, padded):
    monkeypatch.setattr(muh_hf.ops, "flash_attn_varlen_func", reference_varlen)
    muh_hf.register()
    common = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
                  pad_token_id=0, bos_token_id=1, eos_token_id=None, tie_word_embeddings=False)
    cfg = transformers.LlamaConfig(**common) if arch == "llama" else transformers.Qwen3Config(**common)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").eval()
    lens = (7, 20, 3) if padded else (9, 9, 9)
    width = max(lens)
    ids = torch.zeros(len(lens), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lens):
        ids[i, width - n:] = torch.randint(2, 512, (n,))
        mask[i, width - n:] = 1
    got = {}
    for impl in ("sdpa", "muh"):
        model.set_attn_implementation(impl)
        with torch.inference_mode():
            o = model.generate(ids, attention_mask=mask, max_new_tokens=8, min_new_tokens=8, do_sample=False,
                               output_scores=True, return_dict_in_generate=True, pad_token_id=0)
        got[impl] = (o.sequences, torch.stack(o.scores, 1))
    assert torch.equal(got["sdpa"][0], got["muh"][0])
    torch.testing.assert_close(got["muh"][1], got["sdpa"][1], atol=1e-4, rtol=1e-4)
