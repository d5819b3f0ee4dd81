// driver_entry.hpp — a CUDA driver API function through the runtime's entry-point table
// (cudaGetDriverEntryPointByVersion), so that muh needs no link against libcuda: the TMA encoder of
// the decode agent (kernels/decode_launch.cuh), the green-context queries of stream_profile()
// (src/green_context.cpp) and the test harness's green partitions (check/green_partition.hpp).
#pragma once

#include <cuda_runtime_api.h>

namespace muh {

// The driver's `name` at ABI `version` (e.g. 12040 for 12.4) as the PFN type Fn, or nullptr when
// the driver has none (the runtime's error is cleared).
template <class Fn>
Fn driver_entry(const char* name, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace muh
