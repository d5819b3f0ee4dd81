// hardware.hpp — what muh knows about a GPU: HardwareCapability, constexpr presets, and a query of
// the present device through the CUDA runtime.
//
// Layer 1 of muh (hardware → tuning → dispatch → kernels → API → tools). Nothing here depends on
// a GPU being present; query_current_device() reports "no CUDA device" instead of failing.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "muh/status.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st* (cuda_runtime_api.h); this header needs no CUDA header

namespace muh {

// Compute capability as major*10+minor (75, 80, 86, 89, 90). 0 stands for an "own" architecture:
// a non-NVIDIA part that compiles plain CUDA C++ (Iluvatar's BI-V100) and runs muh's portable agent.
inline constexpr int kOwnArch = 0;

struct HardwareCapability {
  char name[48] = "bi-v100";  // a preset's key, or the device name read from the runtime
  int warp_size = 32;
  int max_threads_per_block = 1024;
  int max_shared_memory_per_block = 49152;        // default (no opt-in) limit, bytes
  int max_shared_memory_per_block_optin = 49152;  // with cudaFuncSetAttribute, bytes
  int sm_count = 16;
  int memory_bandwidth_gbps = 900;                // vendor or clock × bus figure, GB/s
  std::int64_t l2_cache_size_bytes = 6 * 1024 * 1024;
  int compute_capability = kOwnArch;              // 0 = own (not NVIDIA)
  // Capability flags: what the agents may use.
  bool async_copy = false;          // cp.async (sm_80+)
  bool tma = false;                 // cp.async.bulk / tensor memory accelerator (sm_90)
  bool wgmma = false;               // warpgroup MMA (sm_90a)
  bool fp16_tensor_cores = false;   // mma.sync f16 (m16n8k8 on sm_75, m16n8k16 on sm_80+)
  bool bf16_tensor_cores = false;   // mma.sync bf16 (sm_80+)

  constexpr bool is_own_arch() const { return compute_capability == kOwnArch; }
  // Largest dynamic shared memory one block can be given.
  constexpr int smem_limit() const { return max_shared_memory_per_block_optin; }
};

namespace presets {
// Vendor datasheet figures (DESIGN.md's table); a profile read from the present device wins.
// bi-v100: exactly the seed's HardwareCapability() defaults (16 SMs, 48 KB, 900 GB/s, 6 MB L2).
inline constexpr HardwareCapability bi_v100{};
inline constexpr HardwareCapability t4{"t4", 32, 1024, 49152, 65536, 40, 320, 4ll << 20, 75,
                                       false, false, false, true, false};
inline constexpr HardwareCapability a100{"a100", 32, 1024, 49152, 166912, 108, 2039, 40ll << 20, 80,
                                         true, false, false, true, true};
inline constexpr HardwareCapability l40s{"l40s", 32, 1024, 49152, 101376, 142, 864, 96ll << 20, 89,
                                         true, false, false, true, true};
inline constexpr HardwareCapability h100{"h100", 32, 1024, 49152, 232448, 132, 3350, 50ll << 20, 90,
                                         true, true, true, true, true};
inline constexpr HardwareCapability h200{"h200", 32, 1024, 49152, 232448, 132, 4800, 60ll << 20, 90,
                                         true, true, true, true, true};
}  // namespace presets

inline constexpr std::array<HardwareCapability, 6> kPresets{
    presets::bi_v100, presets::t4, presets::a100, presets::l40s, presets::h100, presets::h200};

// A preset by name ("bi-v100", "t4", "a100", "l40s", "h100", "h200"); nullopt when unknown.
constexpr std::optional<HardwareCapability> find_preset(std::string_view name) {
  for (const auto& p : kPresets)
    if (std::string_view(p.name) == name) return p;
  return std::nullopt;
}

// The capability flags an NVIDIA compute capability implies.
constexpr HardwareCapability with_arch_flags(HardwareCapability hw) {
  const int cc = hw.compute_capability;
  hw.async_copy = cc >= 80;
  hw.tma = cc >= 90;
  hw.wgmma = cc == 90;
  hw.fp16_tensor_cores = cc >= 75;
  hw.bf16_tensor_cores = cc >= 80;
  return hw;
}

// The present device (device `ordinal`), read through the CUDA runtime: SM count, shared memory
// limits, L2, compute capability, and bandwidth = 2 (DDR) × memory clock × bus width.
// Returns StatusCode::no_device on a machine without a CUDA device.
struct DeviceQuery {
  Status status;
  HardwareCapability hw;
};
DeviceQuery query_current_device(int ordinal = -1);

// The profile of device `ordinal` (-1: the current device, cudaGetDevice), read with
// query_current_device() once per device and cached for the process (thread-safe). The one place
// the entry points, the C ABI and the torch ops get the present device from: a run does a
// cudaGetDevice and a cache lookup, never an attribute query (cudaGetDeviceProperties costs ~1 ms).
Status device_profile(int ordinal, HardwareCapability* hw);

// The profile a launch on `stream` sees (src/green_context.cpp): device_profile() of the current
// device, with sm_count the SMs of the stream's green context when it has one (cached per green
// context). The C ABI and the torch ops plan with it, so a plan fits the SMs its kernels get.
// A green context destroyed and another created with the same handle would read the first one's
// count; contexts are long-lived in the engines that make them.
Status stream_profile(CUstream_st* stream, HardwareCapability* hw);

}  // namespace muh
