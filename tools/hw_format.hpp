// hw_format.hpp — how `muh config` and `muh hw` print a HardwareCapability (text and JSON).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "muh/hardware.hpp"

namespace muh::cli {

// 49152 → "48 KB", 166912 → "163 KB", 6 MiB → "6 MB" (binary units, as the datasheets mean them).
inline std::string format_bytes(std::int64_t b) {
  auto fmt = [](std::int64_t v, std::int64_t unit, const char* name) {
    if (v % unit == 0) return std::to_string(v / unit) + " " + name;
    const std::int64_t tenths = (v * 10 + unit / 2) / unit;
    return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " " + name;
  };
  if (b >= (std::int64_t(1) << 20)) return fmt(b, std::int64_t(1) << 20, "MB");
  if (b >= 1024) return fmt(b, 1024, "KB");
  return std::to_string(b) + " B";
}

inline std::string arch_name(int cc) {
  return cc == kOwnArch ? std::string("own") : "sm_" + std::to_string(cc);
}

// "cp.async, TMA, wgmma, fp16 TC, bf16 TC"; "no async copy" leads when cp.async is missing.
inline std::string hw_flags(const HardwareCapability& hw) {
  std::string s = hw.async_copy ? "" : "no async copy";
  auto add = [&](bool on, const char* n) {
    if (!on) return;
    if (!s.empty()) s += ", ";
    s += n;
  };
  add(hw.async_copy, "cp.async");
  add(hw.tma, "TMA");
  add(hw.wgmma, "wgmma");
  add(hw.fp16_tensor_cores, "fp16 TC");
  add(hw.bf16_tensor_cores, "bf16 TC");
  return s;
}

// One line: "bi-v100 (own arch) · 16 SMs · 48 KB smem/block (opt-in 48 KB) · 900 GB/s · 6 MB L2 ·
// warp 32 · 1024 threads/block · no async copy".
inline std::string describe_hw(const HardwareCapability& hw) {
  return std::string(hw.name) + " (" + (hw.is_own_arch() ? "own arch" : arch_name(hw.compute_capability)) +
         ") · " + std::to_string(hw.sm_count) + " SMs · " +
         format_bytes(hw.max_shared_memory_per_block) + " smem/block (opt-in " +
         format_bytes(hw.max_shared_memory_per_block_optin) + ") · " +
         std::to_string(hw.memory_bandwidth_gbps) + " GB/s · " + format_bytes(hw.l2_cache_size_bytes) +
         " L2 · warp " + std::to_string(hw.warp_size) + " · " + std::to_string(hw.max_threads_per_block) +
         " threads/block · " + hw_flags(hw);
}

inline nlohmann::json hw_to_json(const HardwareCapability& hw) {
  return {
      {"name", hw.name},
      {"compute_capability", hw.compute_capability},
      {"arch", arch_name(hw.compute_capability)},
      {"warp_size", hw.warp_size},
      {"max_threads_per_block", hw.max_threads_per_block},
      {"max_shared_memory_per_block", hw.max_shared_memory_per_block},
      {"max_shared_memory_per_block_optin", hw.max_shared_memory_per_block_optin},
      {"sm_count", hw.sm_count},
      {"memory_bandwidth_gbps", hw.memory_bandwidth_gbps},
      {"l2_cache_size_bytes", hw.l2_cache_size_bytes},
      {"async_copy", hw.async_copy},
      {"tma", hw.tma},
      {"wgmma", hw.wgmma},
      {"fp16_tensor_cores", hw.fp16_tensor_cores},
      {"bf16_tensor_cores", hw.bf16_tensor_cores},
  };
}

}  // namespace muh::cli
