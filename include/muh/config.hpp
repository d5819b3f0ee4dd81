// config.hpp — AttentionConfig and the selector: (hardware, dtype, head_dim, max_seq_len,
// num_kv_heads, backends) → the complete kernel configuration. constexpr, so known models are
// configured at compile time (models.hpp), as the seed precomputed them at import time.
#pragma once

#include <string>
#include <string_view>

#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/heuristics.hpp"
#include "muh/shapes.hpp"
#include "muh/select.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh {

struct AttentionConfig {
  int target_arch = kOwnArch;  // where the selection started: the profile's dispatch target (0 = portable class)
  PrefillPolicy prefill;       // seed: triton_block_m/_n, triton_num_warps, triton_num_stages
  DecodePolicy decode;         // seed: partition_size = decode.partition_size
  int v1_v2_threshold = 8192;  // V2 when seq_len >= threshold
  bool use_native_v1 = true;
  bool use_native_v2 = false;
  bool use_native_prefill = true;  // seed: use_triton_prefill
  // How the rows were chosen (select.hpp) and the threshold computed (heuristics.hpp): the
  // rows' targets are prefill_selection.target / decode_selection.target, and `muh config
  // --explain` prints these traces.
  PrefillSelection prefill_selection;
  DecodeSelection decode_selection;
  ThresholdTrace threshold;

  constexpr int prefill_target() const { return prefill_selection.target; }
  constexpr int decode_target() const { return decode_selection.target; }

  friend constexpr bool operator==(const AttentionConfig& a, const AttentionConfig& b) {
    return a.target_arch == b.target_arch && a.prefill == b.prefill && a.decode == b.decode &&
           a.v1_v2_threshold == b.v1_v2_threshold && a.use_native_v1 == b.use_native_v1 &&
           a.use_native_v2 == b.use_native_v2 && a.use_native_prefill == b.use_native_prefill &&
           a.prefill_target() == b.prefill_target() && a.decode_target() == b.decode_target();
  }
};

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

// The rows come from choose_prefill() / choose_decode() (select.hpp) — the same calls the plans
// make, so `muh config` shows the rows the kernels run. Without async copy there is nothing to
// pipeline: the rows the walk can take there (portable, sm75) have one stage, the seed's rule.
// Precondition: check_config_inputs(...) is empty (then both selections have a row: the portable
// rows fit the 48 KB every valid profile has).
constexpr AttentionConfig select_attention_config(const HardwareCapability& hw, DType dtype,
                                                  int head_dim, int max_seq_len, int num_kv_heads,
                                                  Backends backends) {
  AttentionConfig c;
  c.prefill_selection = choose_prefill(hw, dtype, head_dim);
  c.decode_selection = choose_decode(hw, dtype, head_dim);
  c.target_arch = c.prefill_selection.start;
  c.prefill = c.prefill_selection.policy;
  c.decode = c.decode_selection.policy;
  c.threshold = v1_v2_threshold_trace(hw, c.decode, dtype, head_dim, num_kv_heads, max_seq_len, backends);
  c.v1_v2_threshold = c.threshold.value;
  c.use_native_v1 = backends.native_v1;
  c.use_native_v2 = backends.native_v2;
  c.use_native_prefill = backends.native_prefill;
  return c;
}

// Without backends: default_backends(hw) (heuristics.hpp), the rule `muh config --backends auto`
// and Python's select_attention_config(backends=None) use — the seed's on the bi-v100 profile.
constexpr AttentionConfig select_attention_config(const HardwareCapability& hw, DType dtype, int head_dim,
                                                  int max_seq_len, int num_kv_heads) {
  return select_attention_config(hw, dtype, head_dim, max_seq_len, num_kv_heads, default_backends(hw));
}

// The checked form, for callers whose inputs are not known to be valid: invalid_argument with
// check_config_inputs()'s line (an unsupported head dim, a length out of range, a profile without
// 48 KB) and no config, instead of the precondition of the forms above.
inline Status select_attention_config(const HardwareCapability& hw, DType dtype, int head_dim, long long max_seq_len,
                                      long long num_kv_heads, Backends backends, AttentionConfig* out) {
  if (out == nullptr) return invalid_argument("select_attention_config: out must not be null");
  const std::string_view bad = check_config_inputs(hw, head_dim, max_seq_len, num_kv_heads);
  if (!bad.empty()) return invalid_argument("select_attention_config: " + std::string(bad));
  *out = select_attention_config(hw, dtype, head_dim, static_cast<int>(max_seq_len), static_cast<int>(num_kv_heads),
                                 backends);
  return Status::Ok();
}

}  // namespace muh
