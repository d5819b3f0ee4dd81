// test_paged_prefill_fp8.cpp — paged prefill over an fp8 KV cache (PrefillParams::kv), on the CPU:
//   * the selection: the sm80 and portable agents read fp8 codes (prefill_agent_reads_kv), so on
//     Hopper the walk passes sm_90a (its trace says why) and takes sm_90's row; an A100 its own
//     row; a T4 passes its sm75 row for the portable one; the BI-V100 profile its portable row;
//   * the plan records the cache type, never runs the persistent schedule (the sm90 agent's),
//     and prefill() refuses a plan made for another cache type before any CUDA call;
//   * a variant over an fp8 cache: the general kind's plan on a row that reads the codes;
//   * bad input: every fp8 rule a clear Status from plan_prefill() and prefill();
//   * a mixed batch over an fp8 cache: both parts carry the cache type (the decode part's
//     DecodeParams::kv with the scales, the prefill part's plan on the sm80 agent).
#include <gtest/gtest.h>

#include <string>

#include "../../src/prefill_check.hpp"
#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/hardware.hpp"
#include "muh/instances.hpp"
#include "muh/mixed_plan.hpp"
#include "muh/select.hpp"
#include "paged_call.hpp"

namespace muh {
namespace {

alignas(256) unsigned char g_fake[1024];  // host bytes standing in for device pointers (never read)

SelectOptions fp8_options(KVSource src, int force = -1) {
  SelectOptions so{force, src};
  so.kv_dtype = KVDType::fp8_e4m3;
  return so;
}

TEST(PagedPrefillFp8Selection, HopperWalksPastTheSm90AgentToSm80s) {
  for (DType t : {DType::fp16, DType::bf16}) {
    const PrefillSelection nhd = choose_prefill(presets::h200, t, 128, fp8_options(KVSource::paged_nhd), kKnownTargets);
    EXPECT_EQ(nhd.target, 90);
    EXPECT_EQ(nhd.policy.agent, Agent::sm80);
    ASSERT_EQ(nhd.passed_count, 1);
    EXPECT_EQ(nhd.passed[0].target, kTargetSm90a);
    EXPECT_EQ(nhd.passed[0].why, Pass::kv_dtype);
    EXPECT_NE(describe(nhd).find("fp8"), std::string::npos) << describe(nhd);
    // The vLLM layout: sm_90a is passed for the layout first (it reads neither).
    const PrefillSelection vllm = choose_prefill(presets::h200, t, 256, fp8_options(KVSource::paged_vllm), kKnownTargets);
    EXPECT_EQ(vllm.target, 90);
    EXPECT_EQ(vllm.policy.agent, Agent::sm80);
    // The 16-bit cache keeps the Hopper agent.
    EXPECT_EQ(choose_prefill(presets::h200, t, 128, SelectOptions{-1, KVSource::paged_nhd}, kKnownTargets).target,
              kTargetSm90a);
    // An A100 and an L40S run their own sm80 rows.
    EXPECT_EQ(choose_prefill(presets::a100, t, 128, fp8_options(KVSource::paged_nhd), kKnownTargets).target, 80);
    EXPECT_EQ(choose_prefill(presets::l40s, t, 128, fp8_options(KVSource::paged_vllm), kKnownTargets).policy.agent,
              Agent::sm80);
  }
}

TEST(PagedPrefillFp8Selection, WithoutTheSm80AgentThePortableOneReadsIt) {
  // The T4's fp16 rows are the sm75 agent's (which reads no fp8: passed, the trace says why) and
  // the portable one's; the BI-V100 profile's is the portable one's.
  const PrefillSelection t4 = choose_prefill(presets::t4, DType::fp16, 128, fp8_options(KVSource::paged_nhd), kKnownTargets);
  ASSERT_TRUE(t4.ok()) << describe(t4);
  EXPECT_EQ(t4.target, 0);
  EXPECT_EQ(t4.policy.agent, Agent::portable);
  ASSERT_GE(t4.passed_count, 1);
  EXPECT_EQ(t4.passed[0].target, 75);
  EXPECT_EQ(t4.passed[0].why, Pass::kv_dtype);
  EXPECT_NE(describe(t4).find("fp8"), std::string::npos) << describe(t4);
  const PrefillSelection bi =
      choose_prefill(presets::bi_v100, DType::fp16, 256, fp8_options(KVSource::paged_vllm), kKnownTargets);
  ASSERT_TRUE(bi.ok()) << describe(bi);
  EXPECT_EQ(bi.policy.agent, Agent::portable);
  // Forced onto the Hopper agent: no row, rather than another row; forced onto the portable one:
  // its row.
  EXPECT_EQ(
      choose_prefill(presets::h200, DType::bf16, 128, fp8_options(KVSource::paged_nhd, kTargetSm90a), kKnownTargets).error,
      NoRow::forced_does_not_fit);
  const PrefillSelection forced0 =
      choose_prefill(presets::h200, DType::bf16, 128, fp8_options(KVSource::paged_nhd, 0), kKnownTargets);
  ASSERT_TRUE(forced0.ok()) << describe(forced0);
  EXPECT_EQ(forced0.policy.agent, Agent::portable);
}

// A valid paged fp8 call (paged_call.hpp's shape: 2 sequences, 6 q heads / 1 kv head), fp16 hd 128.
PrefillParams good_fp8(KVLayout layout = KVLayout::nhd, KVDType kv = KVDType::fp8_e4m3) {
  PrefillParams p = cpu_test::paged_call(g_fake, layout, DType::fp16, 128);
  p.kv = KVQuant{kv, 0.5f, 2.f};
  return p;
}

TEST(PagedPrefillFp8Plan, RecordsTheCacheTypeOnTheSm80Agent) {
  for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm}) {
    PrefillParams p = good_fp8(layout);
    // Many q tiles: the 16-bit NHD plan would take the persistent schedule where sm_90a is compiled.
    cpu_test::make_long(&p);
    PrefillPlan plan;
    ASSERT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{}, &plan).ok());
    EXPECT_EQ(plan.kv_dtype, KVDType::fp8_e4m3);
    EXPECT_EQ(plan.policy.agent, Agent::sm80);
    EXPECT_FALSE(plan.persistent.on());
    PrefillParams b16 = p;
    b16.kv = KVQuant{};
    PrefillPlan plan16;
    ASSERT_TRUE(plan_prefill(b16, presets::h200, PrefillPlanOptions{}, &plan16).ok());
    EXPECT_EQ(plan16.kv_dtype, KVDType::same);
  }
}

