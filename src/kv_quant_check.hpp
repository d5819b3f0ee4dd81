// kv_quant_check.hpp — the host-side checks of a KV cache's element type and scales
// (muh/kv_quant.hpp), shared by the decode (plan.cpp) and the cache write (cache_write.cu); each
// adds its own rules on top (the q / key dtype, the decode's vLLM page size). Internal, not
// installed. No device access.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include "muh/kv_quant.hpp"
#include "muh/status.hpp"

namespace muh::detail {

// A known type; for an fp8 one, k_scale and v_scale finite and > 0 (a `same` cache reads
// neither). `where` ends with ": ".
inline Status check_kv_quant_values(const KVQuant& kv, const std::string& where) {
  if (kv.dtype != KVDType::same && !is_fp8(kv.dtype))
    return invalid_argument(where + "kv dtype " + std::to_string(static_cast<int>(kv.dtype)) +
                            " is not one of auto (0), fp8_e4m3 (1), fp8_e5m2 (2)");
  if (!is_fp8(kv.dtype)) return Status::Ok();
  const std::pair<const char*, float> scales[] = {{"k_scale", kv.k_scale}, {"v_scale", kv.v_scale}};
  for (const auto& [name, v] : scales)
    if (!(std::isfinite(v) && v > 0.f)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
      return invalid_argument(where + name + " must be finite and > 0, got " + buf);
    }
  return Status::Ok();
}

}  // namespace muh::detail
