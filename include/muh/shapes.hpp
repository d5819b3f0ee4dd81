// shapes.hpp — the problem shapes muh supports at all (independent of what a build compiles).
#pragma once

#include <array>

namespace muh {

// Head dims with a kernel body and tuning rows. A build may prune this list (MUH_HEAD_DIMS);
// selection still answers for every entry, and says when the instantiation is not compiled.
inline constexpr std::array<int, 4> kSupportedHeadDims{64, 96, 128, 256};

constexpr bool is_supported_head_dim(int d) {
  for (int s : kSupportedHeadDims)
    if (s == d) return true;
  return false;
}

}  // namespace muh
