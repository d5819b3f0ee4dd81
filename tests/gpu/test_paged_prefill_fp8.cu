// test_paged_prefill_fp8.cu — paged prefill over an fp8 KV cache (muh/kv_quant.hpp: e4m3 / e5m2
// codes, per-tensor k_scale 0.5 and v_scale 2), every compiled fp8 instance
// (MUH_FOR_EACH_FP8_INSTANCE) under every compiled target, both layouts, against the CPU
// reference on the dequantised cache (check/paged_prefill_check.hpp: the dense K/V are replaced by
// code · scale before the reference and the naive error are computed, so the tolerance — 2× a
// naive same-precision implementation — is the 16-bit one: widening a code to fp16 / bf16 is
// exact and the scales are applied in fp32). Outputs pre-filled with NaN, NaN's code in every
// unused cache slot, random page order, lse, two runs bitwise equal, debug_checks on.
//
// The sm80 and portable agents read an fp8 cache (prefill_agent_reads_kv): a forced target of
// another agent (sm75, sm90) has no row — the case checks that plan_prefill says so and that
// the unforced walk runs a row that reads it (the sm80 agent's on sm_80 and newer, else the
// portable one's). The vLLM layout needs pages of a multiple of 16 slots (the sm80 agent's value
// rows copy 16 codes): its page-8 case is refused. PagedPrefillFp8Variant: the attention
// variants over an fp8 cache (below).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "prefill_expect.hpp"
#include "muh/build_config.hpp"
#include "muh/instances.hpp"
#include "muh/tuning/policy_io.hpp"
#include "muh/tuning/selectors.hpp"
#include "paged_prefill_check.hpp"

namespace muh {
namespace {

using testing::device_cc;

constexpr float kKScale = 0.5f, kVScale = 2.f;  // powers of two: code · scale is exact in fp32

struct Param {
  int target;
  KVDType kv;
  DType dtype;
  int head_dim;
  KVLayout layout;
  std::size_t case_index;
};

check::PagedPrefillCase fp8_case(const Param& p) {
  check::PagedPrefillCase c = check::paged_prefill_cases()[p.case_index];
  c.kv = KVQuant{p.kv, kKScale, kVScale};
  return c;
}

std::string param_name(const Param& p) {
  return "t" + std::to_string(p.target) + "_" + std::string(kv_dtype_name(p.kv)) + "_" +
         std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         (p.layout == KVLayout::nhd ? "_nhd_" : "_vllm_") + check::paged_prefill_cases()[p.case_index].name;
}
void PrintTo(const Param& p, std::ostream* os) { *os << param_name(p); }

// The targets whose agent reads fp8 take every shape; the others one shape each (their answer is
// the refusal, the same for every shape).
std::vector<Param> all_params() {
  std::vector<Param> v;
  const std::size_t n = check::paged_prefill_cases().size();
  for (std::size_t ti = 0; ti < compiled_targets::size; ++ti)
    for (const auto& e : kCompiledFp8Instances) {
      if (e.head_dim == 0) continue;  // (the sentinel)
      const int target = compiled_targets::values[ti];
      const bool reads = prefill_agent_reads_kv(prefill_policy(target, e.dtype, e.head_dim).agent, e.kv);
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        for (std::size_t c = 0; c < (reads ? n : 1); ++c) v.push_back({target, e.kv, e.dtype, e.head_dim, l, c});
    }
  return v;
}

class PagedPrefillFp8 : public ::testing::TestWithParam<Param> {};

TEST_P(PagedPrefillFp8, MatchesReferenceOnTheDequantisedCache) {
  MUH_REQUIRE_GPU();
  const Param prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc()))
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  const check::PagedPrefillCase c = fp8_case(prm);
  const auto pi = check::make_paged_prefill_inputs(c, prm.layout, prm.dtype, prm.head_dim, 29 + unsigned(prm.case_index));
  const PrefillPolicy pol = prefill_policy(prm.target, prm.dtype, prm.head_dim);
  SCOPED_TRACE("policy: " + to_string(pol, prm.dtype, prm.head_dim));
  PrefillPlan plan;
  const check::PrefillResult r = check::run_paged_prefill_case(*pi, prm.target, &plan);
  if (prm.layout == KVLayout::vllm && c.page_size % 16 != 0) {
    EXPECT_EQ(r.status.code(), StatusCode::invalid_argument) << r.status.message();
    EXPECT_NE(r.status.message().find("multiple of 16"), std::string::npos) << r.status.message();
    return;
  }
  if (!prefill_agent_reads_kv(pol.agent, prm.kv)) {
    // Forced onto an agent that does not read fp8 codes: no row, a clear Status; the walk finds
    // a row that reads them (the sm80 agent's on sm_80 and newer, else the portable one's).
    // (The sm75 agent on vLLM pages: the layout is the first reason the walk gives.)
    EXPECT_FALSE(r.status.ok());
    const bool vllm_first = prm.layout == KVLayout::vllm && !prefill_agent_reads(pol.agent, KVSource::paged_vllm);
    EXPECT_NE(r.status.message().find(vllm_first ? "paged vLLM" : "fp8"), std::string::npos) << r.status.message();
    const check::PrefillResult walked = check::run_paged_prefill_case(*pi, -1, &plan);
    ASSERT_TRUE(walked.status.ok()) << walked.status.message();
    EXPECT_TRUE(prefill_agent_reads_kv(plan.policy.agent, prm.kv)) << agent_name(plan.policy.agent);
    EXPECT_EQ(plan.kv_dtype, prm.kv);
    testing::expect_matches_reference(walked, pi->in->naive_err, pi->in->max_ref,
                                      "fp8 cache; pre-filled with NaN; NaN codes in unused cache slots");
    return;
  }
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(plan.target, prm.target);
  EXPECT_EQ(plan.kv_dtype, prm.kv);
  EXPECT_FALSE(plan.persistent.on());
  EXPECT_EQ(plan.workspace_bytes > 0, plan.split.split());
  testing::expect_matches_reference(r, pi->in->naive_err, pi->in->max_ref,
                                    "fp8 cache; pre-filled with NaN; NaN codes in unused cache slots");
  RecordProperty("max_err", std::to_string(r.max_err));
  RecordProperty("tol", std::to_string(r.tol));
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PagedPrefillFp8);  // (a build without fp8 instances)
INSTANTIATE_TEST_SUITE_P(PagedPrefill, PagedPrefillFp8, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& info) { return param_name(info.param); });