// prefill() with a plan made for the other cache type: refused by the plan check, which runs
// before the device is touched (the inputs' own checks first: a build without this fp8 instance
// refuses the call as not compiled instead).
TEST(PagedPrefillFp8Plan, APlanOfAnotherCacheTypeIsRefused) {
  PrefillParams p8 = good_fp8();
  PrefillParams p16 = p8;
  p16.kv = KVQuant{};
  PrefillPlan plan8, plan16;
  ASSERT_TRUE(plan_prefill(p8, presets::h200, PrefillPlanOptions{}, &plan8).ok());
  ASSERT_TRUE(plan_prefill(p16, presets::h200, PrefillPlanOptions{}, &plan16).ok());
  const bool fp8_compiled = MUH_PAGED_PREFILL && is_fp8_instance(KVDType::fp8_e4m3, p8.dtype, p8.head_dim);
  const bool b16_compiled = MUH_PAGED_PREFILL && is_compiled_instance(p16.dtype, p16.head_dim);
  Status s = prefill(p8, plan16, nullptr, 0);
  if (fp8_compiled) {
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
    EXPECT_NE(s.message().find("re-plan"), std::string::npos) << s.message();
  } else {
    EXPECT_EQ(s.code(), StatusCode::not_compiled) << s.message();
  }
  s = prefill(p16, plan8, nullptr, 0);
  if (b16_compiled) {
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
    EXPECT_NE(s.message().find("fp8_e4m3"), std::string::npos) << s.message();
  } else {
    EXPECT_EQ(s.code(), StatusCode::not_compiled) << s.message();
  }
}

// A variant over an fp8 cache: the general kind's plan (whole q tiles: no split, no persistent
// schedule) on the row that reads fp8 codes, on each layout; the call's compiled-instance check
// passes exactly where this build has the fp8 instance and the general kind for its (dtype, head
// dim), and otherwise says not compiled (before any CUDA call).
TEST(PagedPrefillFp8Plan, AVariantTakesTheGeneralKindOnAnFp8Row) {
  const auto variants = {+[](Variant& v) { v.window_left = 64; }, +[](Variant& v) { v.softcap = 30.f; },
                         +[](Variant& v) { v.use_sinks = true; v.sinks = reinterpret_cast<const float*>(g_fake); },
                         +[](Variant& v) { v.use_alibi = true; v.alibi_slopes = reinterpret_cast<const float*>(g_fake); }};
  for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm})
    for (auto set : variants) {
      PrefillParams p = good_fp8(layout);
      cpu_test::make_long(&p);
      set(p.variant);
      const bool compiled = MUH_PAGED_PREFILL && MUH_VARIANT_GENERAL && is_general_instance(p.dtype, p.head_dim) &&
                            is_fp8_instance(p.kv.dtype, p.dtype, p.head_dim);
      const Status c = detail::check_prefill_compiled(p);
      EXPECT_EQ(c.code(), compiled ? StatusCode::ok : StatusCode::not_compiled) << c.message();
      PrefillPlan plan;
      const Status s = plan_prefill(p, presets::h200, PrefillPlanOptions{}, &plan);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(plan.variant, VariantKind::general);
      EXPECT_EQ(plan.kv_dtype, KVDType::fp8_e4m3);
      EXPECT_EQ(plan.policy.agent, Agent::sm80);
      EXPECT_FALSE(plan.split.split());
      EXPECT_FALSE(plan.persistent.on());
      // The T4: the sm75 agent reads no fp8 (it has the variant hooks): the portable row.
      ASSERT_TRUE(plan_prefill(p, presets::t4, PrefillPlanOptions{}, &plan).ok());
      EXPECT_EQ(plan.policy.agent, Agent::portable);
    }
}

