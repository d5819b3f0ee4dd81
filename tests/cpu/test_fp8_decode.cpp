// test_fp8_decode.cpp — the decode over an fp8 KV cache (muh/kv_quant.hpp) on the CPU: which
// calls are taken (fp16 / bf16 q, positive finite scales, the vLLM layout at page_size >= 16) and
// refused with a Status naming the argument before any CUDA call, which agent's rows run it (both
// decode agents': the sm80 agent's and the portable one's), that the plan records the cache's type
// and is its own (more partitions where the fp8 CTAs are slower), and the C ABI's range checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "muh/attention.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/muh.h"
#include "muh/plan.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

alignas(16) unsigned char g_fake[256];  // never dereferenced: every call below fails its checks first

DecodeParams fp8_params(KVDType kv = KVDType::fp8_e4m3) {
  DecodeParams p;
  p.dtype = DType::bf16;
  p.layout = KVLayout::vllm;
  p.head_dim = 128;
  p.num_seqs = 2;
  p.num_q_heads = 32;
  p.num_kv_heads = 8;
  p.page_size = 16;
  p.num_pages = 64;
  p.max_blocks_per_seq = 32;
  p.max_seq_len = 500;
  p.kv = KVQuant{kv, 0.5f, 2.f};
  return p;
}

// The seed's shape (fp16 q, one sequence, 4 query heads on 1 KV head) over an e4m3 cache of
// `len` tokens in pages of 16.
DecodeParams seed_params(int head_dim, int len) {
  DecodeParams p = fp8_params();
  p.dtype = DType::fp16;
  p.head_dim = head_dim;
  p.num_seqs = 1;
  p.num_q_heads = 4;
  p.num_kv_heads = 1;
  p.max_seq_len = len;
  p.max_blocks_per_seq = (len + 15) / 16;
  p.num_pages = p.max_blocks_per_seq;
  return p;
}

// Device pointers that a call's checks refuse before dereferencing them (g_fake).
void point_at_fake(DecodeParams& p) {
  p.q = p.k_cache = p.v_cache = g_fake;
  p.out = g_fake;
  p.block_table = reinterpret_cast<const int*>(g_fake);
  p.seq_lens = reinterpret_cast<const int*>(g_fake);
}

Status plan_on(const DecodeParams& p, const HardwareCapability& hw, int target, DecodePlan* plan) {
  return plan_decode(p, hw, PlanOptions{target}, plan);
}

TEST(Fp8DecodeCheck, BadScalesAreInvalidArgumentsNamingTheScale) {
  const float bad[] = {0.f, -1.f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()};
  for (float x : bad) {
    for (bool k : {true, false}) {
      DecodeParams p = fp8_params();
      (k ? p.kv.k_scale : p.kv.v_scale) = x;
      DecodePlan plan;
      const Status s = plan_on(p, presets::h200, -1, &plan);
      EXPECT_EQ(s.code(), StatusCode::invalid_argument) << x;
      EXPECT_NE(s.message().find(k ? "k_scale" : "v_scale"), std::string::npos) << s.message();
    }
  }
  // The scales of a cache of q's dtype are not read.
  DecodeParams p = fp8_params(KVDType::same);
  p.kv.k_scale = 0.f;
  DecodePlan plan;
  EXPECT_TRUE(plan_on(p, presets::h200, -1, &plan).ok());
}

TEST(Fp8DecodeCheck, Fp32QueriesAnUnknownTypeAndSmallVllmPagesAreRefused) {
  DecodePlan plan;
  DecodeParams p = fp8_params();
  p.dtype = DType::fp32;
  Status s = plan_on(p, presets::h200, -1, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("fp32"), std::string::npos) << s.message();

  p = fp8_params();
  p.kv.dtype = static_cast<KVDType>(7);
  s = plan_on(p, presets::h200, -1, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("kv dtype 7"), std::string::npos) << s.message();

  p = fp8_params();
  p.page_size = 8;
  p.max_blocks_per_seq = 64;
  s = plan_on(p, presets::h200, -1, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("page_size >= 16"), std::string::npos) << s.message();
  p.layout = KVLayout::nhd;  // NHD pages of any size
  EXPECT_TRUE(plan_on(p, presets::h200, -1, &plan).ok());
}

