// tuning/tuning_sm90.hpp — Hopper (H100, H200): 227 KB per block, cp.async, TMA, wgmma.
// Until the Hopper-specific agent exists, Hopper runs the sm80 agent with Hopper's cap.
#pragma once

#include "muh/tuning/tuning_sm80.hpp"

namespace muh::tuning::sm90 {

inline constexpr int kSmemCap = 232448;  // 227 KB

// Prefill: the sm80 agent with the rows of tuning_sm80.hpp, which were measured on the H200
// itself (their evidence strings carry the figures); Hopper's cap leaves them unchanged.
constexpr PrefillPolicy prefill(DType t, int head_dim) {
  if (t == DType::fp32) return portable::prefill(t, head_dim);
  PrefillPolicy p = sm80::prefill(t, head_dim, 80);
  p.smem_cap_bytes = kSmemCap;
  return p;
}

// Decode: the sm80 tensor-core agent fitted to Hopper's 227 KB (hd ≤ 128: 2 CTAs/SM; hd 256:
// 1 CTA/SM with 3 stages). Figures: bench/results (muh bench decode on the H200).
constexpr DecodePolicy decode(DType t, int head_dim) {
  if (t == DType::fp32) return portable::decode(t, head_dim);
  return sm80::fit_decode(t, head_dim, kSmemCap,
                          "sm80 agent fitted to 227 KB; H200 measurement pending");
}

}  // namespace muh::tuning::sm90
