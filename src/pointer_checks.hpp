// pointer_checks.hpp — the alignment test the input checks of paged_decode() (decode.cu,
// plan.cpp) and prefill() (prefill.cu) share. Internal, not installed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace muh::detail {

inline bool is_aligned(const void* p, std::size_t n) { return reinterpret_cast<std::uintptr_t>(p) % n == 0; }

}  // namespace muh::detail
