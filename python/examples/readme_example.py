import torch, muh, muh.ops                         # pip install ./python (on a machine with torch)
hw = muh.current_device_capability()                # the present GPU's profile
print(muh.select_attention_config(hw, torch.bfloat16, head_dim=128, max_seq_len=8192, num_kv_heads=8))
q = torch.randn(4, 32, 128, device="cuda", dtype=torch.bfloat16)        # 4 sequences, 32 q heads
k_cache = torch.randn(64, 16, 8, 128, device="cuda", dtype=torch.bfloat16)  # NHD: pages, page, kv heads, d
v_cache = torch.randn_like(k_cache)
block_table = torch.randperm(64, device="cuda").to(torch.int32).view(4, 16)  # 16 pages per sequence
seq_lens = torch.tensor([1, 100, 200, 256], device="cuda", dtype=torch.int32)
out = muh.ops.paged_decode(q, k_cache, v_cache, block_table, seq_lens)  # muh plans V1/V2 itself
print(out.shape, out.dtype)                          # torch.Size([4, 32, 128]) torch.bfloat16
