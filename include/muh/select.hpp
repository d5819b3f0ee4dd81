// select.hpp — the one selection: which dispatch target's row a kernel family runs on a profile.
//
// choose_prefill() / choose_decode() walk the compiled dispatch targets (MUH_TARGETS) from the
// highest the profile may run down to the portable one (0), and take the first whose table row
// the profile can run: its footprint fits the profile's shared memory and the profile has what
// its agent uses (cp.async, the tensor cores of the dtype). Everything that asks "which kernel
// runs" — select_attention_config() (`muh config`), plan_decode(), plan_prefill() (and through
// them the launchers, the C ABI and the torch ops), `muh config --explain`, `muh verify` and the
// benchmarks — calls these two functions; none re-derives the walk.
//
// Why a walk and not "the profile's row, else portable": a part with less shared memory than its
// arch's row assumes still has the rows of older targets, which are faster than the portable one.
// E.g. decode bf16 hd 128 on a cc 9.0 part with 99 KB: sm_90's row needs 108,800 B, sm_89's
// 73,984 B fits; a consumer Blackwell (cc 12.0, 99 KB) gets sm_89's 64×64 prefill row at hd 256,
// not sm_90's 209 KB one (which failed at cudaFuncSetAttribute before this walk existed).
//
// The result carries its trace (every target passed over and why), so `--explain` prints what was
// decided rather than a second copy of the rule; describe() (select.cpp) words it.
#pragma once

#include <string>

#include "muh/dispatch.hpp"
#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/paged_kv.hpp"
#include "muh/shapes.hpp"
#include "muh/status.hpp"
#include "muh/targets.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh {

// A set of dispatch targets, ascending (0 = portable first). Selections walk compiled_target_set()
// unless a test passes another (e.g. every known target).
struct TargetSet {
  int count = 0;
  int values[16] = {};
  constexpr bool contains(int t) const {
    for (int i = 0; i < count; ++i)
      if (values[i] == t) return true;
    return false;
  }
};

constexpr TargetSet compiled_target_set() {
  TargetSet s;
  for (std::size_t i = 0; i < compiled_targets::size && i < 16; ++i) s.values[s.count++] = compiled_targets::values[i];
  return s;
}

// Every dispatch target muh has rows for (the default MUH_TARGETS).
inline constexpr TargetSet kKnownTargets{7, {0, 75, 80, 86, 89, 90, kTargetSm90a}};

// Why a target's row was passed over.
enum class Pass : unsigned char {
  smem,             // its footprint exceeds the profile's shared memory per block (need > have)
  no_async_copy,    // its agent pipelines with cp.async; the profile has none
  no_tensor_cores,  // its agent multiplies on the dtype's tensor cores; the profile has none
  kv_source,        // its agent does not read the call's K/V source (prefill: a paged layout)
  variant,          // its agent has no variant hooks and the call has a variant (prefill: sm90)
  kv_dtype,         // its agent does not read the call's fp8 KV cache (prefill: sm75, sm90)
  no_key_split,     // prefill plan: its agent has no key split and the call's q tiles fill too few
                    // of the SMs; the next row's agent splits the keys (prefill_plan.hpp)
};

struct Passed {
  int target = 0;
  Pass why = Pass::smem;
  KVSource source = KVSource::contiguous;  // Pass::kv_source: the call's K/V source
  int need_bytes = 0;  // Pass::smem: the row's footprint
  int have_bytes = 0;  // Pass::smem: the profile's limit
  int tiles = 0;       // Pass::no_key_split: the call's q tiles on this row
  int slots = 0;       // Pass::no_key_split: CTAs this row runs at once
  int page_size = 0;   // Pass::kv_source: the call's slots a page (paged)
};

// Why a selection has no row (target < 0).
enum class NoRow : unsigned char {
  none,                 // a row was chosen
  bad_head_dim,         // not one of kSupportedHeadDims
  forced_not_compiled,  // the forced target is not in the target set
  forced_too_new,       // the forced target is newer than the profile (or not portable on an own arch)
  forced_does_not_fit,  // the forced target's row cannot run on the profile (passed[0] says why)
  nothing_fits,         // not even the portable row fits (passed[] holds every target)
};

