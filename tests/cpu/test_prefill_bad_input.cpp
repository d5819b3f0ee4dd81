// test_prefill_bad_input.cpp — prefill() and muh_prefill() refuse bad input with a clear Status
// before any CUDA call (so these pass on a machine without a GPU: had validation reached the
// runtime there, the code would be no_device instead), and accept empty work without a launch.
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

struct BadCase {
  const char* name;
  void (*mutate)(PrefillParams&, RunOptions&);
  StatusCode code;
  const char* says;  // a piece of the message
};

const BadCase kBad[] = {
    {"dtype_out_of_range", [](PrefillParams& p, RunOptions&) { p.dtype = static_cast<DType>(7); }, StatusCode::invalid_argument, "dtype"},
    {"head_dim_0", [](PrefillParams& p, RunOptions&) { p.head_dim = 0; }, StatusCode::invalid_argument, "head_dim 0"},
    {"head_dim_7", [](PrefillParams& p, RunOptions&) { p.head_dim = 7; }, StatusCode::invalid_argument, "head_dim 7"},
    {"head_dim_1024", [](PrefillParams& p, RunOptions&) { p.head_dim = 1024; }, StatusCode::invalid_argument, "not supported"},
    {"q_heads_not_multiple_of_kv", [](PrefillParams& p, RunOptions&) { p.num_q_heads = 6; p.num_kv_heads = 4; }, StatusCode::invalid_argument, "multiple of num_kv_heads"},
    {"kv_heads_0", [](PrefillParams& p, RunOptions&) { p.num_kv_heads = 0; }, StatusCode::invalid_argument, ">= 1"},
    {"q_heads_negative", [](PrefillParams& p, RunOptions&) { p.num_q_heads = -8; }, StatusCode::invalid_argument, ">= 1"},
    {"batch_negative", [](PrefillParams& p, RunOptions&) { p.batch = -1; }, StatusCode::invalid_argument, ">= 0"},
    {"total_k_negative", [](PrefillParams& p, RunOptions&) { p.total_k = -3; }, StatusCode::invalid_argument, ">= 0"},
    {"max_seqlen_above_total", [](PrefillParams& p, RunOptions&) { p.max_seqlen_q = 9; }, StatusCode::invalid_argument, "exceed"},
    {"max_seqlen_q_zero", [](PrefillParams& p, RunOptions&) { p.max_seqlen_q = 0; }, StatusCode::invalid_argument, "max_seqlen_q is 0"},
    {"max_seqlen_k_zero", [](PrefillParams& p, RunOptions&) { p.max_seqlen_k = 0; }, StatusCode::invalid_argument, "max_seqlen_k is 0"},
    {"batch_zero_with_tokens", [](PrefillParams& p, RunOptions&) { p.batch = 0; }, StatusCode::invalid_argument, "batch is 0"},
    {"null_q", [](PrefillParams& p, RunOptions&) { p.q = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_out", [](PrefillParams& p, RunOptions&) { p.out = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_k", [](PrefillParams& p, RunOptions&) { p.k = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_v", [](PrefillParams& p, RunOptions&) { p.v = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_cu_seqlens_q", [](PrefillParams& p, RunOptions&) { p.cu_seqlens_q = nullptr; }, StatusCode::invalid_argument, "null"},
    {"null_cu_seqlens_k", [](PrefillParams& p, RunOptions&) { p.cu_seqlens_k = nullptr; }, StatusCode::invalid_argument, "null"},
    {"misaligned_q", [](PrefillParams& p, RunOptions&) { p.q = g_fake + 2; }, StatusCode::invalid_argument, "16-byte aligned"},
    {"misaligned_v", [](PrefillParams& p, RunOptions&) { p.v = g_fake + 136; }, StatusCode::invalid_argument, "16-byte aligned"},
    {"misaligned_out", [](PrefillParams& p, RunOptions&) { p.out = g_fake + 200; }, StatusCode::invalid_argument, "16-byte aligned"},
    {"misaligned_lse", [](PrefillParams& p, RunOptions&) { p.lse = reinterpret_cast<float*>(g_fake + 257); }, StatusCode::invalid_argument, "4-byte aligned"},
    {"misaligned_cu_seqlens", [](PrefillParams& p, RunOptions&) { p.cu_seqlens_k = reinterpret_cast<const int*>(g_fake + 385); }, StatusCode::invalid_argument, "4-byte aligned"},
    {"negative_scale", [](PrefillParams& p, RunOptions&) { p.softmax_scale = -1.f; }, StatusCode::invalid_argument, "softmax_scale"},
    {"nan_scale", [](PrefillParams& p, RunOptions&) { p.softmax_scale = NAN; }, StatusCode::invalid_argument, "softmax_scale"},
    {"force_target_negative", [](PrefillParams&, RunOptions& o) { o.force_target = -5; }, StatusCode::invalid_argument, "force_target"},
    {"force_target_not_compiled", [](PrefillParams&, RunOptions& o) { o.force_target = 91; }, StatusCode::not_compiled, "not compiled"},
    {"workspace_null_with_bytes", [](PrefillParams& p, RunOptions&) { p.workspace_bytes = 4096; }, StatusCode::invalid_argument, "workspace is null"},
    {"workspace_misaligned", [](PrefillParams& p, RunOptions&) { p.workspace = g_fake + 8; p.workspace_bytes = 64; }, StatusCode::invalid_argument, "workspace must be 16-byte aligned"},
    {"tail_chunk_negative", [](PrefillParams&, RunOptions& o) { o.prefill_tail_chunk = -2; }, StatusCode::invalid_argument, "prefill_tail_chunk"},
    {"grid_too_large", [](PrefillParams& p, RunOptions&) { p.total_q = p.max_seqlen_q = 1 << 30; p.num_q_heads = 64; p.num_kv_heads = 8; }, StatusCode::invalid_argument, "2^31"},
};

class PrefillBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(PrefillBadInput, RefusedBeforeAnyCudaCall) {
  const BadCase& c = GetParam();
  PrefillParams p = good();
  RunOptions o;
  c.mutate(p, o);
  const Status s = prefill(p, o);
  EXPECT_EQ(s.code(), c.code) << s.message();
  EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
}

INSTANTIATE_TEST_SUITE_P(Prefill, PrefillBadInput, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return std::string(info.param.name); });

// prefill_workspace_size() checks the shape like prefill() (pointers aside), before the device.
TEST(PrefillWorkspaceSize, ChecksTheShapeFirst) {
  PrefillParams p = good();
  p.q = nullptr;  // pointers do not matter to the size
  std::size_t bytes = 123;
  p.num_q_heads = 6;
  p.num_kv_heads = 4;
  Status s = prefill_workspace_size(p, {}, &bytes);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(prefill_workspace_size(good(), {}, nullptr).code(), StatusCode::invalid_argument);
  RunOptions o;
  o.prefill_tail_chunk = -3;
  EXPECT_EQ(prefill_workspace_size(good(), o, &bytes).code(), StatusCode::invalid_argument);
  // Empty work needs no workspace, and no device to say so.
  PrefillParams empty = good();
  empty.batch = empty.total_q = empty.total_k = empty.max_seqlen_q = empty.max_seqlen_k = 0;
  bytes = 123;
  EXPECT_TRUE(prefill_workspace_size(empty, {}, &bytes).ok());
  EXPECT_EQ(bytes, 0u);
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
