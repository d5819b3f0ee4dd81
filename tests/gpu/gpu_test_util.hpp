// gpu_test_util.hpp — shared by the GPU tests: skip (saying so) without a GPU, CUDA checks,
// device buffers, storage conversion, error metrics.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/reference.hpp"

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

// A device buffer of bytes, freed on scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : bytes(n) {
    if (n && cudaMalloc(&ptr, n) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(ptr); }
};

// Host float values → device storage of `t` (rounded), and back.
inline std::vector<unsigned char> to_storage(const std::vector<float>& x, DType t) {
  std::vector<unsigned char> out(x.size() * dtype_size(t));
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (t == DType::fp32) {
      std::memcpy(out.data() + 4 * i, &x[i], 4);
    } else {
      const std::uint16_t h = t == DType::bf16 ? ref::float_to_bf16_bits(x[i]) : ref::float_to_fp16_bits(x[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

inline std::vector<float> from_storage(const unsigned char* p, std::size_t n, DType t) {
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (t == DType::fp32) {
      std::memcpy(&out[i], p + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = t == DType::bf16 ? ref::bf16_bits_to_float(h) : ref::fp16_bits_to_float(h);
    }
  }
  return out;
}

// Rounds host values to what the storage type can hold (so the reference sees the same inputs).
inline void round_to(std::vector<float>& x, DType t) {
  if (t == DType::bf16) ref::round_to_bf16(x.data(), x.size());
  if (t == DType::fp16) ref::round_to_fp16(x.data(), x.size());
}

inline std::vector<float> random_vector(std::size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Unit roundoff of a storage type: the error a naive same-precision implementation makes per
// rounding of its output (bf16 2^-8, fp16 2^-11, fp32 2^-24).
constexpr double unit_roundoff(DType t) {
  return t == DType::bf16 ? 1.0 / 256 : t == DType::fp16 ? 1.0 / 2048 : 1.0 / 16777216;
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

}  // namespace muh::testing