struct SelectOptions {
  int force_target = -1;  // -1: walk; else exactly this target's row, or no row
  KVSource kv_source = KVSource::contiguous;  // prefill: where K/V come from (params.hpp)
  bool variant = false;  // prefill: the call has a variant (the general kind, muh/variant.hpp)
  KVDType kv_dtype = KVDType::same;  // prefill: the paged cache's element type (muh/kv_quant.hpp)
  int page_size = 16;  // prefill, paged: slots a page (prefill_agent_reads_pages; vLLM's default)
};

template <class Policy>
struct Selection {
  Policy policy{};
  int target = -1;        // the row's dispatch target; -1: no row (`error` says why)
  int start = -1;         // the highest target the profile may run: where the walk began
  bool forced = false;
  int force_target = -1;  // SelectOptions::force_target as asked
  NoRow error = NoRow::none;
  int passed_count = 0;   // targets passed over, highest first
  Passed passed[16] = {};
  // The profile is a cc 9.0 GPU and the target set has no sm_90a: the Hopper prefill agent is not
  // in this build (MUH_TARGETS without 90a), so prefill runs sm_90's row; describe() says so.
  bool sm90a_not_compiled = false;
  constexpr bool ok() const { return target >= 0; }
};

using PrefillSelection = Selection<PrefillPolicy>;
using DecodeSelection = Selection<DecodePolicy>;

// Whether a profile runs a target's code: an own arch the portable target only; a GPU those
// that targets.hpp's target_runs_on_cc allows on its compute capability.
constexpr bool profile_runs_target(const HardwareCapability& hw, int target) {
  return hw.is_own_arch() ? target == 0 : target_runs_on_cc(target, hw.compute_capability);
}

// The highest target of `set` a profile may run, where the selection's walk starts: 0 on an own
// arch, else the highest it runs (0 when the set has none: portable only).
constexpr int start_target(const HardwareCapability& hw, const TargetSet& set = compiled_target_set()) {
  if (hw.is_own_arch()) return 0;
  int best = 0;
  for (int i = 0; i < set.count; ++i)
    if (profile_runs_target(hw, set.values[i]) && set.values[i] > best) best = set.values[i];
  return best;
}

namespace detail {

// Whether the profile can run a row of `agent` for dtype t, ignoring shared memory.
constexpr bool agent_runs_on(Agent agent, DType t, const HardwareCapability& hw, Pass* why) {
  if (agent == Agent::portable) return true;
  if ((agent == Agent::sm80 || agent == Agent::sm90) && !hw.async_copy) {
    *why = Pass::no_async_copy;
    return false;
  }
  const bool tc = t == DType::bf16 ? hw.bf16_tensor_cores : t == DType::fp16 ? hw.fp16_tensor_cores : false;
  if (!tc) {
    *why = Pass::no_tensor_cores;
    return false;
  }
  return true;
}

template <class Policy, class Row, class Bytes, class Reads>
constexpr Selection<Policy> choose(const HardwareCapability& hw, DType t, int head_dim, const SelectOptions& opt,
                                   const TargetSet& set, Row row, Bytes bytes, Reads reads) {
  Selection<Policy> s;
  if (!is_supported_head_dim(head_dim)) {
    s.error = NoRow::bad_head_dim;
    return s;
  }
  s.start = start_target(hw, set);
  s.sm90a_not_compiled = !hw.is_own_arch() && hw.compute_capability == 90 && !set.contains(kTargetSm90a);
  s.forced = opt.force_target >= 0;
  s.force_target = opt.force_target;
  // Candidates, highest first: the forced target alone, or every target of the set <= start.
  int cand[16] = {};
  int n = 0;
  if (s.forced) {
    if (!set.contains(opt.force_target)) {
      s.error = NoRow::forced_not_compiled;
      return s;
    }
    if (!profile_runs_target(hw, opt.force_target)) {
      s.error = NoRow::forced_too_new;
      return s;
    }
    cand[n++] = opt.force_target;
  } else {
    // An arch-specific target (sm_90a) whose row is the row of the target below it (no row of its
    // own for this dtype and head dim) is not a candidate: the walk names the target whose row it
    // is (sm_90), so that plans and --explain say which agent runs.
    for (int i = set.count - 1; i >= 0; --i)
      if (set.values[i] <= s.start && profile_runs_target(hw, set.values[i]) &&
          !(target_is_arch_specific(set.values[i]) && i > 0 && row(set.values[i]) == row(set.values[i - 1])))
        cand[n++] = set.values[i];
  }
  for (int i = 0; i < n; ++i) {
    const Policy p = row(cand[i]);
    Passed why{cand[i], Pass::smem, opt.kv_source, bytes(p), hw.smem_limit()};
    why.page_size = opt.page_size;
    const bool reads_source = reads(p, &why.why);  // (sets why.why when it cannot)
    if (reads_source && agent_runs_on(p.agent, t, hw, &why.why) && why.need_bytes <= why.have_bytes) {
      s.policy = p;
      s.target = cand[i];
      return s;
    }
    s.passed[s.passed_count++] = why;
  }
  s.error = s.forced ? NoRow::forced_does_not_fit : NoRow::nothing_fits;
  return s;
}

}  // namespace detail