// ---- Attention variants over an fp8 cache (the fp8 instances' general kind) ----------------------
// Every compiled fp8 instance that has the general kind (MUH_VARIANT_HEAD_DIMS), under each
// compiled target whose agent reads fp8 codes, both layouts: windows smaller than a tile and
// equal to a page, soft-cap 30 on sharp scores, sinks far below / near / far above the scores,
// ALiBi with GQA 4, all at once (page 32), and context_attention_fwd's prefix part (queries after
// the keys, not causal, a window and ALiBi) — against the reference on the dequantised cache.
// Per-head values for 8 q heads (2 KV heads).
const std::vector<float> kSinks = {-60.f, -8.f, -1.f, 0.f, 2.5f, 9.f, 30.f, 80.f};
const std::vector<float> kAlibi = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f, 0.00390625f};

check::VariantSpec window(int left, int right) {
  check::VariantSpec v;
  v.window_left = left;
  v.window_right = right;
  return v;
}

const std::vector<check::PagedPrefillCase>& variant_cases() {
  static const std::vector<check::PagedPrefillCase> cases = [] {
    check::VariantSpec cap;
    cap.softcap = 30.f;
    check::VariantSpec sinks;
    sinks.sinks = kSinks;
    check::VariantSpec alibi;
    alibi.alibi = kAlibi;
    check::VariantSpec all = window(40, 0);
    all.softcap = 30.f;
    all.sinks = kSinks;
    all.alibi = kAlibi;
    check::VariantSpec prefix_part = window(30, -1);
    prefix_part.alibi = kAlibi;
    prefix_part.queries_after_keys = true;
    std::vector<check::PagedPrefillCase> v = {
        {"win5_causal_p16", {0, 40, 100}, {1, 70, 30}, 8, 2, 16, true, 0.f, window(5, 0)},
        {"win16_page_p16", {200, 37}, {37, 64}, 8, 2, 16, true, 0.5f, window(16, 0)},
        {"softcap30_sharp_p16", {129, 4}, {64, 1}, 8, 2, 16, true, 2.f, cap},
        {"sinks_p16", {60, 0}, {9, 40}, 8, 2, 16, true, 1.f, sinks},
        {"alibi_gqa4_p16", {300, 33}, {33, 129}, 8, 2, 16, true, 0.f, alibi},
        {"all_p32", {200, 1, 0}, {60, 1, 64}, 8, 2, 32, true, 1.f, all},
        {"prefix_part_win_alibi_p16", {40, 70, 1}, {9, 130, 5}, 8, 2, 16, false, 0.5f, prefix_part},
    };
    return v;
  }();
  return cases;
}

