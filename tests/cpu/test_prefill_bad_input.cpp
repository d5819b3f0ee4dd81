// test_prefill_bad_input.cpp — plan_prefill(), prefill() and muh_prefill() refuse bad input with a
// clear Status before any CUDA call (so these pass on a machine without a GPU: had validation
// reached the runtime there, the code would be no_device instead), and accept empty work without
// a launch. Plans are made on the h200 preset (a plan is a host value).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/instances.hpp"
#include "muh/muh.h"
#include "muh/shapes.hpp"

namespace muh {
namespace {

// Aligned host storage standing in for device pointers: validation never dereferences them.
alignas(64) unsigned char g_fake[1024];


// A well-formed request for a compiled (dtype, head_dim): 2 sequences of 3 + 5 tokens.
PrefillParams good() {
  PrefillParams p;
  p.dtype = kCompiledInstances[0].dtype;
  p.head_dim = kCompiledInstances[0].head_dim;
  p.q = g_fake;
  p.k = g_fake + 64;
  p.v = g_fake + 128;
  p.out = g_fake + 192;
  p.lse = reinterpret_cast<float*>(g_fake + 256);
  p.cu_seqlens_q = reinterpret_cast<const int*>(g_fake + 320);
  p.cu_seqlens_k = reinterpret_cast<const int*>(g_fake + 384);
  p.batch = 2;
  p.total_q = 8;
  p.total_k = 8;
  p.max_seqlen_q = 5;
  p.max_seqlen_k = 5;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.causal = true;
  return p;
}

// What a case may change: the params, the plan options, and the workspace handed to prefill().
struct Call {
  PrefillParams p;
  PrefillPlanOptions o;
  void* ws = nullptr;
  std::size_t ws_bytes = 0;
};

struct BadCase {
  const char* name;
  void (*mutate)(Call&);
  StatusCode code;
  const char* says;  // a piece of the message
};

const BadCase kBad[] = {
    {"dtype_out_of_range", [](Call& c) { c.p.dtype = static_cast<DType>(7); }, StatusCode::invalid_argument, "dtype"},
    {"head_dim_0", [](Call& c) { c.p.head_dim = 0; }, StatusCode::invalid_argument, "head_dim 0"},
    {"head_dim_7", [](Call& c) { c.p.head_dim = 7; }, StatusCode::invalid_argument, "head_dim 7"},
    {"head_dim_1024", [](Call& c) { c.p.head_dim = 1024; }, StatusCode::invalid_argument, "not supported"},
    {"q_heads_not_multiple_of_kv", [](Call& c) { c.p.num_q_heads = 6; c.p.num_kv_heads = 4; }, StatusCode::invalid_argument, "multiple of num_kv_heads"},
    {"kv_heads_0", [](Call& c) { c.p.num_kv_heads = 0; }, StatusCode::invalid_argument, ">= 1"},
    {"q_heads_negative", [](Call& c) { c.p.num_q_heads = -8; }, StatusCode::invalid_argument, ">= 1"},
    {"batch_negative", [](Call& c) { c.p.batch = -1; }, StatusCode::invalid_argument, ">= 0"},
    {"total_k_negative", [](Call& c) { c.p.total_k = -3; }, StatusCode::invalid_argument, ">= 0"},
    {"max_seqlen_above_total", [](Call& c) { c.p.max_seqlen_q = 9; }, StatusCode::invalid_argument, "exceed"},
    {"max_seqlen_q_zero", [](Call& c) { c.p.max_seqlen_q = 0; }, StatusCode::invalid_argument, "max_seqlen_q is 0"},
    {"max_seqlen_k_zero", [](Call& c) { c.p.max_seqlen_k = 0; }, StatusCode::invalid_argument, "max_seqlen_k is 0"},
    {"batch_zero_with_tokens", [](Call& c) { c.p.batch = 0; }, StatusCode::invalid_argument, "batch is 0"},
    {"null_q", [](Call& c) { c.p.q = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_out", [](Call& c) { c.p.out = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_k", [](Call& c) { c.p.k = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_v", [](Call& c) { c.p.v = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_cu_seqlens_q", [](Call& c) { c.p.cu_seqlens_q = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_cu_seqlens_k", [](Call& c) { c.p.cu_seqlens_k = nullptr; }, StatusCode::invalid_argument, "null"},
    {"misaligned_q", [](Call& c) { c.p.q = g_fake + 2; }, StatusCode::invalid_argument, "16-byte aligned"},
    {"misaligned_v", [](Call& c) { c.p.v = g_fake + 136; }, StatusCode::invalid_argument, "16-byte aligned"},
    {"misaligned_out", [](Call& c) { c.p.out = g_fake + 200; }, StatusCode::invalid_argument, "16-byte aligned"},
    {"misaligned_lse", [](Call& c) { c.p.lse = reinterpret_cast<float*>(g_fake + 257); }, StatusCode::invalid_argument, "4-byte aligned"},
    {"misaligned_cu_seqlens", [](Call& c) { c.p.cu_seqlens_k = reinterpret_cast<const int*>(g_fake + 385); }, StatusCode::invalid_argument, "4-byte aligned"},
    {"negative_scale", [](Call& c) { c.p.softmax_scale = -1.f; }, StatusCode::invalid_argument, "softmax_scale"},
    {"nan_scale", [](Call& c) { c.p.softmax_scale = NAN; }, StatusCode::invalid_argument, "softmax_scale"},
    {"force_target_negative", [](Call& c) { c.o.force_target = -5; }, StatusCode::invalid_argument, "force_target"},
    {"force_target_not_compiled", [](Call& c) { c.o.force_target = 88; }, StatusCode::not_compiled, "target sm_88 is not compiled"},
    {"workspace_null_with_bytes", [](Call& c) { c.ws_bytes = 4096; }, StatusCode::invalid_argument, "workspace is null"},
    {"workspace_misaligned", [](Call& c) { c.ws = g_fake + 8; c.ws_bytes = 64; }, StatusCode::invalid_argument, "workspace must be 16-byte aligned"},
    {"tail_chunk_negative", [](Call& c) { c.o.tail_chunk = -2; }, StatusCode::invalid_argument, "tail_chunk"},
    {"grid_too_large", [](Call& c) { c.p.total_q = c.p.max_seqlen_q = 1 << 30; c.p.num_q_heads = 64; c.p.num_kv_heads = 8; }, StatusCode::invalid_argument, "2^31"},
};

class PrefillBadInput : public ::testing::TestWithParam<BadCase> {};

// Planned on the h200 preset, then run: the first of the two that fails says why.
TEST_P(PrefillBadInput, RefusedBeforeAnyCudaCall) {
  const BadCase& bc = GetParam();
  Call c{good()};
  bc.mutate(c);
  PrefillPlan plan;
  Status s = plan_prefill(c.p, presets::h200, c.o, &plan);
  if (s.ok()) s = prefill(c.p, plan, c.ws, c.ws_bytes);
  EXPECT_EQ(s.code(), bc.code) << s.message();
  EXPECT_NE(s.message().find(bc.says), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
}

INSTANTIATE_TEST_SUITE_P(Prefill, PrefillBadInput, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return std::string(info.param.name); });

// The shape errors come from prefill() itself too (it is an entry point: a plan can be reused with
// a changed params struct), and from the plan before any device is asked for.
TEST(PrefillBadInput, RunChecksTheShapeAndThePlan) {
  const PrefillParams g = good();
  PrefillPlan plan;
  ASSERT_TRUE(plan_prefill(g, presets::h200, {}, &plan).ok());
  PrefillParams p = g;
  p.num_q_heads = 6;
  p.num_kv_heads = 4;
  EXPECT_EQ(prefill(p, plan, nullptr, 0).code(), StatusCode::invalid_argument);
  p = g;
  p.total_q = 7;  // another shape than the plan's
  p.max_seqlen_q = 4;
  Status s = prefill(p, plan, nullptr, 0);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
  EXPECT_NE(s.message().find("re-plan"), std::string::npos) << s.message();
  s = prefill(g, PrefillPlan{}, nullptr, 0);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
  EXPECT_NE(s.message().find("plan is empty"), std::string::npos) << s.message();
  PrefillPlan forged = plan;
  forged.policy.block_n *= 2;  // not the target's row
  s = prefill(g, forged, nullptr, 0);
  EXPECT_NE(s.message().find("not target"), std::string::npos) << s.message();
  EXPECT_EQ(plan_prefill(g, presets::h200, {}, nullptr).code(), StatusCode::invalid_argument);
}

// A plan that splits needs its workspace: none, or too little, is refused before the device.
TEST(PrefillBadInput, SplitPlanNeedsItsWorkspace) {
  PrefillParams p = good();
  p.causal = false;
  p.batch = 4;
  p.total_q = p.total_k = 4 * 4096;
  p.max_seqlen_q = p.max_seqlen_k = 4096;
  p.num_q_heads = p.num_kv_heads = 32;
  // A 16-bit instance of this build (the split needs a tensor-core agent); CMake compiles fp16 or
  // bf16 in every build the CPU tests run in (CI: all three dtypes).
  p.dtype = DType::fp16;
  p.head_dim = 128;
  for (const auto& e : kCompiledInstances)
    if (e.dtype != DType::fp32) {
      p.dtype = e.dtype;
      p.head_dim = e.head_dim;
      break;
    }
  // On sm_90's row (the sm80-class agent): the sm90 agent of sm_90a runs whole tiles only.
  PrefillPlan plan;
  ASSERT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{90, 2}, &plan).ok());
  ASSERT_GT(plan.workspace_bytes, 0u);
  ASSERT_TRUE(is_compiled_instance(p.dtype, p.head_dim)) << "no 16-bit instance in this build";
  Status s = prefill(p, plan, nullptr, 0);
  EXPECT_NE(s.message().find("workspace is null"), std::string::npos) << s.message();
  s = prefill(p, plan, g_fake, 64);
  EXPECT_NE(s.message().find("workspace too small"), std::string::npos) << s.message();
  // The sm90 agent's persistent schedule (sm_90a compiled: 512 q tiles on 132 slots) needs its
  // tile counter the same way.
  PrefillPlan persistent;
  ASSERT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{}, &persistent).ok());
  EXPECT_EQ(persistent.persistent.on(), persistent.policy.agent == Agent::sm90);
  if (persistent.persistent.on()) {
    s = prefill(p, persistent, nullptr, 0);
    EXPECT_NE(s.message().find("tile counter); workspace is null"), std::string::npos) << s.message();
  }
}

// Empty work is not an error and launches nothing (so no device is needed).
TEST(PrefillEmpty, BatchZeroIsOkWithoutDevice) {
  PrefillParams p = good();
  p.batch = p.total_q = p.total_k = p.max_seqlen_q = p.max_seqlen_k = 0;
  p.q = p.k = p.v = nullptr;
  p.out = nullptr;
  p.cu_seqlens_q = p.cu_seqlens_k = nullptr;
  EXPECT_TRUE(prefill(p).ok());
}

TEST(PrefillEmpty, AllSequencesEmptyIsOkWithoutDevice) {
  PrefillParams p = good();
  p.total_q = p.total_k = p.max_seqlen_q = p.max_seqlen_k = 0;
  EXPECT_TRUE(prefill(p).ok());
}

// A supported head dim pruned from this build is not_compiled (checked for each one missing).
TEST(PrefillBadInput, PrunedInstanceIsNotCompiled) {
  for (DType t : {DType::fp16, DType::bf16, DType::fp32})
    for (int d : kSupportedHeadDims) {
      bool compiled = false;
      compiled = is_compiled_instance(t, d);
      PrefillParams p = good();
      p.dtype = t;
      p.head_dim = d;
      p.q = nullptr;  // would be invalid_argument if the instance check did not come first
      const Status s = prefill(p);
      if (compiled) EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
      else EXPECT_EQ(s.code(), StatusCode::not_compiled) << s.message();
    }
}

TEST(PrefillCApi, ReportsStatusAndMessage) {
  const PrefillParams g = good();
  auto call = [&](int dtype, int head_dim, int q_heads) {
    return muh_prefill(dtype, g.q, g.k, g.v, g.out, g.lse, g.cu_seqlens_q, g.cu_seqlens_k, g.batch, g.total_q,
                       g.total_k, g.max_seqlen_q, g.max_seqlen_k, q_heads, g.num_kv_heads, head_dim, 0.f, 1, nullptr, 0,
                       -1, nullptr);
  };
  EXPECT_EQ(call(9, g.head_dim, g.num_q_heads), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("dtype"), std::string::npos) << muh_last_error();
  EXPECT_EQ(call(static_cast<int>(g.dtype), 7, g.num_q_heads), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("head_dim 7"), std::string::npos) << muh_last_error();
  EXPECT_EQ(call(static_cast<int>(g.dtype), g.head_dim, 5), MUH_INVALID_ARGUMENT);  // 5 q heads over 2 kv heads
  EXPECT_NE(std::string(muh_last_error()).find("multiple"), std::string::npos) << muh_last_error();
  std::size_t bytes = 0;
  EXPECT_EQ(muh_prefill_workspace_size(9, g.batch, g.total_q, g.total_k, g.max_seqlen_q, g.max_seqlen_k, g.num_q_heads,
                                       g.num_kv_heads, g.head_dim, 0, -1, &bytes),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("muh_prefill_workspace_size: dtype"), std::string::npos);
  EXPECT_EQ(muh_prefill_workspace_size(static_cast<int>(g.dtype), g.batch, g.total_q, g.total_k, g.max_seqlen_q,
                                       g.max_seqlen_k, 5, g.num_kv_heads, g.head_dim, 0, -1, &bytes),
            MUH_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace muh
