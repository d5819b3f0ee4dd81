// tuning/selectors.hpp — the fallback chain sm90 → sm80 → sm75 → portable, and the stateless
// selectors dispatch instantiates kernels from (CCCL's policy selector, one per kernel family).
#pragma once

#include "muh/tuning/tuning_portable.hpp"
#include "muh/tuning/tuning_sm75.hpp"
#include "muh/tuning/tuning_sm80.hpp"
#include "muh/tuning/tuning_sm90.hpp"

namespace muh {

// `arch` is a dispatch target: an NVIDIA compute capability (75, 80, 86, 89, 90, ...) or 0 for
// the own-arch (portable) class.
constexpr PrefillPolicy prefill_policy(int arch, DType t, int head_dim) {
  if (arch >= 90) return tuning::sm90::prefill(t, head_dim);
  if (arch >= 80) return tuning::sm80::prefill(t, head_dim, arch);
  if (arch >= 75) return tuning::sm75::prefill(t, head_dim);
  return tuning::portable::prefill(t, head_dim);
}

constexpr DecodePolicy decode_policy(int arch, DType t, int head_dim) {
  if (arch >= 90) return tuning::sm90::decode(t, head_dim);
  if (arch >= 80) return tuning::sm80::decode(t, head_dim, arch);
  if (arch >= 75) return tuning::sm75::decode(t, head_dim);
  return tuning::portable::decode(t, head_dim);
}

// Stateless selectors: the type carries (dtype, head_dim), the call takes the arch.
template <DType T, int HeadDim>
struct PrefillSelector {
  using policy_type = PrefillPolicy;
  static constexpr DType dtype = T;
  static constexpr int head_dim = HeadDim;
  constexpr PrefillPolicy operator()(int arch) const { return prefill_policy(arch, T, HeadDim); }
};

template <DType T, int HeadDim>
struct DecodeSelector {
  using policy_type = DecodePolicy;
  static constexpr DType dtype = T;
  static constexpr int head_dim = HeadDim;
  constexpr DecodePolicy operator()(int arch) const { return decode_policy(arch, T, HeadDim); }
};

}  // namespace muh
