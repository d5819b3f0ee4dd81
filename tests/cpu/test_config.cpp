// Policy selection (config.hpp, tuning/*.hpp): every table row validates and fits its profile,
// the stage rule follows async copy, fp32 fits its real footprint, the Qwen3.6 configs hold,
// and check_config_inputs says what is wrong in one line.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "muh/config.hpp"
#include "muh/models.hpp"

namespace muh {
namespace {

constexpr DType kDTypes[] = {DType::fp16, DType::bf16, DType::fp32};
constexpr int kTargets[] = {0, 75, 80, 86, 89, 90};

// The shared memory per block of the profile a target stands for.
int profile_smem(int target) {
  switch (target) {
    case 0: return presets::bi_v100.smem_limit();
    case 75: return presets::t4.smem_limit();
    case 80: return presets::a100.smem_limit();
    case 86: return 101376;  // sm_86: 99 KB opt-in (as the L40S's sm_89)
    case 89: return presets::l40s.smem_limit();
    default: return presets::h200.smem_limit();
  }
}

// ---- Every table row validates ---------------------------------------------------------------------

using RowKey = std::tuple<int, DType, int>;  // target, dtype, head_dim

std::string row_name(const ::testing::TestParamInfo<RowKey>& info) {
  const auto [target, t, hd] = info.param;
  return (target == 0 ? std::string("portable") : "sm" + std::to_string(target)) + "_" +
         std::string(dtype_name(t)) + "_hd" + std::to_string(hd);
}

class TableRow : public ::testing::TestWithParam<RowKey> {};

TEST_P(TableRow, PrefillRowValidatesAndFitsItsProfile) {
  const auto [target, t, hd] = GetParam();
  const PrefillPolicy p = prefill_policy(target, t, hd);
  EXPECT_TRUE(validate(p, t, hd));
  EXPECT_LE(prefill_smem_bytes(p, t, hd), p.smem_cap_bytes);
  EXPECT_LE(p.smem_cap_bytes, profile_smem(target));
  EXPECT_GT(std::string(p.evidence).size(), 10u) << "every row says where its numbers come from";
  if (p.agent == Agent::portable) {
    EXPECT_LE(prefill_smem_bytes(p, t, hd), 48 * 1024) << "the portable agent must fit 48 KB";
    EXPECT_EQ(p.num_stages, 1);
  }
  if (t == DType::fp32) {
    EXPECT_EQ(p.agent, Agent::portable) << "fp32 runs only the portable agent";
  }
}

TEST_P(TableRow, DecodeRowValidatesAndFitsItsProfile) {
  const auto [target, t, hd] = GetParam();
  const DecodePolicy p = decode_policy(target, t, hd);
  EXPECT_TRUE(validate(p, t, hd));
  EXPECT_LE(decode_smem_bytes(p, t, hd), p.smem_cap_bytes);
  EXPECT_LE(p.smem_cap_bytes, profile_smem(target));
  EXPECT_EQ(p.partition_size % p.tile_tokens, 0);
  EXPECT_GT(std::string(p.evidence).size(), 10u);
  if (p.agent == Agent::portable) {
    EXPECT_LE(decode_smem_bytes(p, t, hd), 48 * 1024);
    EXPECT_EQ(p.num_stages, 1);
  }
  if (t == DType::fp32) {
    EXPECT_EQ(p.agent, Agent::portable);
  }
  // TMA copies: only Hopper's sm80-agent rows, only where a box of 64 dims tiles the head, and
  // only with the padding the kernel aligns its stages in (W·S·512 B ≥ 1023).
  EXPECT_EQ(p.tma, target >= 90 && p.agent == Agent::sm80 && hd % 64 == 0) << "target " << target << " hd " << hd;
  if (p.tma) EXPECT_GE(p.num_warps * p.num_stages * 512, 1023);
}

INSTANTIATE_TEST_SUITE_P(AllRows, TableRow,
                         ::testing::Combine(::testing::ValuesIn(kTargets), ::testing::ValuesIn(kDTypes),
                                            ::testing::ValuesIn(kSupportedHeadDims)),
                         row_name);

// ---- num_stages follows async copy ---------------------------------------------------------------

using StageKey = std::tuple<int, DType, int>;  // preset index, dtype, head_dim

class Stages : public ::testing::TestWithParam<StageKey> {};

std::string preset_id(int i) {
  std::string n = kPresets[i].name;
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

std::string stage_name(const ::testing::TestParamInfo<StageKey>& info) {
  const auto [i, t, hd] = info.param;
  return preset_id(i) + "_" + std::string(dtype_name(t)) + "_hd" + std::to_string(hd);
}

TEST_P(Stages, OneWithoutAsyncCopyMoreWithIt) {
  const auto [i, t, hd] = GetParam();
  const HardwareCapability& hw = kPresets[i];
  const AttentionConfig c = select_attention_config(hw, t, hd, 32768, 8);
  EXPECT_TRUE(validate(c.prefill, t, hd));
  EXPECT_TRUE(validate(c.decode, t, hd));
  if (!hw.async_copy) {
    EXPECT_EQ(c.prefill.num_stages, 1);
    EXPECT_EQ(c.decode.num_stages, 1);
  } else {
    EXPECT_NE(c.prefill.agent, Agent::portable);  // a cp.async agent
    EXPECT_GT(c.prefill.num_stages, 1);
    EXPECT_GT(c.decode.num_stages, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets16Bit, Stages,
                         ::testing::Combine(::testing::Range(0, int(kPresets.size())),
                                            ::testing::Values(DType::fp16, DType::bf16),
                                            ::testing::ValuesIn(kSupportedHeadDims)),
                         stage_name);

TEST(Stages, ForcedToOneWhenAProfileLacksAsyncCopy) {
  // An sm_80-class profile without cp.async (a hand-made profile): the sm80 rows need a cp.async
  // pipeline, so the selector gives one stage on an agent that can run it — still a valid policy.
  HardwareCapability hw = presets::a100;
  hw.async_copy = false;
  const AttentionConfig c = select_attention_config(hw, DType::bf16, 128, 4096, 8);
  EXPECT_EQ(c.prefill.num_stages, 1);
  EXPECT_EQ(c.decode.num_stages, 1);
  EXPECT_TRUE(validate(c.prefill, DType::bf16, 128));
  EXPECT_TRUE(validate(c.decode, DType::bf16, 128));
}

// ---- sm_75 (T4): the sm75 agent for fp16, the portable agent for bf16 and fp32 --------------------

class Sm75Prefill : public ::testing::TestWithParam<int> {};  // head_dim

TEST_P(Sm75Prefill, Fp16RunsTheSm75AgentInOneBufferWithin64K) {
  const int hd = GetParam();
  const PrefillPolicy p = prefill_policy(75, DType::fp16, hd);
  EXPECT_EQ(p.agent, Agent::sm75);
  EXPECT_TRUE(validate(p, DType::fp16, hd));
  EXPECT_EQ(p.num_stages, 1) << "no cp.async on sm_75: one shared-memory buffer (the seed's one stage)";
  EXPECT_EQ(p.smem_cap_bytes, 64 * 1024);
  EXPECT_LE(prefill_smem_bytes(p, DType::fp16, hd), presets::t4.smem_limit());
  // Exactly the kernel's allocation (prefill_sm80.cuh static_asserts the same): Q + one K/V tile.
  EXPECT_EQ(prefill_smem_bytes(p, DType::fp16, hd), (p.block_m + p.block_n) * hd * 2);
  EXPECT_EQ(p.block_m % (16 * p.num_warps), 0) << "whole m16 tiles per warp";
  EXPECT_NE(std::string(p.evidence).find("not measured on a T4"), std::string::npos) << p.evidence;
  // The T4 profile keeps the row (it fits, and the agent needs no async copy).
  const AttentionConfig c = select_attention_config(presets::t4, DType::fp16, hd, 4096, 8);
  EXPECT_TRUE(c.prefill == p);
}

TEST_P(Sm75Prefill, Bf16AndFp32RunThePortableRow) {
  const int hd = GetParam();
  for (DType t : {DType::bf16, DType::fp32}) {
    EXPECT_TRUE(prefill_policy(75, t, hd) == tuning::portable::prefill(t, hd)) << dtype_name(t);
    EXPECT_EQ(select_attention_config(presets::t4, t, hd, 4096, 8).prefill.agent, Agent::portable) << dtype_name(t);
  }
}

TEST_P(Sm75Prefill, ValidateRejectsTheSm75AgentForOtherDtypes) {
  const int hd = GetParam();
  const PrefillPolicy p = prefill_policy(75, DType::fp16, hd);
  EXPECT_FALSE(validate(p, DType::bf16, hd)) << "no bf16 mma on sm_75";
  EXPECT_FALSE(validate(p, DType::fp32, hd));
}

INSTANTIATE_TEST_SUITE_P(HeadDims, Sm75Prefill, ::testing::ValuesIn(kSupportedHeadDims),
                         [](const auto& info) { return "hd" + std::to_string(info.param); });

TEST(Sm75Prefill, TilesAndFootprints) {
  // hd 64/96/128: 64×64 (16/24/32 KB: 2 CTAs fit a T4 SM at hd 128); hd 256: 64×16 (40 KB).
  EXPECT_EQ(prefill_smem_bytes(prefill_policy(75, DType::fp16, 128), DType::fp16, 128), 32768);
  EXPECT_EQ(prefill_policy(75, DType::fp16, 64).block_n, 64);
  EXPECT_EQ(prefill_policy(75, DType::fp16, 96).block_n, 64);
  EXPECT_EQ(prefill_policy(75, DType::fp16, 256).block_n, 16);
  EXPECT_EQ(prefill_smem_bytes(prefill_policy(75, DType::fp16, 256), DType::fp16, 256), 40960);
}

// ---- Ping-pong halves: the hd-256 warp-pair row on sm_90 only ------------------------------------

TEST(PingPong, OnlyTheHopperWarpPairRowTakesIt) {
  for (DType t : {DType::fp16, DType::bf16}) {
    const PrefillPolicy p = prefill_policy(90, t, 256);
    EXPECT_TRUE(p.ping_pong) << dtype_name(t);
    EXPECT_TRUE(prefill_sm80_warp_pairs(p, 256));
    EXPECT_EQ(p.num_stages, 4) << "the half that runs behind still reads the tile the other is done with";
    // Exactly the kernel's allocation: Q + 4 buffers + the pairs' exchange + a full and an empty
    // mbarrier per buffer; 209 KB, over the A100's 163 KB, so the sm_80 row keeps 2 buffers.
    EXPECT_EQ(prefill_smem_bytes(p, t, 256), (128 + 4 * 64) * 256 * 2 + 8 * (32 * 64 + 128) + 2 * 4 * 8);
    EXPECT_GT(prefill_smem_bytes(p, t, 256), presets::a100.smem_limit());
    EXPECT_FALSE(prefill_policy(80, t, 256).ping_pong);
    EXPECT_EQ(prefill_policy(80, t, 256).num_stages, 2);
    for (int hd : {64, 96, 128}) EXPECT_FALSE(prefill_policy(90, t, hd).ping_pong) << hd;
    // A different instantiation from the sm_80 row (ping_pong is part of ==).
    PrefillPolicy q = p;
    q.ping_pong = false;
    EXPECT_FALSE(q == p);
  }
}

TEST(PingPong, ValidateRejectsRowsTheScheduleDoesNotFit) {
  PrefillPolicy p = prefill_policy(90, DType::bf16, 256);
  ASSERT_TRUE(validate(p, DType::bf16, 256));
  PrefillPolicy two = p;
  two.num_stages = 2;  // no buffer for the half that runs behind
  EXPECT_FALSE(validate(two, DType::bf16, 256));
  EXPECT_FALSE(validate(p, DType::bf16, 128)) << "no warp pairs at hd 128";
  PrefillPolicy hd128 = prefill_policy(90, DType::bf16, 128);
  hd128.ping_pong = true;  // 4 warps, no pairs
  EXPECT_FALSE(validate(hd128, DType::bf16, 128));
}

// ---- fp32: the real footprint, fitted once ------------------------------------------------------

class Fp32Rule : public ::testing::TestWithParam<std::tuple<int, int>> {};  // preset index, head_dim

std::string fp32_name(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  const auto [i, hd] = info.param;
  return preset_id(i) + "_hd" + std::to_string(hd);
}

TEST_P(Fp32Rule, LargestTileWhoseRealFootprintFits) {
  const auto [i, hd] = GetParam();
  const AttentionConfig c = select_attention_config(kPresets[i], DType::fp32, hd, 4096, 4);
  // Independently: the largest of 64/32/16 with (block_m + 2·block_n)·hd·4 ≤ 48 KB.
  int want = 64;
  while (want > 16 && 3 * want * hd * 4 > 48 * 1024) want /= 2;
  EXPECT_EQ(c.prefill.agent, Agent::portable);
  EXPECT_EQ(c.decode.agent, Agent::portable);
  EXPECT_TRUE(validate(c.prefill, DType::fp32, hd));
  EXPECT_TRUE(validate(c.decode, DType::fp32, hd));
  EXPECT_EQ(c.prefill.block_n, want);
  EXPECT_EQ(c.prefill.block_m, want);
  // The seed's double count (loop on K+V, then halve again) would give half of its own loop.
  int seed = 64;
  while (seed * hd * 4 * 2 > 48 * 1024 && seed > 16) seed /= 2;
  seed /= 2;
  EXPECT_GE(c.prefill.block_n, seed);
}

INSTANTIATE_TEST_SUITE_P(AllPresets, Fp32Rule,
                         ::testing::Combine(::testing::Range(0, int(kPresets.size())),
                                            ::testing::ValuesIn(kSupportedHeadDims)),
                         fp32_name);

TEST(Fp32Rule, DiffersFromTheSeedWhereTheSeedDoubleCounted) {
  // hd 64/128/256: seed 32/16/8, muh 64/32/16 (tuning_portable.hpp says so).
  EXPECT_EQ(select_attention_config(presets::bi_v100, DType::fp32, 64, 4096, 4, kSeedBackends).prefill.block_n, 64);
  EXPECT_EQ(select_attention_config(presets::bi_v100, DType::fp32, 128, 4096, 4, kSeedBackends).prefill.block_n, 32);
  EXPECT_EQ(select_attention_config(presets::bi_v100, DType::fp32, 256, 4096, 4, kSeedBackends).prefill.block_n, 16);
}

// ---- Qwen3.6 configs -------------------------------------------------------------------------------

TEST(Qwen36, CompileTimeConfigsAreTheSeeds) {
  static_assert(QWEN36_BF16 == select_attention_config(presets::bi_v100, DType::bf16, 256, 100000, 4, kSeedBackends));
  static_assert(QWEN36_BF16.target_arch == kOwnArch && QWEN36_BF16.prefill.agent == Agent::portable);
  EXPECT_EQ(QWEN36_BF16.prefill.block_m, 32);
  EXPECT_EQ(QWEN36_BF16.prefill.block_n, 32);
  EXPECT_EQ(QWEN36_BF16.prefill.num_warps, 4);
  EXPECT_EQ(QWEN36_BF16.prefill.num_stages, 1);
  EXPECT_EQ(QWEN36_BF16.decode.partition_size, 512);
  EXPECT_EQ(QWEN36_BF16.v1_v2_threshold, 100001);
  EXPECT_TRUE(QWEN36_FP16 == QWEN36_BF16);
  // The seed's SMEM line: 32×256×2×2 = 32768 bytes (32 KB ≤ 48 KB); with Q: 48 KB.
  EXPECT_EQ(QWEN36_BF16.prefill.block_n * 256 * 2 * 2, 32768);
  EXPECT_EQ(prefill_smem_bytes(QWEN36_BF16.prefill, DType::bf16, 256), 49152);
}

TEST(Qwen36, ModelTableMatchesTheSeedShape) {
  const ModelShape* m = find_model("qwen3.6");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->head_dim, 256);
  EXPECT_EQ(m->num_kv_heads, 4);
  EXPECT_EQ(m->max_position_embeddings, 100000);
  EXPECT_EQ(m->dtype, DType::bf16);
  EXPECT_EQ(find_model("no-such-model"), nullptr);
}

TEST(Qwen36, OnH200WithMuhBackendsV2FromTheHardware) {
  constexpr AttentionConfig c = select_attention_config(presets::h200, DType::bf16, 256, 100000, 4, kMuhBackends);
  static_assert(c.use_native_v2 && c.v1_v2_threshold < 100000);
  EXPECT_EQ(target_arch(c.target_arch), 90);  // sm_90, or sm_90a where the build has it
  EXPECT_EQ(c.v1_v2_threshold, v1_v2_threshold(presets::h200, c.decode, DType::bf16, 256, 4, 100000, kMuhBackends));
}

class KnownModels : public ::testing::TestWithParam<std::tuple<int, int>> {};  // model, preset

TEST_P(KnownModels, ConfiguresWithinTheProfile) {
  const auto [mi, pi] = GetParam();
  const ModelShape& m = kModels[mi];
  const HardwareCapability& hw = kPresets[pi];
  EXPECT_TRUE(check_config_inputs(hw, m.head_dim, m.max_position_embeddings, m.num_kv_heads).empty());
  const AttentionConfig c = select_attention_config(hw, m.dtype, m.head_dim, m.max_position_embeddings, m.num_kv_heads);
  EXPECT_TRUE(validate(c.prefill, m.dtype, m.head_dim));
  EXPECT_TRUE(validate(c.decode, m.dtype, m.head_dim));
  EXPECT_LE(prefill_smem_bytes(c.prefill, m.dtype, m.head_dim), hw.smem_limit());
  EXPECT_LE(decode_smem_bytes(c.decode, m.dtype, m.head_dim), hw.smem_limit());
}

std::string model_name(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  const auto [mi, pi] = info.param;
  std::string n = kModels[mi].name;
  for (auto& ch : n)
    if (ch == '-' || ch == '.') ch = '_';
  return n + "_on_" + preset_id(pi);
}

INSTANTIATE_TEST_SUITE_P(ModelsOnPresets, KnownModels,
                         ::testing::Combine(::testing::Range(0, int(kModels.size())),
                                            ::testing::Range(0, int(kPresets.size()))),
                         model_name);

// ---- A device with less shared memory than its arch's rows assume -----------------------------------

TEST(SmallSharedMemory, FallsBackToThePortableRows) {
  HardwareCapability hw = presets::a100;  // an sm_80 part with only 64 KB opt-in
  hw.max_shared_memory_per_block_optin = 65536;
  const AttentionConfig c = select_attention_config(hw, DType::bf16, 128, 4096, 8);
  EXPECT_LE(prefill_smem_bytes(c.prefill, DType::bf16, 128), 65536);
  EXPECT_LE(decode_smem_bytes(c.decode, DType::bf16, 128), 65536);
  if (prefill_smem_bytes(prefill_policy(80, DType::bf16, 128), DType::bf16, 128) > 65536) {
    EXPECT_TRUE(c.prefill == tuning::portable::prefill(DType::bf16, 128));
  }
}

// ---- check_config_inputs: one line that says what is wrong ---------------------------------------

struct InputCase {
  const char* name;
  HardwareCapability hw;
  int head_dim;
  long long max_seq_len, kv_heads;
  const char* message;  // substring; "" = valid
};

HardwareCapability with_sms(int sms) {
  HardwareCapability hw = presets::h200;
  hw.sm_count = sms;
  return hw;
}
HardwareCapability with_smem(int bytes) {
  HardwareCapability hw = presets::t4;
  hw.max_shared_memory_per_block_optin = bytes;
  return hw;
}

const InputCase kInputs[] = {
    {"valid", presets::bi_v100, 256, 100000, 4, ""},
    {"head_dim_0", presets::bi_v100, 0, 100, 4, "unsupported head_dim (supported: 64, 96, 128, 256)"},
    {"head_dim_7", presets::bi_v100, 7, 100, 4, "unsupported head_dim"},
    {"head_dim_1024", presets::bi_v100, 1024, 100, 4, "unsupported head_dim"},
    {"head_dim_negative", presets::bi_v100, -128, 100, 4, "unsupported head_dim"},
    {"max_seq_len_0", presets::bi_v100, 128, 0, 4, "max_seq_len must be >= 1"},
    {"max_seq_len_negative", presets::bi_v100, 128, -5, 4, "max_seq_len must be >= 1"},
    {"max_seq_len_too_large", presets::bi_v100, 128, 1ll << 31, 4, "max_seq_len too large"},
    {"max_seq_len_largest", presets::bi_v100, 128, (1ll << 30) - 1, 4, ""},
    {"kv_heads_0", presets::bi_v100, 128, 100, 0, "num_kv_heads must be >= 1"},
    {"kv_heads_negative", presets::bi_v100, 128, 100, -4, "num_kv_heads must be >= 1"},
    {"kv_heads_too_large", presets::bi_v100, 128, 100, 1ll << 32, "num_kv_heads too large"},
    {"no_sms", with_sms(0), 128, 100, 4, "no SMs"},
    {"less_than_48k", with_smem(32768), 128, 100, 4, "less than 48 KB"},
};

class CheckInputs : public ::testing::TestWithParam<InputCase> {};

TEST_P(CheckInputs, Message) {
  const InputCase& c = GetParam();
  const std::string_view msg = check_config_inputs(c.hw, c.head_dim, c.max_seq_len, c.kv_heads);
  if (std::string_view(c.message).empty()) {
    EXPECT_TRUE(msg.empty()) << msg;
    return;
  }
  EXPECT_NE(msg.find(c.message), std::string_view::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string_view::npos) << "one line";
}

INSTANTIATE_TEST_SUITE_P(Inputs, CheckInputs, ::testing::ValuesIn(kInputs),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace muh

// ---- The checked form refuses what the precondition of the constexpr form excludes -------------
namespace muh {
namespace {

TEST(CheckedSelect, RefusesAnUnsupportedHeadDimInsteadOfReturningAConfig) {
  AttentionConfig c;
  Status s = select_attention_config(presets::h200, DType::bf16, 80, 4096, 8, kMuhBackends, &c);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("unsupported head_dim"), std::string::npos) << s.message();
  s = select_attention_config(presets::h200, DType::bf16, 128, 0, 8, kMuhBackends, &c);
  EXPECT_NE(s.message().find("max_seq_len"), std::string::npos) << s.message();
  ASSERT_TRUE(select_attention_config(presets::h200, DType::bf16, 128, 4096, 8, kMuhBackends, &c).ok());
  EXPECT_TRUE(c == select_attention_config(presets::h200, DType::bf16, 128, 4096, 8, kMuhBackends));
  EXPECT_EQ(select_attention_config(presets::h200, DType::bf16, 128, 4096, 8, kMuhBackends, nullptr).code(),
            StatusCode::invalid_argument);
  // The unchecked form on a bad head dim: selections without a row, never a launchable config.
  const AttentionConfig bad = select_attention_config(presets::h200, DType::bf16, 80, 4096, 8, kMuhBackends);
  EXPECT_FALSE(bad.prefill_selection.ok());
  EXPECT_EQ(bad.prefill_selection.error, NoRow::bad_head_dim);
}

// The one default (heuristics.hpp default_backends): the seed's backends on the bi-v100 profile,
// muh's elsewhere — the C++ form without backends, the CLI's auto and Python's None agree.
TEST(CheckedSelect, DefaultBackendsAreAuto) {
  EXPECT_EQ(select_attention_config(presets::bi_v100, DType::bf16, 256, 100000, 4).v1_v2_threshold, 100001);
  EXPECT_FALSE(select_attention_config(presets::bi_v100, DType::bf16, 256, 100000, 4).use_native_v2);
  EXPECT_TRUE(select_attention_config(presets::h200, DType::bf16, 256, 100000, 4).use_native_v2);
}

}  // namespace
}  // namespace muh
