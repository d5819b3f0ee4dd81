// config.hpp — AttentionConfig and the selector: (hardware, dtype, head_dim, max_seq_len,
// num_kv_heads, backends) → the complete kernel configuration. constexpr, so known models are
// configured at compile time (models.hpp), as the seed precomputed them at import time.
#pragma once

#include <string_view>

#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/heuristics.hpp"
#include "muh/shapes.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh {

struct AttentionConfig {
  int target_arch = kOwnArch;  // dispatch target the policies were read for (0 = portable class)
  PrefillPolicy prefill;       // seed: triton_block_m/_n, triton_num_warps, triton_num_stages
  DecodePolicy decode;         // seed: partition_size = decode.partition_size
  int v1_v2_threshold = 8192;  // V2 when seq_len >= threshold
  bool use_native_v1 = true;
  bool use_native_v2 = false;
  bool use_native_prefill = true;  // seed: use_triton_prefill

  friend constexpr bool operator==(const AttentionConfig& a, const AttentionConfig& b) {
    return a.target_arch == b.target_arch && a.prefill == b.prefill && a.decode == b.decode &&
           a.v1_v2_threshold == b.v1_v2_threshold && a.use_native_v1 == b.use_native_v1 &&
           a.use_native_v2 == b.use_native_v2 && a.use_native_prefill == b.use_native_prefill;
  }
};

// The dispatch target a profile runs: its compute capability, or the portable class for an own
// arch. A profile whose shared memory cannot hold the table row falls back to the portable row
// (fits 48 KB) — select_attention_config() does that, target_for() only names the arch.
constexpr int target_for(const HardwareCapability& hw) { return hw.compute_capability; }

// Empty when the inputs are valid, else one line that says what is wrong.
constexpr std::string_view check_config_inputs(const HardwareCapability& hw, int head_dim,
                                               long long max_seq_len, long long num_kv_heads) {
  if (!is_supported_head_dim(head_dim)) return "unsupported head_dim (supported: 64, 96, 128, 256)";
  if (max_seq_len < 1) return "max_seq_len must be >= 1";
  if (max_seq_len > 0x3fffffff) return "max_seq_len too large (max 2^30 - 1)";
  if (num_kv_heads < 1) return "num_kv_heads must be >= 1";
  if (num_kv_heads > 0x3fffffff) return "num_kv_heads too large (max 2^30 - 1)";
  if (hw.sm_count < 1 || hw.memory_bandwidth_gbps < 1) return "hardware profile has no SMs or no bandwidth";
  if (hw.smem_limit() < tuning::portable::kSmemCap)
    return "hardware profile has less than 48 KB of shared memory per block (the portable agent's minimum)";
  return {};
}

// Precondition: check_config_inputs(...) is empty.
constexpr AttentionConfig select_attention_config(const HardwareCapability& hw, DType dtype,
                                                  int head_dim, int max_seq_len, int num_kv_heads,
                                                  Backends backends = kMuhBackends) {
  AttentionConfig c;
  c.target_arch = target_for(hw);
  c.prefill = prefill_policy(c.target_arch, dtype, head_dim);
  c.decode = decode_policy(c.target_arch, dtype, head_dim);
  // A queried device with less shared memory than its arch's row assumes: portable rows.
  if (prefill_smem_bytes(c.prefill, dtype, head_dim) > hw.smem_limit())
    c.prefill = tuning::portable::prefill(dtype, head_dim);
  if (decode_smem_bytes(c.decode, dtype, head_dim) > hw.smem_limit())
    c.decode = tuning::portable::decode(dtype, head_dim);
  // Without async copy there is nothing to pipeline: one stage (the seed's rule). The cp.async
  // agents (sm80, sm90) cannot run single-stage (validate() rejects it, and no such
  // instantiation exists), so a profile without async copy takes the portable rows instead.
  if (!hw.async_copy) {
    if (c.prefill.agent == Agent::sm80 || c.prefill.agent == Agent::sm90)
      c.prefill = tuning::portable::prefill(dtype, head_dim);
    if (c.decode.agent == Agent::sm80 || c.decode.agent == Agent::sm90)
      c.decode = tuning::portable::decode(dtype, head_dim);
    c.prefill.num_stages = c.decode.num_stages = 1;
  }
  c.v1_v2_threshold =
      v1_v2_threshold(hw, c.decode, dtype, head_dim, num_kv_heads, max_seq_len, backends);
  c.use_native_v1 = backends.native_v1;
  c.use_native_v2 = backends.native_v2;
  c.use_native_prefill = backends.native_prefill;
  return c;
}

}  // namespace muh
