// green_context.cpp — stream_profile(): the SMs a launch on a stream can use, for the plans.
//
// A stream created in a green context (CUDA 12.4+: cuDevSmResourceSplitByCount →
// cuDevResourceGenerateDesc → cuGreenCtxCreate → cuGreenCtxStreamCreate) runs its kernels on that
// context's SMs only — engines partition a GPU this way (prefill/decode multiplexing), and muh's
// BI-V100 emulation runs on a 16-SM partition of the H200. A plan made for all of the device's SMs
// then splits a decode for SMs it does not have (on 16 of the H200's SMs the 132-SM plan was up to
// 1.37× slower than the best split count; issue 18's table). So the plans read the SM count of the
// launch stream's green context: cuStreamGetGreenCtx, then cuGreenCtxGetDevResource(SM).smCount,
// reached through the runtime's driver entry points (no libcuda link, as decode_launch.cuh's TMA
// encoder) and cached per green context.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "muh/driver_entry.hpp"
#include "muh/hardware.hpp"

namespace muh {
namespace {

// SMs of the stream's green context; 0 when it has none (or the driver has no green contexts).
int green_context_sms(cudaStream_t stream) {
  static const auto get_ctx = driver_entry<PFN_cuStreamGetGreenCtx_v12040>("cuStreamGetGreenCtx", 12040);
  static const auto get_res = driver_entry<PFN_cuGreenCtxGetDevResource_v12040>("cuGreenCtxGetDevResource", 12040);
  if (get_ctx == nullptr || get_res == nullptr) return 0;
  CUgreenCtx ctx = nullptr;
  if (get_ctx(reinterpret_cast<CUstream>(stream), &ctx) != CUDA_SUCCESS || ctx == nullptr) return 0;
  static std::mutex mu;
  static std::map<CUgreenCtx, int> cache;  // a destroyed context's handle may be reused: see below
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = cache.find(ctx);
    if (it != cache.end()) return it->second;
  }
  CUdevResource r{};
  if (get_res(ctx, &r, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS) return 0;
  const int sms = static_cast<int>(r.sm.smCount);
  std::lock_guard<std::mutex> lock(mu);
  cache[ctx] = sms;
  return sms;
}

}  // namespace

Status stream_profile(CUstream_st* stream, HardwareCapability* hw) {
  MUH_TRY(device_profile(-1, hw));
  const int sms = green_context_sms(stream);
  if (sms > 0 && sms < hw->sm_count) hw->sm_count = sms;
  return Status::Ok();
}

}  // namespace muh
