// pointer_checks.hpp — the alignment test and the workspace check the input checks of
// paged_decode() (decode.cu, plan.cpp) and prefill() (prefill.cu) share. Internal, not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "muh/status.hpp"

namespace muh::detail {

inline bool is_aligned(const void* p, std::size_t n) { return reinterpret_cast<std::uintptr_t>(p) % n == 0; }

// A run's workspace against its plan's need (`what`: what the plan keeps there), for both
// families: a size without a pointer, a misaligned pointer, none or too little where the plan
// needs some — one line each, `where` starting it ("prefill: ", "paged_decode: ").
inline Status check_workspace(const std::string& where, const char* what, std::size_t need, const void* workspace,
                              std::size_t workspace_bytes) {
  if (workspace_bytes > 0 && workspace == nullptr)
    return invalid_argument(where + "workspace is null but workspace_bytes is " + std::to_string(workspace_bytes));
  if (!is_aligned(workspace, 16)) return invalid_argument(where + "workspace must be 16-byte aligned");
  if (need == 0) return Status::Ok();
  if (workspace == nullptr)
    return invalid_argument(where + "the plan needs " + std::to_string(need) + " B of workspace (" + what +
                            "); workspace is null");
  if (workspace_bytes < need)
    return invalid_argument(where + "workspace too small: " + std::to_string(workspace_bytes) +
                            " B given, the plan needs " + std::to_string(need) + " B (" + what + ")");
  return Status::Ok();
}

}  // namespace muh::detail