// Both decode agents read an fp8 cache: the device's row (the sm80 agent's on an H200 and an A100),
// a forced portable row, and the T4's and the BI-V100 profile's rows (the portable agent's) plan it,
// each with the 16-bit cache's row for the same target.
TEST(Fp8DecodePlan, RunsOnEveryDecodeAgentsRows) {
  for (KVDType kv : {KVDType::fp8_e4m3, KVDType::fp8_e5m2}) {
    DecodeParams p = fp8_params(kv);
    p.dtype = DType::fp16;  // (every profile below has a decode row for fp16)
    DecodePlan plan, same;
    struct Case {
      const HardwareCapability* hw;
      int target;
    };
    for (const Case c : {Case{&presets::h200, -1}, Case{&presets::a100, -1}, Case{&presets::h200, 0},
                         Case{&presets::t4, -1}, Case{&presets::bi_v100, -1}}) {
      if (c.target == 0 && !is_compiled_target(0)) continue;
      const Status s = plan_on(p, *c.hw, c.target, &plan);
      ASSERT_TRUE(s.ok()) << c.hw->name << " target " << c.target << ": " << s.message();
      EXPECT_EQ(plan.kv_dtype, kv);
      DecodeParams p16 = p;
      p16.kv = KVQuant{};
      ASSERT_TRUE(plan_on(p16, *c.hw, c.target, &same).ok());
      EXPECT_EQ(plan.target, same.target) << c.hw->name;
      EXPECT_EQ(plan.policy.agent, same.policy.agent) << c.hw->name;
      if (c.target == 0) EXPECT_EQ(plan.policy.agent, Agent::portable);
    }
    // The sm80 agent's rows where the build has them; the T4 and the BI-V100 the portable agent's.
    ASSERT_TRUE(plan_on(p, presets::t4, -1, &plan).ok());
    EXPECT_EQ(plan.policy.agent, Agent::portable);
    ASSERT_TRUE(plan_on(p, presets::bi_v100, -1, &plan).ok());
    EXPECT_EQ(plan.policy.agent, Agent::portable);
    if (is_compiled_target(90)) {
      ASSERT_TRUE(plan_on(p, presets::h200, -1, &plan).ok());
      EXPECT_EQ(plan.policy.agent, Agent::sm80);
    }
  }
}

// The plan of an fp8 cache is its own (plan.cpp): its bytes are the codes', and an sm80-agent
// CTA is slower per token than the 16-bit cache's (widening the codes), so where the SMs allow
// it takes more partitions — the seed's cell on 132 SMs: the 16-bit plan's 90 partitions left
// the fp8 kernel 1.34x off its best (128), bench/results/h100-2026-12-06-portable-fp8. Its
// workspace is then larger (muh_decode_workspace_size_quant names the type).
TEST(Fp8DecodePlan, TakesMorePartitionsWhereItsSlowerCtasFillTheSms) {
  DecodeParams p = seed_params(256, 262144);
  p.kv.k_scale = p.kv.v_scale = 1.f;
  for (KVLayout layout : {KVLayout::vllm, KVLayout::nhd}) {
    p.layout = layout;
    DecodePlan fp8, same;
    ASSERT_TRUE(plan_on(p, presets::h200, -1, &fp8).ok());
    DecodeParams p16 = p;
    p16.kv = KVQuant{};
    ASSERT_TRUE(plan_on(p16, presets::h200, -1, &same).ok());
    ASSERT_EQ(fp8.policy.agent, Agent::sm80);
    EXPECT_EQ(fp8.kv_dtype, KVDType::fp8_e4m3);
    EXPECT_EQ(same.kv_dtype, KVDType::same);
    EXPECT_GE(fp8.num_splits, same.num_splits * 5 / 4) << int(layout);
    EXPECT_LE(fp8.ctas, presets::h200.sm_count * fp8.ctas_per_sm) << int(layout);  // one wave
    EXPECT_EQ(fp8.workspace_bytes, std::size_t(1) * fp8.num_splits * 4 * (256 + 1) * sizeof(float));
    EXPECT_GT(fp8.workspace_bytes, same.workspace_bytes);
  }
  // A sequence of one partition (128 tokens on these rows) is V1; a batch that fills the SMs
  // alone stays V1.
  p.layout = KVLayout::vllm;
  for (int len : {1, 16, 128}) {
    p.max_seq_len = len;
    DecodePlan fp8;
    ASSERT_TRUE(plan_on(p, presets::h200, -1, &fp8).ok());
    EXPECT_EQ(fp8.num_splits, 1) << len;
    EXPECT_EQ(fp8.workspace_bytes, 0u) << len;
  }
  p.max_seq_len = 8192;
  p.num_seqs = 512;
  DecodePlan fp8;
  ASSERT_TRUE(plan_on(p, presets::h200, -1, &fp8).ok());
  EXPECT_EQ(fp8.num_splits, 1);
}

