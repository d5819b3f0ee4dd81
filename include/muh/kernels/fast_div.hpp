// kernels/fast_div.hpp — n / d and n % d for a divisor fixed per launch, by a multiply-high, an add
// and a shift instead of the ~20-instruction integer division (Granlund & Montgomery, "Division
// by invariant integers using multiplication", 1994, §4). The paged copies divide every key row
// they issue by the page size, a run-time value (hybrid models' pages are 528 or 1056 slots, not
// powers of two); for a power of two the multiplier is 1 and it is a shift.
// Exact for 0 <= n < 2^31 and 1 <= d < 2^31 (tests/cpu/test_fast_div.cpp checks edges and random
// pairs against / and %): with l = ceil(log2 d) and m = floor(2^32 (2^l − d) / d) + 1 < 2^32,
// floor(n / d) = (umulhi(m, n) + n) >> l, and umulhi(m, n) < n keeps the sum inside 32 bits.
#pragma once

#include <cstdint>

#include "muh/host_device.hpp"

namespace muh::kernels {

struct FastDiv {
  std::uint32_t mul = 1;    // m above (1 for powers of two)
  std::uint32_t shift = 0;  // l above
  int d = 1;

  // d >= 1 (the callers pass a page size their checks have accepted).
  static FastDiv make(int d) {
    FastDiv f;
    f.d = d;
    while ((std::uint64_t{1} << f.shift) < static_cast<std::uint64_t>(d)) ++f.shift;
    const std::uint64_t one = 1;
    f.mul = static_cast<std::uint32_t>(((one << 32) * ((one << f.shift) - static_cast<std::uint64_t>(d))) /
                                           static_cast<std::uint64_t>(d) +
                                       1);
    return f;
  }
  MUH_HOST_DEVICE MUH_FORCEINLINE int div(int n) const {
    const std::uint32_t u = static_cast<std::uint32_t>(n);
#if defined(__CUDA_ARCH__)
    const std::uint32_t hi = __umulhi(mul, u);
#else
    const std::uint32_t hi = static_cast<std::uint32_t>((static_cast<std::uint64_t>(mul) * u) >> 32);
#endif
    return static_cast<int>((hi + u) >> shift);
  }
  // The quotient, and n − q·d in *rem.
  MUH_HOST_DEVICE MUH_FORCEINLINE int divmod(int n, int* rem) const {
    const int q = div(n);
    *rem = n - q * d;
    return q;
  }
};

}  // namespace muh::kernels
