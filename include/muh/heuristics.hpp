// heuristics.hpp — pure functions that turn hardware figures into decode decisions
// (the V1/V2 threshold here; the per-batch split count lives in plan.hpp and uses these).
#pragma once

#include <string_view>

#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/tuning/policy.hpp"

namespace muh {

// Which native backends exist. The seed's deployment had no usable native V2 ("native V2 has
// correctness issues on BI-V100"); muh ships V1, V2 and the prefill kernel everywhere.
struct Backends {
  bool native_v1 = true;
  bool native_v2 = true;
  bool native_prefill = true;
  friend constexpr bool operator==(const Backends& a, const Backends& b) {
    return a.native_v1 == b.native_v1 && a.native_v2 == b.native_v2 &&
           a.native_prefill == b.native_prefill;
  }
};
inline constexpr Backends kSeedBackends{true, false, true};
inline constexpr Backends kMuhBackends{true, true, true};

// `auto`, the one default of the CLI (--backends auto), Python (backends=None) and the C++ API:
// the seed's backends on the bi-v100 profile (its deployment had no usable native V2, so its
// table — V1 forced, threshold max_seq_len + 1 — is what that profile must reproduce), muh's
// everywhere else. The profile is recognised by its name, the preset's key: a device read from
// the runtime carries the driver's name ("NVIDIA H200"), never "bi-v100".
constexpr Backends default_backends(const HardwareCapability& hw) {
  return std::string_view(hw.name) == std::string_view(presets::bi_v100.name) ? kSeedBackends
                                                                              : kMuhBackends;
}
static_assert(default_backends(presets::bi_v100) == kSeedBackends);
static_assert(default_backends(presets::h200) == kMuhBackends);

// Cost of going split-KV: the merge kernel's launch plus writing and re-reading the (o, lse)
// partials. ~4 µs is one short kernel launch plus a few µs of partial traffic on a busy GPU.
inline constexpr double kSplitOverheadSeconds = 4e-6;

// V1/V2 threshold: the sequence length from which V2 (split-KV) beats V1 for a batch of one.
// V2 is used when seq_len >= threshold; the seed's "force V1" is threshold = max_seq_len + 1.
//
// Model: V1 runs one CTA per KV head, each streaming L tokens of K and V (B = 2·head_dim·elem
// bytes per token) at about one SM's share of HBM, bw_sm = bw / sm_count. V2 gives each CTA one
// partition of P tokens and spreads the bytes over slots = sm_count × ctas_per_sm CTAs, so the
// stream it saves is (L − P)·B/bw_sm, scaled by (1 − kv_heads/slots) for the SMs V1 already
// kept busy; it costs kSplitOverheadSeconds. Splitting pays from
//     L* = P + overhead · bw_sm / (B · (1 − kv_heads / slots)).
// Edges: when kv_heads alone fill every slot (a tiny GPU) splitting never pays; when
// L* > max_seq_len (short contexts) V2 is never used: both give max_seq_len + 1.
// Examples with P = 512 and 2 CTAs/SM (threshold = floor(L*) + 1; tests/cpu/test_heuristics.cpp):
// H200 bf16 hd256 kv4 → L* 656.2, threshold 657; BI-V100 → 764; A100 → 588.
// The threshold with the numbers it came from, so that `muh config --explain` prints what was
// computed (not a second copy of the formula).
enum class ThresholdRule : unsigned char {
  no_native_v2,      // the backends have no native V2: V1 forced (the seed's case)
  no_native_v1,      // no native V1: always V2 (threshold 0)
  kv_heads_fill,     // kv_heads >= slots: V1 alone fills every slot
  above_max_seq_len, // floor(L*) + 1 > max_seq_len: V2 never pays for these lengths
  formula,           // floor(L*) + 1
};

struct ThresholdTrace {
  int value = 0;                 // V2 when seq_len >= value
  ThresholdRule rule = ThresholdRule::formula;
  double slots = 0;              // sm_count · ctas_per_sm
  double bytes_per_token = 0;    // B: K + V bytes of one token of one KV head
  double bw_sm = 0;              // bandwidth / sm_count, bytes/s
  double l_star = 0;             // the break-even length L*
  int partition = 0;             // P: the policy's partition_size
};

constexpr ThresholdTrace v1_v2_threshold_trace(const HardwareCapability& hw, const DecodePolicy& p, DType t,
                                               int head_dim, int num_kv_heads, int max_seq_len, Backends b) {
  ThresholdTrace r;
  const int never = max_seq_len + 1;
  r.partition = p.partition_size;
  r.slots = double(hw.sm_count) * p.ctas_per_sm;
  if (!b.native_v2) {
    r.value = never;
    r.rule = ThresholdRule::no_native_v2;
    return r;
  }
  if (!b.native_v1) {
    r.value = 0;
    r.rule = ThresholdRule::no_native_v1;
    return r;
  }
  if (num_kv_heads >= r.slots) {
    r.value = never;
    r.rule = ThresholdRule::kv_heads_fill;
    return r;
  }
  r.bytes_per_token = 2.0 * head_dim * dtype_size(t);
  r.bw_sm = hw.memory_bandwidth_gbps * 1e9 / hw.sm_count;
  r.l_star = p.partition_size + kSplitOverheadSeconds * r.bw_sm / (r.bytes_per_token * (1.0 - num_kv_heads / r.slots));
  const long long threshold = static_cast<long long>(r.l_star) + 1;
  r.rule = threshold > max_seq_len ? ThresholdRule::above_max_seq_len : ThresholdRule::formula;
  r.value = threshold > max_seq_len ? never : static_cast<int>(threshold);
  return r;
}

constexpr int v1_v2_threshold(const HardwareCapability& hw, const DecodePolicy& p, DType t, int head_dim,
                              int num_kv_heads, int max_seq_len, Backends b) {
  return v1_v2_threshold_trace(hw, p, t, head_dim, num_kv_heads, max_seq_len, b).value;
}

}  // namespace muh
