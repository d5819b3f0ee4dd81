// kernels/launch_status.hpp — what the launchers (decode_launch.cuh, prefill_launch.cuh) share
// around a kernel launch, as a Status with one line: setting a kernel's max dynamic shared memory
// to its policy footprint, reading the launch's error, and whether a kernel runs sm_90 code
// (which decides the dependent launches and the TMA path). Host code only.
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

// Whether the code the device runs for `kernel` was compiled for sm_90+ (its sm_90-only paths —
// grid-dependency waits and triggers, TMA copies — are compiled in): the machine code must be
// sm_90+ AND come from sm_90+ PTX (compute_80 PTX JIT-compiled on an H100 is sm_90 machine code
// without them).
template <class Kernel>
bool runs_sm90_code(Kernel kernel, int device_cc) {
  if (device_cc < 90) return false;
  cudaFuncAttributes fa{};
  if (cudaFuncGetAttributes(&fa, kernel) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return fa.binaryVersion >= 90 && fa.ptxVersion >= 90;
}

// runs_sm90_code for the launchers' per-call decisions (dependent launches, TMA): false below
// sm_90 without asking, and asked once per kernel, on the first sm_90+ device — every sm_90+
// device runs the same sm_90 code of a build, and a first call on an older device must not
// decide for later ones.
template <auto Kernel>
bool runs_sm90_code_once(int device_cc) {
  if (device_cc < 90) return false;
  static const bool sm90_code = runs_sm90_code(Kernel, device_cc);
  return sm90_code;
}

// The error of the last launch, if any, as "<what>: <CUDA error>".
inline Status launch_status(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {StatusCode::cuda_error, std::string(what) + ": " + cudaGetErrorString(e)};
  return Status::Ok();
}

// The same for a cudaLaunchKernelEx, which returns its error: `launched`, else the last error.
inline Status launch_status(cudaError_t launched, const char* what) {
  if (launched != cudaSuccess) {
    cudaGetLastError();  // clear it: the Status carries it
    return {StatusCode::cuda_error, std::string(what) + ": " + cudaGetErrorString(launched)};
  }
  return launch_status(what);
}

}  // namespace muh::kernels