// The sm80 agent's kernels that read the codes themselves (decode_sm80_fp8_fragments) have no
// 16-bit tiles: their footprint (decode_sm80_codes_smem_bytes, the launch's) lets two CTAs share
// a SM at hd 256 where the row holds one, and the plan counts the slots that gives — on a 16-SM
// partition (the seed's BI-V100 count) twice the 16-bit cache's partitions. Heads on M (a group
// of 12) and NHD pages at hd 96 widen the codes in shared memory: the row's footprint, its slots.
TEST(Fp8DecodePlan, CodesKernelsPlanTwoCtasASmAtHd256) {
  for (DType t : {DType::fp16, DType::bf16}) {
    const DecodePolicy pol = decode_policy(90, t, 256);
    ASSERT_EQ(pol.agent, Agent::sm80);
    EXPECT_EQ(pol.ctas_per_sm, 1);
    const int codes = decode_sm80_codes_smem_bytes(pol, 256);
    EXPECT_LT(codes, decode_smem_bytes(pol, t, 256) / 2 + 8 * 1024);
    EXPECT_LE(2 * (codes + 1024), pol.smem_cap_bytes);
    EXPECT_EQ(decode_sm80_codes_ctas_per_sm(pol, 256), 2);
    // the footprint holds Q (16 rows of 264 16-bit elements), 1 KB of alignment and 4 · 3 stages of
    // 16 · 256 K and V codes, and the combine's fp32 scratch
    EXPECT_GE(codes, 16 * 264 * 2 + 1023 + pol.num_warps * pol.num_stages * 32 * 256);
    EXPECT_GE(codes, 16 * 264 * 2 + (pol.num_warps * 16 * 256 + 2 * pol.num_warps * 16 + 16) * 4);
  }
  HardwareCapability sm16 = presets::h200;
  sm16.sm_count = 16;
  DecodeParams p = seed_params(256, 262144);
  for (KVLayout layout : {KVLayout::vllm, KVLayout::nhd}) {
    p.layout = layout;
    DecodePlan fp8, same;
    ASSERT_TRUE(plan_on(p, sm16, -1, &fp8).ok());
    DecodeParams p16 = p;
    p16.kv = KVQuant{};
    ASSERT_TRUE(plan_on(p16, sm16, -1, &same).ok());
    EXPECT_EQ(fp8.ctas_per_sm, 2) << int(layout);
    EXPECT_EQ(same.ctas_per_sm, 1) << int(layout);
    EXPECT_EQ(same.ctas, 16) << int(layout);
    EXPECT_EQ(fp8.ctas, 32) << int(layout);
  }
  DecodeParams m = p;  // heads on M: the widening pass, the row's footprint
  m.num_q_heads = 12;
  DecodePlan rows;
  ASSERT_TRUE(plan_on(m, sm16, -1, &rows).ok());
  EXPECT_EQ(rows.ctas_per_sm, 1);
  EXPECT_FALSE(decode_sm80_fp8_fragments(KVLayout::nhd, true, 96));
  EXPECT_TRUE(decode_sm80_fp8_fragments(KVLayout::vllm, true, 96));
  EXPECT_FALSE(decode_sm80_fp8_fragments(KVLayout::vllm, false, 256));
}

