// tuning/tuning_portable.hpp — rows for the portable agent: plain CUDA C++, synchronous copies,
// one stage, 48 KB of shared memory. The BI-V100 profile (own arch) runs these; so does any
// profile whose own rows fall back here.
#pragma once

#include "muh/tuning/policy.hpp"

namespace muh::tuning::portable {

// The BI-V100's 48 KB (seed: "48KB — confirmed via ixsmi").
inline constexpr int kSmemCap = 48 * 1024;

// Prefill tile — the seed's rule (muh_dispatch.py, select_attention_config):
//   block_n starts at 64 and halves, down to 16, while the tiles exceed shared memory;
//   block_m = block_n ("square tiles simplify the causal mask"); 4 warps ("8 warps for 32 rows is
//   wasteful"); 1 stage (no async copy).
// One deliberate change: the seed measured only K and V (block_n·head_dim·elem·2) and then halved
// the tile once more for fp32, counting the 4-byte element twice. muh fits the portable kernel's
// real footprint, prefill_smem_bytes() = (block_m + 2·block_n)·head_dim·elem (it stages Q too),
// and halves nothing afterwards. For 16-bit types at head_dim 64/128/256 both rules give the
// seed's tiles (64, 64, 32 — tests/cpu/test_seed_table.cpp holds them); for fp32 muh gives
// 64/32/16 where the seed gave 32/16/8.
constexpr PrefillPolicy prefill(DType t, int head_dim) {
  PrefillPolicy p{Agent::portable, 64, 64, 4, 1, kSmemCap,
                  "seed rule: largest of 64/32/16 whose Q+K+V tiles fit 48 KB; 4 warps; 1 stage"};
  while (p.block_n > 16 && prefill_smem_bytes(p, t, head_dim) > kSmemCap) {
    p.block_n /= 2;
    p.block_m = p.block_n;
  }
  return p;
}

// Decode (kernels/decode_portable.cuh): 8 tiles of 32 lanes (one per query head of a pass of 8),
// 32-token tiles (one lane per token of the scores; a tile of K and V in flight per CTA: 32 KB
// at hd 256 fp16), every dtype and head dim: 11–18 KB of shared memory, so two CTAs fit a 64 KB
// SM (T4) and the BI-V100's 48 KB holds one with room. ctas_per_sm = 2 also caps the kernel's
// registers at 128 a thread (kernels/decode_portable.cuh): on the H200's 16-SM partition the
// seed's 256k cells ran 1.5× faster than uncapped at one CTA per SM. Partition 512 is the
// seed's (V2 partitions are multiples of it).
// bench/results/h200-2026-12-02-8236b7e-portable/: b1 4q 256k 662.8 µs (32 splits) = 0.17 of the floor; 1 CTA/SM 1004.9
constexpr DecodePolicy decode(DType, int) {
  return DecodePolicy{Agent::portable, 8, 32, 1, 512, 2, kSmemCap,
                      "portable: 8 tiles × 32 tokens, K/V in registers, next tile in flight, 2 CTAs/SM; seed's partition 512"};
}

}  // namespace muh::tuning::portable
