// tuning/tuning_sm80.hpp — Ampere and Ada (sm_80, sm_86, sm_89): mma.sync m16n8k16, ldmatrix,
// cp.async. A100 grants 163 KB per block, sm_86/sm_89 (L40S) 99 KB.
#pragma once

#include "muh/tuning/tuning_portable.hpp"

namespace muh::tuning::sm80 {

inline constexpr int kSmemCapA100 = 166912;  // 163 KB
inline constexpr int kSmemCap99K = 101376;   // 99 KB (sm_86, sm_89)

constexpr int smem_cap(int cc) { return cc == 80 ? kSmemCapA100 : kSmemCap99K; }

// Prefill tiles. Starting points from FlashAttention-2's sm80 launch templates (128×64 with 4
// warps up to head_dim 128; 64×64 at 256), fitted to the cap; fp32 stays on the portable agent.
constexpr PrefillPolicy prefill(DType t, int head_dim, int cc) {
  if (t == DType::fp32) return portable::prefill(t, head_dim);
  const int cap = smem_cap(cc);
  PrefillPolicy p{Agent::sm80, head_dim <= 128 ? 128 : 64, 64, 4, 2, cap,
                  "FA2 sm80 starting tiles (128x64 to hd128, 64x64 at hd256), fitted to the cap"};
  // On 99 KB parts shrink block_n, then stages, until the tiles fit.
  while (prefill_smem_bytes(p, t, head_dim) > cap && p.block_n > 32) p.block_n /= 2;
  while (prefill_smem_bytes(p, t, head_dim) > cap && p.num_stages > 1) --p.num_stages;
  return p;
}

// Decode: the tensor-core agent (query-head group on the MMA rows), cp.async pipeline of
// 16-token tiles; 4 stages keep ≥ 64 KB of K/V in flight per SM at 2 CTAs/SM.
constexpr DecodePolicy decode(DType t, int head_dim, int cc) {
  if (t == DType::fp32) return portable::decode(t, head_dim);
  DecodePolicy p{Agent::sm80, 4, 16, 4, 512, 2, smem_cap(cc),
                 "tensor-core GQA decode, 16-token cp.async tiles, 4 stages (initial row)"};
  while (decode_smem_bytes(p, t, head_dim) > p.smem_cap_bytes / p.ctas_per_sm && p.num_stages > 2)
    --p.num_stages;
  return p;
}

}  // namespace muh::tuning::sm80