std::string variant_param_name(const Param& p) {
  return "t" + std::to_string(p.target) + "_" + std::string(kv_dtype_name(p.kv)) + "_" +
         std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         (p.layout == KVLayout::nhd ? "_nhd_" : "_vllm_") + variant_cases()[p.case_index].name;
}

std::vector<Param> variant_params() {
  std::vector<Param> v;
  for (std::size_t ti = 0; ti < compiled_targets::size; ++ti)
    for (const auto& e : kCompiledFp8Instances) {
      const int target = compiled_targets::values[ti];
      if (e.head_dim == 0 || !is_general_instance(e.dtype, e.head_dim) ||
          !prefill_agent_reads_kv(prefill_policy(target, e.dtype, e.head_dim).agent, e.kv))
        continue;
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        for (std::size_t c = 0; c < variant_cases().size(); ++c) v.push_back({target, e.kv, e.dtype, e.head_dim, l, c});
    }
  return v;
}

class PagedPrefillFp8Variant : public ::testing::TestWithParam<Param> {};

TEST_P(PagedPrefillFp8Variant, MatchesReferenceOnTheDequantisedCache) {
  MUH_REQUIRE_GPU();
  const Param prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc()))
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  check::PagedPrefillCase c = variant_cases()[prm.case_index];
  c.kv = KVQuant{prm.kv, kKScale, kVScale};
  const auto pi = check::make_paged_prefill_inputs(c, prm.layout, prm.dtype, prm.head_dim, 53 + unsigned(prm.case_index));
  SCOPED_TRACE("policy: " + to_string(prefill_policy(prm.target, prm.dtype, prm.head_dim), prm.dtype, prm.head_dim));
  PrefillPlan plan;
  const check::PrefillResult r = check::run_paged_prefill_case(*pi, prm.target, &plan);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(plan.target, prm.target);
  EXPECT_EQ(plan.kv_dtype, prm.kv);
  EXPECT_EQ(plan.variant, VariantKind::general);
  EXPECT_FALSE(plan.split.split());
  testing::expect_matches_reference(r, pi->in->naive_err, pi->in->max_ref,
                                    "fp8 cache, a variant; pre-filled with NaN; NaN codes in unused cache slots");
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PagedPrefillFp8Variant);  // (no fp8 instance with the general kind)
INSTANTIATE_TEST_SUITE_P(PagedPrefill, PagedPrefillFp8Variant, ::testing::ValuesIn(variant_params()),
                         [](const ::testing::TestParamInfo<Param>& info) { return variant_param_name(info.param); });

// The same cache read as q's own 16-bit type with the codes' values gives the same output within
// the tolerance: the scales are where the kernel puts them (k_scale in the softmax scale, v_scale
// on O) — a wrong placement is off by a factor of 2 or 4, far outside it.
TEST(PagedPrefillFp8Scales, AgreeWithThe16BitCacheOfTheSameValues) {
  MUH_REQUIRE_GPU();
  for (const auto& e : kCompiledFp8Instances) {
    if (e.head_dim == 0) continue;
    check::PagedPrefillCase c = check::paged_prefill_cases()[4];  // many pages, varlen, GQA 6
    c.kv = KVQuant{e.kv, kKScale, kVScale};
    const auto q8 = check::make_paged_prefill_inputs(c, KVLayout::nhd, e.dtype, e.head_dim, 7);
    c.kv = KVQuant{};
    const auto q16 = check::make_paged_prefill_inputs(c, KVLayout::nhd, e.dtype, e.head_dim, 7);
    // q16's K/V: the same draws, not quantised; give it q8's dequantised values instead.
    auto& k16 = q16->k_cache;
    auto& v16 = q16->v_cache;
    k16 = q8->k_cache;
    v16 = q8->v_cache;
    std::vector<float> out8, out16;
    const check::PrefillResult r8 = check::run_paged_prefill_case(*q8, -1, nullptr, &out8);
    const check::PrefillResult r16 = check::run_paged_prefill_case(*q16, -1, nullptr, &out16);
    ASSERT_TRUE(r8.status.ok()) << r8.status.message();
    ASSERT_TRUE(r16.status.ok()) << r16.status.message();
    ASSERT_EQ(out8.size(), out16.size());
    double diff = 0;
    for (std::size_t i = 0; i < out8.size(); ++i) diff = std::max(diff, double(std::fabs(out8[i] - out16[i])));
    EXPECT_LE(diff, r8.tol) << kv_dtype_name(e.kv) << " " << dtype_name(e.dtype) << " hd " << e.head_dim;
  }
}

}  // namespace
}  // namespace muh