struct Bad {
  const char* name;
  void (*mutate)(PrefillParams&);
  StatusCode code;
  const char* says;
};

const Bad kBad[] = {
    {"unknown_kv_dtype", [](PrefillParams& p) { p.kv.dtype = static_cast<KVDType>(9); }, StatusCode::invalid_argument,
     "kv dtype 9"},
    {"k_scale_0", [](PrefillParams& p) { p.kv.k_scale = 0.f; }, StatusCode::invalid_argument, "k_scale"},
    {"v_scale_negative", [](PrefillParams& p) { p.kv.v_scale = -1.f; }, StatusCode::invalid_argument, "v_scale"},
    {"v_scale_nan", [](PrefillParams& p) { p.kv.v_scale = NAN; }, StatusCode::invalid_argument, "v_scale"},
    {"fp32_q", [](PrefillParams& p) { p.dtype = DType::fp32; p.page_size = 16; }, StatusCode::invalid_argument,
     "not fp32"},
    {"contiguous", [](PrefillParams& p) {
       p.kv_source = KVSource::contiguous;
       p.total_k = p.max_seqlen_k = 100;
     }, StatusCode::invalid_argument, "paged cache only"},
    {"window_below_minus_one", [](PrefillParams& p) { p.variant.window_left = -2; }, StatusCode::invalid_argument,
     "window"},
    {"softcap_negative", [](PrefillParams& p) { p.variant.softcap = -30.f; }, StatusCode::invalid_argument, "softcap"},
};

TEST(PagedPrefillFp8BadInput, EveryRuleIsAClearStatusBeforeAnyLaunch) {
  for (const Bad& c : kBad)
    for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm}) {
      PrefillParams p = good_fp8(layout);
      c.mutate(p);
      PrefillPlan plan;
      Status s = plan_prefill(p, presets::h200, PrefillPlanOptions{}, &plan);
      EXPECT_EQ(s.code(), c.code) << c.name << ": " << s.message();
      EXPECT_NE(s.message().find(c.says), std::string::npos) << c.name << ": " << s.message();
      s = prefill(p, RunOptions{});  // the one-call form: the same check, before any CUDA call
      EXPECT_EQ(s.code(), c.code) << c.name << ": " << s.message();
    }
  // The vLLM layout's value rows are copied 16 codes (slots) at a time: pages of 8 are refused
  // there, and fine in NHD.
  PrefillParams p = good_fp8(KVLayout::vllm);
  p.page_size = 8;
  p.max_blocks_per_seq = 16;
  PrefillPlan plan;
  Status s = plan_prefill(p, presets::h200, PrefillPlanOptions{}, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
  EXPECT_NE(s.message().find("multiple of 16"), std::string::npos) << s.message();
  p = good_fp8(KVLayout::nhd);
  p.page_size = 8;
  p.max_blocks_per_seq = 16;
  EXPECT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{}, &plan).ok());
}

// Four decodes at 300-1000 keys, then a 64-token chunk over 40 cached keys: forced split, the
// decodes go to paged_decode() and the chunk to the paged prefill, both over the fp8 cache; one
// launch, the whole batch on the prefill's sm80 agent.
TEST(PagedPrefillFp8Mixed, BothPartsCarryTheCacheType) {
  const std::vector<int> q = {1, 1, 1, 1, 64}, kv = {300, 1000, 17, 512, 104};
  std::vector<int> cu = {0};
  for (int x : q) cu.push_back(cu.back() + x);
  for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm}) {
    PrefillParams p = good_fp8(layout);
    p.batch = int(q.size());
    p.total_q = cu.back();
    p.max_seqlen_q = 64;
    p.max_seqlen_k = 1000;
    p.max_blocks_per_seq = 1000 / 16 + 1;
    p.num_pages = p.batch * p.max_blocks_per_seq;
    MixedPlanOptions split;
    split.force_split = 1;
    MixedPlan plan;
    const Status s = plan_mixed(p, cu.data(), kv.data(), presets::h200, split, &plan);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(plan.has_decode() && plan.has_prefill()) << describe(plan);
    EXPECT_EQ(plan.prefill.kv_dtype, KVDType::fp8_e4m3);
    EXPECT_EQ(plan.prefill.policy.agent, Agent::sm80);
    const DecodeParams d = mixed_decode_part(p, plan);
    EXPECT_EQ(d.kv.dtype, KVDType::fp8_e4m3);
    EXPECT_EQ(d.kv.k_scale, 0.5f);
    EXPECT_EQ(d.kv.v_scale, 2.f);
    EXPECT_EQ(mixed_prefill_part(p, plan, nullptr).kv.dtype, KVDType::fp8_e4m3);
    MixedPlanOptions single;
    single.force_split = 0;
    MixedPlan one;
    ASSERT_TRUE(plan_mixed(p, cu.data(), kv.data(), presets::h200, single, &one).ok());
    EXPECT_EQ(one.prefill.kv_dtype, KVDType::fp8_e4m3);
    EXPECT_EQ(one.prefill.policy.agent, Agent::sm80);
  }
}

}  // namespace
}  // namespace muh
