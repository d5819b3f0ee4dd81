// gpu_test_util.hpp — shared by the GPU tests: skip (saying so) without a GPU, CUDA checks,
// device buffers, the device's compute capability, storage conversion, error metrics.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "device_buffer.hpp"
#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/reference.hpp"
#include "muh/targets.hpp"

namespace muh::testing {

// Skips the test with a message when no CUDA device is present.
#define MUH_REQUIRE_GPU()                                                         \
  do {                                                                            \
    int muh_n_ = 0;                                                               \
    if (cudaGetDeviceCount(&muh_n_) != cudaSuccess || muh_n_ == 0) {              \
      cudaGetLastError();                                                         \
      GTEST_SKIP() << "no CUDA device present: GPU test skipped";                 \
    }                                                                             \
  } while (0)

#define MUH_CUDA_CHECK(expr)                                                      \
  do {                                                                            \
    cudaError_t muh_e_ = (expr);                                                  \
    ASSERT_EQ(muh_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(muh_e_); \
  } while (0)

// A device buffer of bytes, freed on scope exit (the one the checks use).
using DeviceBuffer = check::DevBuf;

// Whether the first n bytes at device pointer `dev`, once the device has finished, equal the first
// n of `ref` (a C ABI call's output against the C++ API's, bitwise); a CUDA error fails it.
inline ::testing::AssertionResult device_bytes_equal(const void* dev, const std::vector<unsigned char>& ref,
                                                     std::size_t n) {
  if (ref.size() < n) return ::testing::AssertionFailure() << "the reference holds " << ref.size() << " < " << n << " bytes";
  std::vector<unsigned char> got(n);
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(got.data(), dev, n, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return ::testing::AssertionFailure() << "reading the output: " << cudaGetErrorString(e);
  if (!std::equal(got.begin(), got.end(), ref.begin())) return ::testing::AssertionFailure() << "the bytes differ";
  return ::testing::AssertionSuccess();
}

// Compute capability of the current device as major·10 + minor (e.g. 90); call after
// MUH_REQUIRE_GPU().
inline int device_cc() {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor;
}


inline std::vector<float> random_vector(std::size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

struct ErrorStats {
  double max_abs = 0;
  double max_ref = 0;
  std::size_t nonfinite = 0;
};

inline ErrorStats compare(const std::vector<float>& got, const std::vector<float>& ref) {
  ErrorStats s;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++s.nonfinite;
      continue;
    }
    s.max_abs = std::max(s.max_abs, double(std::fabs(got[i] - ref[i])));
    s.max_ref = std::max(s.max_ref, double(std::fabs(ref[i])));
  }
  return s;
}

// max |a[i] − b[i]| over two outputs of one shape (V2 against V1, a run against another).
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

// The decode variant tests' per-query-head sinks and ALiBi slopes (up to 12 heads; a case takes
// its first num_q_heads): sinks far below and above the scores, slopes of several octaves.
inline const std::vector<float> kDecodeSinks = {-60.f, -8.f, -1.f, 0.f, 2.5f, 9.f, 30.f, 80.f, -3.f, 1.f, 4.f, -20.f};
inline const std::vector<float> kDecodeAlibi = {0.5f,        0.25f,   0.125f,   0.0625f, 0.03125f, 0.015625f,
                                                0.0078125f,  0.00390625f, 0.1875f, 0.09375f, 0.75f,  0.046875f};

}  // namespace muh::testing
