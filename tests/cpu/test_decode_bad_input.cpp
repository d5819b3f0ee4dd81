// test_decode_bad_input.cpp — plan_decode(), paged_decode() and the C ABI refuse bad input with a
// Status that names the problem, before any CUDA call. These run in CI on a machine without a
// GPU: had validation let a case through, the code there would be no_device (or, with a GPU, a
// launch) instead of the one expected. Block ids out of range need the device tables (debug
// checks) and are tested in tests/gpu/test_decode.cu.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/instances.hpp"
#include "muh/muh.h"
#include "muh/plan.hpp"

namespace muh {
namespace {

// Aligned host storage standing in for device pointers: validation never dereferences them.
alignas(256) unsigned char g_fake[4096];


// A well-formed request for a compiled (dtype, head_dim): 4 sequences of up to 1000 tokens,
// GQA 4, page 16, NHD.
DecodeParams good() {
  DecodeParams p;
  p.dtype = kCompiledInstances[0].dtype;
  p.head_dim = kCompiledInstances[0].head_dim;
  p.layout = KVLayout::nhd;
  p.q = g_fake;
  p.k_cache = g_fake + 256;
  p.v_cache = g_fake + 512;
  p.out = g_fake + 768;
  p.lse = reinterpret_cast<float*>(g_fake + 1024);
  p.block_table = reinterpret_cast<const int*>(g_fake + 1280);
  p.seq_lens = reinterpret_cast<const int*>(g_fake + 1536);
  p.num_seqs = 4;
  p.num_q_heads = 32;
  p.num_kv_heads = 8;
  p.page_size = 16;
  p.num_pages = 300;
  p.max_blocks_per_seq = 63;  // 1008 tokens
  p.max_seq_len = 1000;
  return p;
}

// A V2 plan (4 partitions) for good(), on the H200 profile with the device's own target.
DecodePlan good_plan(bool cuda_graph = false) {
  DecodePlan plan;
  const Status s = plan_decode(good(), presets::h200, PlanOptions{-1, 4, cuda_graph}, &plan);
  EXPECT_TRUE(s.ok()) << s.message();
  return plan;
}

struct BadCase {
  const char* name;
  std::function<void(DecodeParams&, DecodePlan&, void*&, std::size_t&, RunOptions&)> mutate;
  StatusCode code;
  const char* says;  // a word the message must contain
};

void* ws_ok() { return g_fake + 2048; }

const BadCase kBad[] = {
    {"head_dim_80", [](auto& p, auto&, auto&, auto&, auto&) { p.head_dim = 80; }, StatusCode::invalid_argument, "head_dim"},
    {"head_dim_0", [](auto& p, auto&, auto&, auto&, auto&) { p.head_dim = 0; }, StatusCode::invalid_argument, "head_dim"},
    {"head_dim_1024", [](auto& p, auto&, auto&, auto&, auto&) { p.head_dim = 1024; }, StatusCode::invalid_argument, "head_dim"},
    {"dtype_7", [](auto& p, auto&, auto&, auto&, auto&) { p.dtype = static_cast<DType>(7); }, StatusCode::invalid_argument, "dtype"},
    {"layout_5", [](auto& p, auto&, auto&, auto&, auto&) { p.layout = static_cast<KVLayout>(5); }, StatusCode::invalid_argument, "layout"},
    {"q_heads_not_multiple", [](auto& p, auto&, auto&, auto&, auto&) { p.num_q_heads = 30; }, StatusCode::invalid_argument, "multiple"},
    {"kv_heads_0", [](auto& p, auto&, auto&, auto&, auto&) { p.num_kv_heads = 0; }, StatusCode::invalid_argument, ">= 1"},
    {"q_heads_negative", [](auto& p, auto&, auto&, auto&, auto&) { p.num_q_heads = -8; }, StatusCode::invalid_argument, ">= 1"},
    {"num_seqs_negative", [](auto& p, auto&, auto&, auto&, auto&) { p.num_seqs = -1; }, StatusCode::invalid_argument, "num_seqs"},
    {"num_seqs_too_many", [](auto& p, auto&, auto&, auto&, auto&) { p.num_seqs = 70000; }, StatusCode::invalid_argument, "num_seqs"},
    {"page_size_12", [](auto& p, auto&, auto&, auto&, auto&) { p.page_size = 12; }, StatusCode::invalid_argument, "page_size"},
    {"page_size_0", [](auto& p, auto&, auto&, auto&, auto&) { p.page_size = 0; }, StatusCode::invalid_argument, "page_size"},
    {"page_size_512", [](auto& p, auto&, auto&, auto&, auto&) { p.page_size = 512; }, StatusCode::invalid_argument, "page_size"},
    {"vllm_page_size_4",
     [](auto& p, auto&, auto&, auto&, auto&) {
       p.layout = KVLayout::vllm;
       p.page_size = 4;
       p.max_blocks_per_seq = 250;
     },
     StatusCode::invalid_argument, "page_size"},
    {"seq_len_beyond_block_table", [](auto& p, auto&, auto&, auto&, auto&) { p.max_blocks_per_seq = 62; },
     StatusCode::invalid_argument, "block table"},
    {"max_seq_len_negative", [](auto& p, auto&, auto&, auto&, auto&) { p.max_seq_len = -5; }, StatusCode::invalid_argument, "max_seq_len"},
    {"max_blocks_0", [](auto& p, auto&, auto&, auto&, auto&) { p.max_blocks_per_seq = 0; }, StatusCode::invalid_argument, "max_blocks_per_seq"},
    {"num_pages_0", [](auto& p, auto&, auto&, auto&, auto&) { p.num_pages = 0; }, StatusCode::invalid_argument, "num_pages"},
    {"scale_nan", [](auto& p, auto&, auto&, auto&, auto&) { p.softmax_scale = std::nanf(""); }, StatusCode::invalid_argument, "softmax_scale"},
    {"scale_inf", [](auto& p, auto&, auto&, auto&, auto&) { p.softmax_scale = INFINITY; }, StatusCode::invalid_argument, "softmax_scale"},
    {"scale_negative", [](auto& p, auto&, auto&, auto&, auto&) { p.softmax_scale = -1.f; }, StatusCode::invalid_argument, "softmax_scale"},
    {"q_null", [](auto& p, auto&, auto&, auto&, auto&) { p.q = nullptr; }, StatusCode::invalid_argument, "null"},
    {"k_cache_null", [](auto& p, auto&, auto&, auto&, auto&) { p.k_cache = nullptr; }, StatusCode::invalid_argument, "null"},
    {"v_cache_null", [](auto& p, auto&, auto&, auto&, auto&) { p.v_cache = nullptr; }, StatusCode::invalid_argument, "null"},
    {"out_null", [](auto& p, auto&, auto&, auto&, auto&) { p.out = nullptr; }, StatusCode::invalid_argument, "null"},
    {"block_table_null", [](auto& p, auto&, auto&, auto&, auto&) { p.block_table = nullptr; }, StatusCode::invalid_argument, "null"},
    {"seq_lens_null", [](auto& p, auto&, auto&, auto&, auto&) { p.seq_lens = nullptr; }, StatusCode::invalid_argument, "null"},
    {"q_misaligned", [](auto& p, auto&, auto&, auto&, auto&) { p.q = g_fake + 8; }, StatusCode::invalid_argument, "aligned"},
    {"k_cache_misaligned", [](auto& p, auto&, auto&, auto&, auto&) { p.k_cache = g_fake + 258; }, StatusCode::invalid_argument, "aligned"},
    {"out_misaligned", [](auto& p, auto&, auto&, auto&, auto&) { p.out = g_fake + 772; }, StatusCode::invalid_argument, "aligned"},
    {"lse_misaligned",
     [](auto& p, auto&, auto&, auto&, auto&) { p.lse = reinterpret_cast<float*>(g_fake + 1026); },
     StatusCode::invalid_argument, "aligned"},
    {"block_table_misaligned",
     [](auto& p, auto&, auto&, auto&, auto&) { p.block_table = reinterpret_cast<const int*>(g_fake + 1281); },
     StatusCode::invalid_argument, "aligned"},
    {"workspace_null", [](auto&, auto&, auto& ws, auto&, auto&) { ws = nullptr; }, StatusCode::invalid_argument, "workspace"},
    {"workspace_too_small", [](auto&, auto& plan, auto&, auto& n, auto&) { n = plan.workspace_bytes - 4; },
     StatusCode::invalid_argument, "too small"},
    {"workspace_misaligned", [](auto&, auto&, auto& ws, auto&, auto&) { ws = g_fake + 2056; },
     StatusCode::invalid_argument, "aligned"},
    {"plan_empty", [](auto&, auto& plan, auto&, auto&, auto&) { plan = DecodePlan{}; }, StatusCode::invalid_argument, "plan"},
    {"plan_for_other_batch", [](auto& p, auto&, auto&, auto&, auto&) { p.num_seqs = 3; }, StatusCode::invalid_argument, "plan"},
    {"plan_for_other_heads",
     [](auto& p, auto&, auto&, auto&, auto&) {
       p.num_q_heads = 16;
       p.num_kv_heads = 4;
     },
     StatusCode::invalid_argument, "plan"},
    {"graph_plan_capacity_exceeded",
     [](auto& p, auto& plan, auto&, auto&, auto&) {
       plan = good_plan(/*cuda_graph=*/true);
       p.num_seqs = 5;
     },
     StatusCode::invalid_argument, "capacity"},
    {"plan_policy_not_the_targets_row", [](auto&, auto& plan, auto&, auto&, auto&) { plan.policy.num_stages += 1; },
     StatusCode::invalid_argument, "decode policy"},
    {"plan_wide_flag_on_the_targets_row", [](auto&, auto& plan, auto&, auto&, auto&) { plan.wide = true; },
     StatusCode::invalid_argument, "wide decode policy"},
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class DecodeBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(DecodeBadInput, RefusedWithAClearStatus) {
  const BadCase& c = GetParam();
  DecodeParams p = good();
  DecodePlan plan = good_plan();
  ASSERT_TRUE(plan.use_v2) << "the baseline plan must need a workspace";
  void* ws = ws_ok();
  std::size_t ws_bytes = plan.workspace_bytes;
  RunOptions opt;
  c.mutate(p, plan, ws, ws_bytes, opt);
  const Status s = paged_decode(p, plan, ws, ws_bytes, opt);
  EXPECT_EQ(s.code(), c.code) << c.name << ": " << status_code_name(s.code()) << ": " << s.message();
  EXPECT_NE(s.message().find(c.says), std::string::npos) << c.name << ": '" << s.message() << "' lacks '" << c.says << "'";
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
}

INSTANTIATE_TEST_SUITE_P(Decode, DecodeBadInput, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return std::string(info.param.name); });

// The plan refuses the same shapes (it runs the same checks) and its own options.
TEST(DecodePlanBadInput, ShapeErrorsAreThePlansToo) {
  DecodeParams p = good();
  p.num_q_heads = 30;
  DecodePlan plan;
  const Status s = plan_decode(p, presets::h200, {}, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("multiple"), std::string::npos) << s.message();
}

TEST(DecodePlanBadInput, NullPlan) {
  EXPECT_EQ(plan_decode(good(), presets::h200, {}, nullptr).code(), StatusCode::invalid_argument);
}

TEST(DecodePlanBadInput, NegativeForceSplits) {
  DecodePlan plan;
  EXPECT_EQ(plan_decode(good(), presets::h200, PlanOptions{-1, -2, false}, &plan).code(), StatusCode::invalid_argument);
}

TEST(DecodePlanBadInput, TargetNotCompiled) {
  DecodePlan plan;
  const Status s = plan_decode(good(), presets::h200, PlanOptions{95, 0, false}, &plan);
  EXPECT_EQ(s.code(), StatusCode::not_compiled) << s.message();
  EXPECT_NE(s.message().find("not compiled"), std::string::npos) << s.message();
}

TEST(DecodePlanBadInput, TargetNewerThanTheProfile) {
  DecodePlan plan;
  const Status s = plan_decode(good(), presets::t4, PlanOptions{90, 0, false}, &plan);
  // 90 may be missing from a lean build; either way it is refused with a line that says why.
  EXPECT_TRUE(s.code() == StatusCode::unsupported || s.code() == StatusCode::not_compiled) << s.message();
  EXPECT_FALSE(s.message().empty());
}

TEST(DecodePlanBadInput, OwnArchRunsOnlyThePortableTarget) {
  DecodePlan plan;
  const Status s = plan_decode(good(), presets::bi_v100, PlanOptions{80, 0, false}, &plan);
  EXPECT_TRUE(s.code() == StatusCode::unsupported || s.code() == StatusCode::not_compiled) << s.message();
}

// ---- The C ABI ---------------------------------------------------------------------------------

TEST(DecodeCApiBadInput, DtypeOutOfRangeDoesNotWrap) {
  const DecodeParams p = good();
  // 256 would wrap onto fp16 in the 8-bit enum; the C ABI checks the int first.
  EXPECT_EQ(muh_paged_decode(256, 0, p.q, p.k_cache, p.v_cache, p.out, p.lse, p.block_table, p.seq_lens, p.num_seqs,
                             p.num_q_heads, p.num_kv_heads, p.head_dim, p.page_size, p.num_pages, p.max_blocks_per_seq,
                             p.max_seq_len, 0.f, nullptr, 0, -1, 0, 0, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("dtype"), std::string::npos) << muh_last_error();
}

TEST(DecodeCApiBadInput, LayoutOutOfRange) {
  const DecodeParams p = good();
  EXPECT_EQ(muh_paged_decode(int(p.dtype), 2, p.q, p.k_cache, p.v_cache, p.out, p.lse, p.block_table, p.seq_lens,
                             p.num_seqs, p.num_q_heads, p.num_kv_heads, p.head_dim, p.page_size, p.num_pages,
                             p.max_blocks_per_seq, p.max_seq_len, 0.f, nullptr, 0, -1, 0, 0, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("layout"), std::string::npos) << muh_last_error();
}

TEST(DecodeCApiBadInput, ShapeErrorBeforeAnyDeviceQuery) {
  const DecodeParams p = good();
  EXPECT_EQ(muh_paged_decode(int(p.dtype), 0, p.q, p.k_cache, p.v_cache, p.out, p.lse, p.block_table, p.seq_lens,
                             p.num_seqs, p.num_q_heads, 7, p.head_dim, p.page_size, p.num_pages, p.max_blocks_per_seq,
                             p.max_seq_len, 0.f, nullptr, 0, -1, 0, 0, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("multiple"), std::string::npos) << muh_last_error();
  EXPECT_EQ(muh_paged_decode(int(p.dtype), 0, nullptr, p.k_cache, p.v_cache, p.out, p.lse, p.block_table,
                             p.seq_lens, p.num_seqs, p.num_q_heads, p.num_kv_heads, p.head_dim, p.page_size,
                             p.num_pages, p.max_blocks_per_seq, p.max_seq_len, 0.f, nullptr, 0, -1, 0, 0, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("null"), std::string::npos) << muh_last_error();
}

TEST(DecodeCApiBadInput, WorkspaceSizeNeedsAnOutput) {
  const DecodeParams p = good();
  EXPECT_EQ(muh_decode_workspace_size(int(p.dtype), 0, p.num_seqs, p.num_q_heads, p.num_kv_heads, p.head_dim,
                                      p.page_size, p.max_seq_len, -1, 0, 0, nullptr),
            MUH_INVALID_ARGUMENT);
  size_t n = 0;
  EXPECT_EQ(muh_decode_workspace_size(int(p.dtype), 0, p.num_seqs, p.num_q_heads, p.num_kv_heads, 72, p.page_size,
                                      p.max_seq_len, -1, 0, 0, &n),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("head_dim"), std::string::npos) << muh_last_error();
}

// Empty work is not an error: a batch of 0 plans to nothing and returns ok without a launch.
TEST(DecodeEmptyBatch, ZeroSequencesIsANoOp) {
  DecodeParams p = good();
  p.num_seqs = 0;
  DecodePlan plan;
  ASSERT_TRUE(plan_decode(p, presets::h200, {}, &plan).ok());
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.ctas, 0);
  const Status s = paged_decode(p, plan, nullptr, 0);
  EXPECT_TRUE(s.ok()) << s.message();
}

}  // namespace
}  // namespace muh
