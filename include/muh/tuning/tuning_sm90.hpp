// tuning/tuning_sm90.hpp — Hopper (H100, H200): 227 KB per block, cp.async, TMA, wgmma.
// Until the Hopper-specific agent exists, Hopper runs the sm80 agent with Hopper's cap.
#pragma once

#include "muh/tuning/tuning_sm80.hpp"

namespace muh::tuning::sm90 {

inline constexpr int kSmemCap = 232448;  // 227 KB

constexpr PrefillPolicy prefill(DType t, int head_dim) {
  if (t == DType::fp32) return portable::prefill(t, head_dim);
  PrefillPolicy p = sm80::prefill(t, head_dim, 80);
  p.smem_cap_bytes = kSmemCap;
  return p;
}

constexpr DecodePolicy decode(DType t, int head_dim) {
  if (t == DType::fp32) return portable::decode(t, head_dim);
  DecodePolicy p = sm80::decode(t, head_dim, 80);
  p.smem_cap_bytes = kSmemCap;
  return p;
}

}  // namespace muh::tuning::sm90
