// kernels/launch_status.hpp — the two CUDA runtime calls around every kernel launch of the
// launchers (decode_launch.cuh, prefill_launch.cuh), as a Status with one line: setting a
// kernel's max dynamic shared memory to its policy footprint, and reading the launch's error.
// Host code only.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "muh/status.hpp"

namespace muh::kernels {

// Max dynamic shared memory of `kernel` = `bytes` (the policy footprint: an emulated profile
// runs within its own cap). `who` starts the message ("paged_decode", "prefill").
template <class Kernel>
Status set_max_dynamic_smem(Kernel kernel, int bytes, const char* who) {
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess)
    return {StatusCode::cuda_error, std::string(who) + ": setting " + std::to_string(bytes) +
                                        " B of dynamic shared memory failed: " + cudaGetErrorString(e)};
  return Status::Ok();
}

// The error of the last launch, if any, as "<what>: <CUDA error>".
inline Status launch_status(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {StatusCode::cuda_error, std::string(what) + ": " + cudaGetErrorString(e)};
  return Status::Ok();
}

}  // namespace muh::kernels
