// random_inputs.hpp — the CPU tests' random inputs: n floats uniform in [lo, hi) from a seed
// (std::mt19937, so the same on every platform the tests run on).
#pragma once

#include <random>
#include <vector>

namespace muh::cpu_test {

inline std::vector<float> random_vec(std::size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace muh::cpu_test
