// tuning/selectors.hpp — the fallback chain sm90 → sm80 → sm75 → portable, and the stateless
// selectors dispatch instantiates kernels from (CCCL's policy selector, one per kernel family).
#pragma once

#include "muh/targets.hpp"
#include "muh/tuning/fit.hpp"
#include "muh/tuning/tuning_portable.hpp"
#include "muh/tuning/tuning_sm75.hpp"
#include "muh/tuning/tuning_sm80.hpp"
#include "muh/tuning/tuning_sm90.hpp"

namespace muh {

namespace tuning {

// The row of the table a dispatch target reads: sm_90a (prefill) tuning_sm90.hpp's kPrefillSm90a,
// falling back to sm_90's row; sm_90 and newer tuning_sm90.hpp; sm_80 the A100's
// 163 KB table, sm_81–89 the 99 KB one (tuning_sm80.hpp); sm_75–79 tuning_sm75.hpp. None below
// sm_75, and none where the table has no row for the dtype (fp32 everywhere, bf16 on sm_75, all
// of decode on sm_75): those run the portable rule (tuning_portable.hpp).
constexpr FoundRow<PrefillPolicy> prefill_row(int arch, DType t, int head_dim) {
  if (arch == kTargetSm90a) {  // the Hopper agent's rows, else sm_90's (the target it falls back to)
    const FoundRow<PrefillPolicy> r = find_row(sm90::kPrefillSm90a, t, head_dim);
    return r.found ? r : find_row(sm90::kPrefill, t, head_dim);
  }
  if (arch >= 90) return find_row(sm90::kPrefill, t, head_dim);
  if (arch == 80) return find_row(sm80::kPrefillA100, t, head_dim);
  if (arch > 80) return find_row(sm80::kPrefill99K, t, head_dim);
  if (arch >= 75) return find_row(sm75::kPrefill, t, head_dim);
  return {};
}

constexpr FoundRow<DecodePolicy> decode_row(int arch, DType t, int head_dim) {
  if (arch >= 90) return find_row(sm90::kDecode, t, head_dim);
  if (arch == 80) return find_row(sm80::kDecodeA100, t, head_dim);
  if (arch > 80) return find_row(sm80::kDecode99K, t, head_dim);
  return {};
}

// The wide row of a target (tuning_sm90.hpp's kDecodeWide: sm_90 and newer), if it has one.
constexpr FoundRow<DecodePolicy> decode_wide_row(int arch, DType t, int head_dim) {
  if (arch >= 90) return find_row(sm90::kDecodeWide, t, head_dim);
  return {};
}

}  // namespace tuning

// `arch` is a dispatch target: an NVIDIA compute capability (75, 80, 86, 89, 90, ...) or 0 for
// the own-arch (portable) class. The row is fitted to its target's cap here and nowhere else
// (tuning/fit.hpp; a no-op on every row as written).
constexpr PrefillPolicy prefill_policy(int arch, DType t, int head_dim) {
  const tuning::FoundRow<PrefillPolicy> r = tuning::prefill_row(arch, t, head_dim);
  return r.found ? tuning::fit(r.policy, t, head_dim, r.policy.smem_cap_bytes) : tuning::portable::prefill(t, head_dim);
}

constexpr DecodePolicy decode_policy(int arch, DType t, int head_dim) {
  const tuning::FoundRow<DecodePolicy> r = tuning::decode_row(arch, t, head_dim);
  return r.found ? tuning::fit(r.policy, t, head_dim, r.policy.smem_cap_bytes) : tuning::portable::decode(t, head_dim);
}

// Whether target `arch` has a wide decode row for (t, head_dim), and that row (fitted as
// decode_policy's; as written on every table). A plan takes it for the calls decode_sm80_wide_reads
// allows where its cost model prefers it (plan.cpp).
constexpr bool has_decode_wide_policy(int arch, DType t, int head_dim) {
  return tuning::decode_wide_row(arch, t, head_dim).found;
}
constexpr DecodePolicy decode_wide_policy(int arch, DType t, int head_dim) {
  const tuning::FoundRow<DecodePolicy> r = tuning::decode_wide_row(arch, t, head_dim);
  return r.found ? tuning::fit(r.policy, t, head_dim, r.policy.smem_cap_bytes) : decode_policy(arch, t, head_dim);
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

// The wide rows' selector: a target's wide row, else its own row (so that dispatch collapses the
// targets without one onto one getter, which the wide launch never instantiates a kernel for).
template <DType T, int HeadDim>
struct DecodeWideSelector {
  using policy_type = DecodePolicy;
  static constexpr DType dtype = T;
  static constexpr int head_dim = HeadDim;
  constexpr DecodePolicy operator()(int arch) const { return decode_wide_policy(arch, T, HeadDim); }
};

}  // namespace muh
