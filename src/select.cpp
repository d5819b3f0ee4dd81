// select.cpp — the words for a selection (select.hpp): the rule that fired, and the Status of a
// selection without a row.
#include "muh/select.hpp"

#include <string>

namespace muh {
namespace {

// 108800 → "108,800".
std::string grouped(long long v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return v < 0 ? "-" + s : s;
}

std::string why_passed(const Passed& p) {
  const std::string t = target_name(p.target) + "'s";
  switch (p.why) {
    case Pass::smem: return t + " " + grouped(p.need_bytes) + " B > " + grouped(p.have_bytes) + " B";
    case Pass::no_async_copy: return t + " agent needs cp.async, which the profile lacks";
    case Pass::no_tensor_cores: return t + " agent needs the dtype's tensor cores, which the profile lacks";
    case Pass::kv_source:
      return t + " agent does not read " + (p.source == KVSource::paged_vllm ? "paged vLLM-layout" : "paged NHD") +
             " K/V" + (p.source == KVSource::paged_vllm && p.page_size % 16 != 0
                           ? " of " + std::to_string(p.page_size) + "-slot pages"
                           : "");
    case Pass::variant: return t + " agent has no variant hooks (window, soft-cap, sinks, ALiBi)";
    case Pass::kv_dtype: return t + " agent does not read an fp8 KV cache (the sm80 and portable agents do)";
    case Pass::no_key_split:
      return t + " agent has no key split and this call has " + grouped(p.tiles) + " q tiles for its " +
             grouped(p.slots) + " slots: the next row splits the keys";
  }
  return t + " row does not fit";
}

template <class S>
std::string describe_any(const S& s) {
  switch (s.error) {
    case NoRow::none: break;
    case NoRow::bad_head_dim: return "no row: unsupported head_dim";
    case NoRow::forced_not_compiled:
      return "no row: the forced target " + target_name(s.force_target) + " is not compiled into this build";
    case NoRow::forced_too_new:
      return "no row: the forced target " + target_name(s.force_target) + " is newer than the profile or not its arch";
    case NoRow::forced_does_not_fit: return "no row: forced " + why_passed(s.passed[0]);
    case NoRow::nothing_fits: {
      std::string r = "no row fits:";
      for (int i = 0; i < s.passed_count; ++i) r += (i ? "; " : " ") + why_passed(s.passed[i]);
      return r;
    }
  }
  std::string r = target_name(s.target) + " row: ";
  if (s.forced) return r + "forced (PlanOptions::force_target)";
  if (s.passed_count == 0)
    return r + (s.target == 0 && s.start == 0 ? "the profile's target (portable class)" : "the profile's own target");
  for (int i = 0; i < s.passed_count; ++i) r += (i ? "; " : "") + why_passed(s.passed[i]);
  return r;
}

template <class S>
Status status_any(const S& s, const std::string& where, const HardwareCapability& hw) {
  const std::string profile = "'" + std::string(hw.name) + "' (" +
                              (hw.is_own_arch() ? std::string("own arch: portable only")
                                                : "sm_" + std::to_string(hw.compute_capability)) + ")";
  switch (s.error) {
    case NoRow::none: return Status::Ok();
    case NoRow::bad_head_dim: return invalid_argument(where + "head_dim is not supported (supported: 64, 96, 128, 256)");
    case NoRow::forced_not_compiled:
      return {StatusCode::not_compiled,
              where + "target " + target_name(s.force_target) + " is not compiled into this build (compiled: " +
                  detail::describe_targets(compiled_targets::values, compiled_targets::size) +
                  "); rebuild with MUH_TARGETS including it"};
    case NoRow::forced_too_new:
      return unsupported(where + "target " + target_name(s.force_target) + " cannot run on " + profile);
    case NoRow::forced_does_not_fit:
    case NoRow::nothing_fits: return unsupported(where + describe_any(s) + " on " + profile);
  }
  return unsupported(where + "no row");
}

}  // namespace

std::string describe(const PrefillSelection& s) {
  std::string r = describe_any(s);
  if (s.ok() && s.sm90a_not_compiled)
    r += " (sm_90a, the Hopper agent, is not compiled into this build: MUH_TARGETS without 90a)";
  return r;
}
std::string describe(const DecodeSelection& s) { return describe_any(s); }

Status selection_status(const PrefillSelection& s, const std::string& where, const HardwareCapability& hw) {
  return status_any(s, where, hw);
}
Status selection_status(const DecodeSelection& s, const std::string& where, const HardwareCapability& hw) {
  return status_any(s, where, hw);
}

}  // namespace muh