constexpr PrefillSelection choose_prefill(const HardwareCapability& hw, DType t, int head_dim,
                                          const SelectOptions& opt = {},
                                          const TargetSet& set = compiled_target_set()) {
  return detail::choose<PrefillPolicy>(
      hw, t, head_dim, opt, set, [t, head_dim](int target) { return prefill_policy(target, t, head_dim); },
      [t, head_dim](const PrefillPolicy& p) { return prefill_smem_bytes(p, t, head_dim); },
      [&opt](const PrefillPolicy& p, Pass* why) {
        if (!prefill_agent_reads_pages(p.agent, opt.kv_source, opt.page_size)) return *why = Pass::kv_source, false;
        if (opt.variant && !prefill_agent_has_variants(p.agent)) return *why = Pass::variant, false;
        if (!prefill_agent_reads_kv(p.agent, opt.kv_dtype)) return *why = Pass::kv_dtype, false;
        return true;
      });
}

constexpr DecodeSelection choose_decode(const HardwareCapability& hw, DType t, int head_dim,
                                        const SelectOptions& opt = {},
                                        const TargetSet& set = compiled_target_set()) {
  return detail::choose<DecodePolicy>(
      hw, t, head_dim, opt, set, [t, head_dim](int target) { return decode_policy(target, t, head_dim); },
      [t, head_dim](const DecodePolicy& p) { return decode_smem_bytes(p, t, head_dim); },
      [](const DecodePolicy&, Pass*) { return true; });
}

// Calls f(PrefillSelector<T, D>{}, DecodeSelector<T, D>{}) for a runtime (dtype, head_dim): the
// compile-time selectors the instance files dispatch with (dispatch.hpp), for code that asks which
// instantiation serves a selection (`muh config --explain`, the tests). Nothing for an
// unsupported head dim.
template <DType T, class F>
void with_selectors_of(int head_dim, F&& f) {
  static_assert(kSupportedHeadDims.size() == 4, "with_selectors_of() lists every supported head dim");
  switch (head_dim) {
    case 64: f(PrefillSelector<T, 64>{}, DecodeSelector<T, 64>{}); break;
    case 96: f(PrefillSelector<T, 96>{}, DecodeSelector<T, 96>{}); break;
    case 128: f(PrefillSelector<T, 128>{}, DecodeSelector<T, 128>{}); break;
    case 256: f(PrefillSelector<T, 256>{}, DecodeSelector<T, 256>{}); break;
    default: break;
  }
}

template <class F>
void with_selectors(DType t, int head_dim, F&& f) {
  switch (t) {
    case DType::fp16: with_selectors_of<DType::fp16>(head_dim, f); break;
    case DType::bf16: with_selectors_of<DType::bf16>(head_dim, f); break;
    case DType::fp32: with_selectors_of<DType::fp32>(head_dim, f); break;
  }
}

// The rule that fired, in one line: e.g. "sm_89 row: sm_90's 108,800 B > 101,376 B" or
// "sm_90 row: the profile's own target". For a selection without a row, why there is none.
std::string describe(const PrefillSelection& s);
std::string describe(const DecodeSelection& s);

// ok for a selection with a row; otherwise the Status an entry point returns (`where` starts the
// message, e.g. "prefill: "): not_compiled for a forced target outside the build, unsupported for
// one the profile cannot run, invalid_argument for an unsupported head dim.
Status selection_status(const PrefillSelection& s, const std::string& where, const HardwareCapability& hw);
Status selection_status(const DecodeSelection& s, const std::string& where, const HardwareCapability& hw);

}  // namespace muh
