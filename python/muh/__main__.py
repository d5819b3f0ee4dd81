"""python -m muh: the seed's __main__ table, from muh's C++ values."""
from . import QWEN36_BF16, QWEN36_FP16, build_info

print("=== muh: CCCL-style type-dispatched kernel config (BI-V100, seed backends) ===\n")
for name, c in (("bf16", QWEN36_BF16), ("fp16", QWEN36_FP16)):
    smem = c.triton_block_n * 256 * 2 * 2
    print(f"Qwen3.6 {name} (head_dim=256):")
    print(f"  prefill: BLOCK_M={c.triton_block_m} BLOCK_N={c.triton_block_n}"
          f" warps={c.triton_num_warps} stages={c.triton_num_stages} ({c.prefill_agent} agent)")
    print(f"  decode: partition={c.partition_size} v1_thresh={c.v1_v2_threshold}")
    print(f"  SMEM K+V: {c.triton_block_n}x256x2x2 = {smem} bytes ({smem // 1024} KB <= 48 KB)")
    print(f"  V1 forced: {c.use_native_v1 and not c.use_native_v2}")
print(f"\n{build_info()}")
