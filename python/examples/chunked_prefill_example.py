"""README: chunked prefill through vLLM 0.6.3's context_attention_fwd (the seed's prefill call)."""
import torch, muh.ops
d, hq, hkv, page, x = 256, 4, 1, 16, 8                # x = 16 bytes / 2-byte element
prefix, chunk = 8192, 2048                            # a cached prefix, the next chunk of the prompt
blocks = (prefix + chunk + page - 1) // page
k_cache = torch.randn(blocks, hkv, d // x, page, x, device="cuda", dtype=torch.float16)  # vLLM's key cache
v_cache = torch.randn(blocks, hkv, d, page, device="cuda", dtype=torch.float16)          # vLLM's value cache
b_loc = torch.randperm(blocks, device="cuda").to(torch.int32)[None]   # the sequence's block table
q = torch.randn(chunk, hq, d, device="cuda", dtype=torch.float16)     # the chunk's new tokens
k = torch.randn(chunk, hkv, d, device="cuda", dtype=torch.float16)
v = torch.randn_like(k)
o = torch.empty_like(q)
b_start_loc = torch.tensor([0, chunk], device="cuda", dtype=torch.int32)   # query_start_loc
b_ctx_len = torch.tensor([prefix], device="cuda", dtype=torch.int32)
b_seq_len = b_ctx_len + chunk
muh.ops.context_attention_fwd(q, k, v, o, "auto", k_cache, v_cache, b_loc, b_start_loc, b_seq_len,
                              b_ctx_len, chunk)        # o: the chunk attending to prefix + itself
print(o.shape, o.dtype, bool(torch.isfinite(o).all()))  # torch.Size([2048, 4, 256]) torch.float16 True
