// variant_check.hpp — the host-side checks of a call's attention variant (muh/variant.hpp),
// shared by prefill (prefill_check.cpp) and decode (plan.cpp / decode.cu). Internal, not
// installed. No device access: every failure is reported on a machine without a GPU.
#pragma once

#include <cmath>
#include <string>

#include "muh/build_config.hpp"
#include "muh/dtype.hpp"
#include "muh/instances.hpp"
#include "muh/status.hpp"
#include "muh/variant.hpp"
#include "pointer_checks.hpp"

namespace muh::detail {

// The values: window sides -1 or >= 0, softcap finite and >= 0, each per-head array given exactly
// when its flag asks for it. `where` ends with ": ".
inline Status check_variant_values(const Variant& v, const std::string& where) {
  auto side = [&](int w, const char* name) -> Status {
    if (w < -1)
      return invalid_argument(where + "variant." + name + " is " + std::to_string(w) +
                              "; it must be -1 (unbounded) or >= 0 keys");
    return Status::Ok();
  };
  MUH_TRY(side(v.window_left, "window_left"));
  MUH_TRY(side(v.window_right, "window_right"));
  if (!std::isfinite(v.softcap) || v.softcap < 0.f)
    return invalid_argument(where + "variant.softcap is " + std::to_string(v.softcap) +
                            "; it must be finite and >= 0 (0 = no soft-capping)");
  auto array = [&](bool use, const float* ptr, const char* name, const char* flag) -> Status {
    if (use && ptr == nullptr)
      return invalid_argument(where + "variant." + name + " must not be null when variant." + flag +
                              " is set (one fp32 value per q head)");
    if (!use && ptr != nullptr)
      return invalid_argument(where + "variant." + name + " is given but variant." + flag +
                              " is not set; set it, or pass null");
    if (use && !is_aligned(ptr, 4)) return invalid_argument(where + "variant." + name + " must be 4-byte aligned");
    return Status::Ok();
  };
  MUH_TRY(array(v.use_sinks, v.sinks, "sinks", "use_sinks"));
  return array(v.use_alibi, v.alibi_slopes, "alibi_slopes", "use_alibi");
}

// The call's variant kind is compiled into this build for its (dtype, head_dim) (MUH_VARIANTS,
// MUH_VARIANT_HEAD_DIMS).
inline Status check_variant_compiled(const Variant& v, DType t, int head_dim, const std::string& where) {
  if (variant_kind(v) == VariantKind::plain) return Status::Ok();
  if (!MUH_VARIANT_GENERAL)
    return {StatusCode::not_compiled, where + "the call asks for a variant (" + describe_variant(v) +
                                          ") but the general variant kind is not compiled into this build; "
                                          "rebuild with MUH_VARIANTS=\"plain;general\""};
  if (!is_general_instance(t, head_dim))
    return {StatusCode::not_compiled, where + "the call asks for a variant (" + describe_variant(v) +
                                          ") but the general variant kind is not compiled for " +
                                          std::string(dtype_name(t)) + " with head_dim " + std::to_string(head_dim) +
                                          "; rebuild with MUH_VARIANT_HEAD_DIMS including it"};
  return Status::Ok();
}

}  // namespace muh::detail
