// device_buffer.hpp — a device allocation freed on scope exit, for the checks `muh verify`, the
// GPU tests and the benchmarks share (check/decode_case.hpp, check/prefill_check.hpp,
// tests/gpu/gpu_test_util.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace muh::check {

struct DevBuf {
  void* p = nullptr;
  std::size_t n = 0;

  DevBuf() = default;
  explicit DevBuf(std::size_t bytes) { alloc(bytes); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  // (Re)allocates `bytes`; false when cudaMalloc fails (p is then null).
  bool alloc(std::size_t bytes) {
    if (p) cudaFree(p);
    p = nullptr;
    n = bytes;
    return bytes == 0 || cudaMalloc(&p, bytes) == cudaSuccess;
  }
};

}  // namespace muh::check
