// green_partition.hpp — a stream that runs on N SMs of the current device only: a green context
// (CUDA 12.4+) made of an SM partition, for the GPU tests and benchmarks that run muh the way an
// engine that partitions its GPU does (and for the BI-V100 emulation's 16 SMs). Driver API through
// the runtime's entry points (no libcuda link). Host code only.
//
//   cuDeviceGetDevResource(SM) → cuDevSmResourceSplitByCount(min N) → cuDevResourceGenerateDesc →
//   cuGreenCtxCreate → cuGreenCtxStreamCreate (non-blocking)
//
// Partitions come in the device's granularity (Hopper: multiples of 8 SMs), so `sms()` says what
// was granted; 16 on the H200 gives exactly 16.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <string>

#include "muh/driver_entry.hpp"

namespace muh::check {

class GreenPartition {
 public:
  GreenPartition() = default;
  GreenPartition(const GreenPartition&) = delete;
  GreenPartition& operator=(const GreenPartition&) = delete;
  ~GreenPartition() { release(); }

  // Makes a partition of at least `min_sms` SMs of the current device; "" on success, else why not.
  std::string create(unsigned min_sms) {
    release();
    const auto get_res = driver_entry<PFN_cuDeviceGetDevResource_v12040>("cuDeviceGetDevResource", 12040);
    const auto split = driver_entry<PFN_cuDevSmResourceSplitByCount_v12040>("cuDevSmResourceSplitByCount", 12040);
    const auto gen = driver_entry<PFN_cuDevResourceGenerateDesc_v12040>("cuDevResourceGenerateDesc", 12040);
    const auto make = driver_entry<PFN_cuGreenCtxCreate_v12040>("cuGreenCtxCreate", 12040);
    const auto make_stream = driver_entry<PFN_cuGreenCtxStreamCreate_v12050>("cuGreenCtxStreamCreate", 12050);
    destroy_ = driver_entry<PFN_cuGreenCtxDestroy_v12040>("cuGreenCtxDestroy", 12040);
    destroy_stream_ = driver_entry<PFN_cuStreamDestroy_v4000>("cuStreamDestroy", 4000);
    if (!get_res || !split || !gen || !make || !make_stream || !destroy_ || !destroy_stream_)
      return "the driver has no green-context API";
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) return "no current device";
    CUdevResource all{}, part{}, rest{};
    unsigned groups = 1;
    if (get_res(static_cast<CUdevice>(dev), &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS)
      return "cuDeviceGetDevResource failed";
    if (split(&part, &groups, &all, &rest, 0, min_sms) != CUDA_SUCCESS || groups < 1)
      return "cuDevSmResourceSplitByCount failed for " + std::to_string(min_sms) + " SMs";
    CUdevResourceDesc desc = nullptr;
    if (gen(&desc, &part, 1) != CUDA_SUCCESS) return "cuDevResourceGenerateDesc failed";
    if (make(&ctx_, desc, static_cast<CUdevice>(dev), CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS) {
      ctx_ = nullptr;
      return "cuGreenCtxCreate failed";
    }
    CUstream s = nullptr;
    if (make_stream(&s, ctx_, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) {
      release();
      return "cuGreenCtxStreamCreate failed";
    }
    stream_ = reinterpret_cast<cudaStream_t>(s);
    sms_ = static_cast<int>(part.sm.smCount);
    return "";
  }

  cudaStream_t stream() const { return stream_; }
  int sms() const { return sms_; }

 private:
  void release() {
    if (stream_ && destroy_stream_) destroy_stream_(reinterpret_cast<CUstream>(stream_));
    if (ctx_ && destroy_) destroy_(ctx_);
    stream_ = nullptr;
    ctx_ = nullptr;
    sms_ = 0;
  }

  CUgreenCtx ctx_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int sms_ = 0;
  PFN_cuGreenCtxDestroy_v12040 destroy_ = nullptr;
  PFN_cuStreamDestroy_v4000 destroy_stream_ = nullptr;
};

}  // namespace muh::check
