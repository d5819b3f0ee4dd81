// tests/cpu/test_fast_div.cpp — kernels/fast_div.hpp's multiply-and-shift division equals / and %
// for the divisors the paged copies use (page sizes 8 … 1056, powers of two and not) and for the
// edges of its stated range (1 <= d < 2^31, 0 <= n < 2^31), on the host path, which computes
// __umulhi's value in 64 bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "muh/kernels/fast_div.hpp"

namespace {

using muh::kernels::FastDiv;

void expect_exact(const FastDiv& f, int n) {
  int rem = -1;
  const int q = f.divmod(n, &rem);
  ASSERT_EQ(q, n / f.d) << "n " << n << " d " << f.d;
  ASSERT_EQ(rem, n % f.d) << "n " << n << " d " << f.d;
}

TEST(FastDiv, PowersOfTwoAreShifts) {
  for (int k = 0; k < 31; ++k) {
    const FastDiv f = FastDiv::make(1 << k);
    EXPECT_EQ(f.mul, 1u) << k;
    EXPECT_EQ(f.shift, static_cast<std::uint32_t>(k));
  }
}

TEST(FastDiv, PageSizesEveryKeyUpTo2M) {
  for (int d : {1, 3, 7, 8, 16, 24, 32, 48, 64, 80, 128, 256, 528, 1056, 4096}) {
    const FastDiv f = FastDiv::make(d);
    for (int n = 0; n < (1 << 21); ++n) expect_exact(f, n);
  }
}

TEST(FastDiv, EdgesOfTheRange) {
  const int kMax = 0x7fffffff;
  std::vector<int> ds = {1, 2, 3, 5, 7, 528, 1056, 65535, 65536, 65537, 1 << 30, (1 << 30) + 1, kMax - 1, kMax};
  for (int d : ds) {
    const FastDiv f = FastDiv::make(d);
    for (long long m : {0LL, 1LL, static_cast<long long>(d) - 1, static_cast<long long>(d), static_cast<long long>(d) + 1,
                        2LL * d - 1, 2LL * d, static_cast<long long>(kMax) - 1, static_cast<long long>(kMax)})
      if (m >= 0 && m <= kMax) expect_exact(f, static_cast<int>(m));
    // multiples of d and their neighbours up to the top of the range
    for (long long q = static_cast<long long>(kMax) / d; q >= 0 && q > static_cast<long long>(kMax) / d - 64; --q)
      for (int e : {-1, 0, 1}) {
        const long long n = q * d + e;
        if (n >= 0 && n <= kMax) expect_exact(f, static_cast<int>(n));
      }
  }
}

TEST(FastDiv, RandomPairs) {
  std::mt19937_64 rng(20261202);
  std::uniform_int_distribution<int> n_of(0, 0x7fffffff), d_small(1, 1 << 16), d_any(1, 0x7fffffff);
  for (int i = 0; i < 2000000; ++i) {
    const FastDiv f = FastDiv::make(i % 2 ? d_small(rng) : d_any(rng));
    expect_exact(f, n_of(rng));
  }
}

}  // namespace
