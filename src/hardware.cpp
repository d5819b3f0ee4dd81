// hardware.cpp — HardwareCapability of the present device, read through the CUDA runtime.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <string>

#include "muh/hardware.hpp"

namespace muh {

namespace {
// Why cudaGetDeviceCount found nothing, in words. With no driver at all the runtime answers
// cudaErrorInsufficientDriver ("CUDA driver version is insufficient for CUDA runtime version"),
// which reads like an old driver; cudaDriverGetVersion tells the two apart (0: none installed).
std::string no_device_message(cudaError_t e) {
  if (e == cudaSuccess || e == cudaErrorNoDevice) return "no CUDA device found";
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  if (e == cudaErrorInsufficientDriver)
    return driver == 0 ? "no CUDA device found (no driver)"
                       : "no CUDA device usable: the driver supports CUDA " + version(driver) +
                             ", older than this build's runtime (CUDA " + version(runtime) + ")";
  return std::string("no CUDA device found (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
}
}  // namespace

DeviceQuery query_current_device(int ordinal) {
  DeviceQuery r;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    r.status = {StatusCode::no_device, no_device_message(e)};
    return r;
  }
  if (ordinal < 0 && cudaGetDevice(&ordinal) != cudaSuccess) ordinal = 0;
  if (ordinal >= count) {
    r.status = invalid_argument("device ordinal " + std::to_string(ordinal) + " out of range (" +
                                std::to_string(count) + " devices)");
    return r;
  }
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, ordinal) != cudaSuccess) v = 0;
    return v;
  };
  cudaDeviceProp prop{};
  if ((e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess) {
    r.status = {StatusCode::cuda_error, std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e)};
    return r;
  }
  HardwareCapability hw;
  const std::size_t n = std::min(std::strlen(prop.name), sizeof hw.name - 1);  // truncate long names
  std::memcpy(hw.name, prop.name, n);
  hw.name[n] = '\0';
  hw.warp_size = attr(cudaDevAttrWarpSize);
  hw.max_threads_per_block = attr(cudaDevAttrMaxThreadsPerBlock);
  hw.max_shared_memory_per_block = attr(cudaDevAttrMaxSharedMemoryPerBlock);
  hw.max_shared_memory_per_block_optin = attr(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  hw.sm_count = attr(cudaDevAttrMultiProcessorCount);
  // Peak bandwidth = 2 (double data rate) × memory clock (kHz) × bus width (bits) / 8.
  const double clock_khz = attr(cudaDevAttrMemoryClockRate);
  const double bus_bits = attr(cudaDevAttrGlobalMemoryBusWidth);
  hw.memory_bandwidth_gbps = int(2.0 * clock_khz * 1e3 * bus_bits / 8.0 / 1e9 + 0.5);
  hw.l2_cache_size_bytes = attr(cudaDevAttrL2CacheSize);
  hw.compute_capability = attr(cudaDevAttrComputeCapabilityMajor) * 10 + attr(cudaDevAttrComputeCapabilityMinor);
  r.hw = with_arch_flags(hw);
  return r;
}

Status device_profile(int ordinal, HardwareCapability* hw) {
  if (hw == nullptr) return invalid_argument("device_profile: hw must not be null");
  if (ordinal < 0 && cudaGetDevice(&ordinal) != cudaSuccess) {
    cudaGetLastError();
    return query_current_device(-1).status;  // says why there is no device
  }
  static std::mutex mu;
  static std::array<HardwareCapability, 64> cache;
  static std::array<bool, 64> have{};
  if (ordinal < static_cast<int>(cache.size())) {
    std::lock_guard<std::mutex> lock(mu);
    if (have[ordinal]) {
      *hw = cache[ordinal];
      return Status::Ok();
    }
  }
  const DeviceQuery q = query_current_device(ordinal);
  if (!q.status.ok()) return q.status;
  if (ordinal < static_cast<int>(cache.size())) {
    std::lock_guard<std::mutex> lock(mu);
    cache[ordinal] = q.hw;
    have[ordinal] = true;
  }
  *hw = q.hw;
  return Status::Ok();
}

}  // namespace muh
