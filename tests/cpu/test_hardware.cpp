// Hardware profiles (hardware.hpp): the presets hold the datasheet figures (bi-v100 exactly the
// seed's HardwareCapability()), names resolve, and the device query answers truthfully — ok on a
// machine with a GPU, StatusCode::no_device without one. Nothing here is skipped.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <string>

#include "muh/hardware.hpp"

namespace muh {
namespace {

struct PresetFigures {
  const char* name;
  int cc, sms, smem_optin, gbps;
  long long l2;
  bool async_copy, tma, wgmma, fp16_tc, bf16_tc;
};

// DESIGN.md's table (vendor datasheets).
const PresetFigures kFigures[] = {
    {"bi-v100", 0, 16, 49152, 900, 6ll << 20, false, false, false, false, false},
    {"t4", 75, 40, 65536, 320, 4ll << 20, false, false, false, true, false},
    {"a100", 80, 108, 166912, 2039, 40ll << 20, true, false, false, true, true},
    {"l40s", 89, 142, 101376, 864, 96ll << 20, true, false, false, true, true},
    {"h100", 90, 132, 232448, 3350, 50ll << 20, true, true, true, true, true},
    {"h200", 90, 132, 232448, 4800, 60ll << 20, true, true, true, true, true},
};

class Preset : public ::testing::TestWithParam<PresetFigures> {};

TEST_P(Preset, DatasheetFigures) {
  const PresetFigures& f = GetParam();
  const auto hw = find_preset(f.name);
  ASSERT_TRUE(hw.has_value()) << f.name;
  EXPECT_EQ(std::string(hw->name), f.name);
  EXPECT_EQ(hw->compute_capability, f.cc);
  EXPECT_EQ(hw->sm_count, f.sms);
  EXPECT_EQ(hw->max_shared_memory_per_block_optin, f.smem_optin);
  EXPECT_EQ(hw->max_shared_memory_per_block, 49152);  // every part: 48 KB without opt-in
  EXPECT_EQ(hw->memory_bandwidth_gbps, f.gbps);
  EXPECT_EQ(hw->l2_cache_size_bytes, f.l2);
  EXPECT_EQ(hw->warp_size, 32);
  EXPECT_EQ(hw->max_threads_per_block, 1024);
  EXPECT_EQ(hw->async_copy, f.async_copy);
  EXPECT_EQ(hw->tma, f.tma);
  EXPECT_EQ(hw->wgmma, f.wgmma);
  EXPECT_EQ(hw->fp16_tensor_cores, f.fp16_tc);
  EXPECT_EQ(hw->bf16_tensor_cores, f.bf16_tc);
  EXPECT_EQ(hw->smem_limit(), f.smem_optin);
  EXPECT_EQ(hw->is_own_arch(), f.cc == 0);
  // An NVIDIA preset's flags are what its compute capability implies (as for a queried device).
  if (f.cc != 0) {
    const HardwareCapability derived = with_arch_flags(*hw);
    EXPECT_EQ(derived.async_copy, hw->async_copy);
    EXPECT_EQ(derived.tma, hw->tma);
    EXPECT_EQ(derived.wgmma, hw->wgmma);
    EXPECT_EQ(derived.fp16_tensor_cores, hw->fp16_tensor_cores);
    EXPECT_EQ(derived.bf16_tensor_cores, hw->bf16_tensor_cores);
  }
}

INSTANTIATE_TEST_SUITE_P(All, Preset, ::testing::ValuesIn(kFigures), [](const auto& info) {
  std::string n = info.param.name;
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  return n;
});

TEST(Preset, BiV100IsExactlyTheSeeds) {
  // seed: HardwareCapability(warp_size=32, max_threads_per_block=1024,
  //   max_shared_memory_per_block=49152, sm_count=16, memory_bandwidth_gbps=900,
  //   l2_cache_size_bytes=6*1024*1024); no cp.async ("needs SM80+").
  constexpr HardwareCapability seed = presets::bi_v100;
  static_assert(seed.warp_size == 32 && seed.max_threads_per_block == 1024);
  static_assert(seed.max_shared_memory_per_block == 49152 && seed.max_shared_memory_per_block_optin == 49152);
  static_assert(seed.sm_count == 16 && seed.memory_bandwidth_gbps == 900);
  static_assert(seed.l2_cache_size_bytes == 6 * 1024 * 1024);
  static_assert(!seed.async_copy && !seed.tma && seed.is_own_arch());
  // And the default-constructed capability is the seed's too (its dataclass defaults).
  constexpr HardwareCapability dflt{};
  EXPECT_EQ(std::string(dflt.name), "bi-v100");
  EXPECT_EQ(dflt.sm_count, seed.sm_count);
  EXPECT_EQ(dflt.max_shared_memory_per_block, seed.max_shared_memory_per_block);
  EXPECT_EQ(kPresets[0].sm_count, 16);
}

TEST(Preset, UnknownNameIsNullopt) {
  EXPECT_FALSE(find_preset("v100").has_value());
  EXPECT_FALSE(find_preset("").has_value());
  EXPECT_FALSE(find_preset("H200").has_value());  // names are lower case
}

TEST(Preset, NamesAreUnique) {
  for (std::size_t i = 0; i < kPresets.size(); ++i)
    for (std::size_t j = i + 1; j < kPresets.size(); ++j)
      EXPECT_NE(std::string(kPresets[i].name), std::string(kPresets[j].name));
}

// ---- The present device -------------------------------------------------------------------------

bool machine_has_cuda_device() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

TEST(QueryCurrentDevice, OkWithAGpuNoDeviceWithout) {
  const DeviceQuery q = query_current_device();
  if (machine_has_cuda_device()) {
    ASSERT_TRUE(q.status.ok()) << q.status.message();
    EXPECT_FALSE(std::string(q.hw.name).empty());
    EXPECT_GE(q.hw.compute_capability, 75);  // CUDA 13 runs sm_75 and newer
    EXPECT_GT(q.hw.sm_count, 0);
    EXPECT_GT(q.hw.memory_bandwidth_gbps, 100);
    EXPECT_GT(q.hw.l2_cache_size_bytes, 0);
    EXPECT_GE(q.hw.max_shared_memory_per_block_optin, q.hw.max_shared_memory_per_block);
    EXPECT_EQ(q.hw.warp_size, 32);
    EXPECT_EQ(q.hw.async_copy, q.hw.compute_capability >= 80);
  } else {
    EXPECT_EQ(q.status.code(), StatusCode::no_device);
    EXPECT_NE(q.status.message().find("no CUDA device"), std::string::npos) << q.status.message();
    EXPECT_EQ(q.status.message().find('\n'), std::string::npos);
    // Without a driver the runtime's own words ("driver version is insufficient") read like an
    // old driver: the message says there is none.
    int driver = -1;
    if (cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0)
      EXPECT_EQ(q.status.message(), "no CUDA device found (no driver)");
  }
}

TEST(QueryCurrentDevice, OutOfRangeOrdinalIsAStatus) {
  const DeviceQuery q = query_current_device(1000);
  if (machine_has_cuda_device()) {
    EXPECT_EQ(q.status.code(), StatusCode::invalid_argument) << q.status.message();
  } else {
    EXPECT_EQ(q.status.code(), StatusCode::no_device);
  }
}

TEST(StatusNames, EveryCodeHasAName) {
  for (StatusCode c : {StatusCode::ok, StatusCode::invalid_argument, StatusCode::unsupported,
                       StatusCode::not_compiled, StatusCode::no_device, StatusCode::cuda_error})
    EXPECT_STRNE(status_code_name(c), "unknown");
}

}  // namespace
}  // namespace muh