// A workspace sized for another plan (e.g. the 16-bit cache's) is refused before any CUDA call,
// and the message says how to size it for the cache type.
TEST(Fp8DecodePlan, ATooSmallWorkspaceNamesTheQueryOfTheCacheType) {
  DecodeParams p = seed_params(128, 65536);
  point_at_fake(p);
  DecodePlan plan;
  ASSERT_TRUE(plan_on(p, presets::h200, -1, &plan).ok());
  ASSERT_GT(plan.workspace_bytes, 16u);
  const Status s = paged_decode(p, plan, g_fake, 16);
  if (!is_fp8_instance(p.kv.dtype, p.dtype, p.head_dim)) {
    EXPECT_EQ(s.code(), StatusCode::not_compiled) << s.message();
    return;
  }
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
  EXPECT_NE(s.message().find("workspace too small"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("muh_decode_workspace_size_quant"), std::string::npos) << s.message();
}

// The C ABI's workspace query of a cache type: a bad kv_dtype is an invalid argument naming it,
// before any CUDA call (the sizes themselves need a device: tests/gpu/test_decode_fp8.cu).
TEST(Fp8DecodeCAbi, WorkspaceQueryChecksTheCacheType) {
  size_t bytes = 7;
  EXPECT_EQ(muh_decode_workspace_size_quant(MUH_FP16, MUH_KV_VLLM, 1, 4, 1, 256, 16, 4096, -1, 0, 0, nullptr, &bytes,
                                            3),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("kv_dtype 3"), std::string::npos) << muh_last_error();
  EXPECT_EQ(muh_decode_workspace_size_quant(MUH_FP16, MUH_KV_VLLM, 1, 4, 1, 256, 16, 4096, -1, 0, 0, nullptr,
                                            nullptr, MUH_KV_FP8_E4M3),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("workspace_bytes"), std::string::npos) << muh_last_error();
}

// A run refuses a plan made for another cache type (before any CUDA call).
TEST(Fp8DecodePlan, ARunRefusesAPlanOfAnotherCacheType) {
  DecodeParams p = fp8_params(KVDType::same);
  DecodePlan plan;
  ASSERT_TRUE(plan_on(p, presets::h200, -1, &plan).ok());
  p.kv.dtype = KVDType::fp8_e5m2;
  point_at_fake(p);
  const Status s = paged_decode(p, plan, nullptr, 0);
  if (!is_fp8_instance(KVDType::fp8_e5m2, p.dtype, p.head_dim)) {
    EXPECT_EQ(s.code(), StatusCode::not_compiled) << s.message();
    return;
  }
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
  EXPECT_NE(s.message().find("re-plan"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("fp8_e5m2"), std::string::npos) << s.message();
}

TEST(Fp8DecodeCAbi, BadKvTypeAndScaleAreInvalidArguments) {
  auto call = [](int dtype, const muh_kv_quant* kv) {
    return muh_paged_decode_quant(dtype, MUH_KV_VLLM, g_fake, g_fake, g_fake, g_fake + 64, nullptr,
                                  reinterpret_cast<const int*>(g_fake + 128),
                                  reinterpret_cast<const int*>(g_fake + 192), 2, 8, 2, 128, 16, 4, 2, 32, 0.f,
                                  nullptr, 0, -1, 0, 0, nullptr, nullptr, kv);
  };
  muh_kv_quant kv = MUH_KV_QUANT_AUTO;
  kv.kv_dtype = 3;
  EXPECT_EQ(call(MUH_BF16, &kv), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("kv.kv_dtype 3"), std::string::npos) << muh_last_error();
  kv.kv_dtype = -1;
  EXPECT_EQ(call(MUH_BF16, &kv), MUH_INVALID_ARGUMENT);
  kv = MUH_KV_QUANT_AUTO;
  kv.kv_dtype = MUH_KV_FP8_E4M3;
  kv.v_scale = 0.f;
  EXPECT_EQ(call(MUH_BF16, &kv), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("v_scale"), std::string::npos) << muh_last_error();
  kv.v_scale = 1.f;
  EXPECT_EQ(call(MUH_FP32, &kv), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("fp32"), std::string::npos) << muh_last_error();
}

TEST(Fp8Names, KvDtypeStringsAreVllms) {
  EXPECT_EQ(parse_kv_dtype("fp8"), KVDType::fp8_e4m3);
  EXPECT_EQ(parse_kv_dtype("fp8_e5m2"), KVDType::fp8_e5m2);
  EXPECT_EQ(parse_kv_dtype("auto"), KVDType::same);
  EXPECT_FALSE(parse_kv_dtype("fp8_e4m3fnuz").has_value());
  EXPECT_EQ(kv_dtype_name(KVDType::fp8_e4m3), "fp8_e4m3");
}

}  // namespace
}  // namespace muh
