// test_prefill_variants.cu — the general variant kind (muh/variant.hpp) of every compiled prefill
// policy, forced, against the CPU reference: sliding windows (smaller than a tile, equal to a
// page, larger than the sequence, two-sided, q longer than k), soft-capping at 30 and 50 on sharp
// scores, sinks far above and below the scores, ALiBi with GQA, and all of them at once; contiguous
// K/V and both paged layouts. Checks and tolerance as test_prefill.cu (check/prefill_check.hpp):
// error ≤ 2× a naive implementation at the input precision (which applies the same variant), no
// NaN/Inf left of the NaN pre-fill, lse (with the sink: log(e^sink + Σ e^s)), bitwise run-to-run
// equality. Each name ends with the agent the forced policy runs.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/tuning/policy_io.hpp"
#include "muh/tuning/selectors.hpp"
#include "paged_prefill_check.hpp"
#include "prefill_check.hpp"
#include "prefill_expect.hpp"

namespace muh {
namespace {

// Per-head values: 8 q heads (GQA 4 over 2 kv heads).
check::VariantSpec window(int left, int right) {
  check::VariantSpec v;
  v.window_left = left;
  v.window_right = right;
  return v;
}
check::VariantSpec softcap(float c) {
  check::VariantSpec v;
  v.softcap = c;
  return v;
}
// Sinks around the scores' range (|s| up to ~15 at scale 1, hd 128) and far above / below it.
const std::vector<float> kSinks = {-60.f, -8.f, -1.f, 0.f, 2.5f, 9.f, 30.f, 80.f};
// BLOOM's slopes for 8 heads: 2^-(h+1).
const std::vector<float> kAlibi = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f, 0.00390625f};

check::VariantSpec sinks() {
  check::VariantSpec v;
  v.sinks = kSinks;
  return v;
}
check::VariantSpec alibi() {
  check::VariantSpec v;
  v.alibi = kAlibi;
  return v;
}
check::VariantSpec everything() {
  check::VariantSpec v = window(40, 0);
  v.softcap = 30.f;
  v.sinks = kSinks;
  v.alibi = kAlibi;
  return v;
}

check::VariantSpec prefix_part() {
  check::VariantSpec v = window(30, -1);
  v.alibi = kAlibi;
  v.queries_after_keys = true;
  return v;
}

const std::vector<check::PrefillCase>& variant_cases() {
  static const std::vector<check::PrefillCase> cases = {
      // Windows: smaller than any tile (5), a page (16), a tile (64), larger than the sequence.
      {"win5_causal", {1, 70, 130}, {1, 70, 130}, 8, 2, true, 0.f, -1, window(5, 0)},
      {"win16_causal_k_longer", {37, 100}, {200, 300}, 8, 2, true, 0.5f, -1, window(16, 0)},
      {"win64_causal_sharp", {300}, {300}, 8, 2, true, 1.f, -1, window(64, 0)},
      {"win_larger_than_seq", {67, 9}, {67, 9}, 8, 2, true, 0.f, -1, window(1000, 0)},
      {"win_two_sided_noncausal", {50, 129}, {90, 129}, 8, 2, false, 0.5f, -1, window(20, 7)},
      {"win_right_only_q_longer", {60, 3}, {25, 9}, 8, 2, false, 0.f, -1, window(-1, 3)},
      // Soft-capping on sharp scores (scale 2: logits up to ~±30 at hd 128).
      {"softcap30_causal", {130, 1}, {130, 5}, 8, 2, true, 2.f, -1, softcap(30.f)},
      {"softcap50_noncausal", {64, 77}, {200, 77}, 8, 2, false, 2.f, -1, softcap(50.f)},
      // Sinks: far below (no effect), near, and far above (out → 0) the scores.
      {"sinks_causal", {1, 67, 130}, {1, 67, 130}, 8, 2, true, 1.f, -1, sinks()},
      {"sinks_noncausal_q_longer", {40, 5}, {20, 0}, 8, 2, false, 0.f, -1, sinks()},
      // ALiBi with GQA 4, causal and not.
      {"alibi_causal_gqa4", {129, 33}, {129, 300}, 8, 2, true, 0.f, -1, alibi()},
      {"alibi_noncausal_gqa4", {70}, {150}, 8, 2, false, 0.5f, -1, alibi()},
      // All at once.
      {"all_causal", {200, 1, 64}, {260, 1, 64}, 8, 2, true, 1.f, -1, everything()},
      // Queries after the keys (context_attention_fwd's prefix part): a window and ALiBi.
      {"prefix_part_win_alibi", {9, 130, 5}, {40, 70, 0}, 8, 2, false, 0.5f, -1, prefix_part()},
  };
  return cases;
}

struct VariantParam {
  int target;
  DType dtype;
  int head_dim;
  std::size_t case_index;
};

std::string param_name(const VariantParam& p) {
  return "t" + std::to_string(p.target) + "_" + std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         "_" + variant_cases()[p.case_index].name + "_" +
         std::string(agent_name(prefill_policy(p.target, p.dtype, p.head_dim).agent));
}
void PrintTo(const VariantParam& p, std::ostream* os) { *os << param_name(p); }

std::vector<VariantParam> all_params() {
  std::vector<VariantParam> v;
  for (std::size_t ti = 0; ti < compiled_targets::size; ++ti)
    for (const auto& [t, d] : kCompiledInstances)
      if (is_general_instance(t, d))  // (MUH_VARIANTS / MUH_VARIANT_HEAD_DIMS)
        for (std::size_t c = 0; c < variant_cases().size(); ++c) v.push_back({compiled_targets::values[ti], t, d, c});
  return v;
}

using testing::device_cc;

void expect_pass(const check::PrefillResult& r, double naive_err, double max_ref) {
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  testing::expect_matches_reference(r, naive_err, max_ref);
}

class PrefillVariantForced : public ::testing::TestWithParam<VariantParam> {};

TEST_P(PrefillVariantForced, MatchesReference) {
  MUH_REQUIRE_GPU();
  const VariantParam prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc()))
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  const auto in = check::make_prefill_inputs(variant_cases()[prm.case_index], prm.dtype, prm.head_dim,
                                             17u + unsigned(prm.case_index));
  const PrefillPolicy pol = prefill_policy(prm.target, prm.dtype, prm.head_dim);
  SCOPED_TRACE("policy: " + to_string(pol, prm.dtype, prm.head_dim));
  const check::PrefillResult r = check::run_prefill_case(*in, prm.target);
  if (!prefill_agent_has_variants(pol.agent)) {
    // The sm90 agent has no variant hooks: forced onto its row, a clear Status; the walk runs the
    // variant on sm_90's row (the sm80 agent), which passes.
    EXPECT_EQ(r.status.code(), StatusCode::unsupported) << r.status.message();
    EXPECT_NE(r.status.message().find("no variant hooks"), std::string::npos) << r.status.message();
    expect_pass(check::run_prefill_case(*in, -1), in->naive_err, in->max_ref);
    return;
  }
  expect_pass(r, in->naive_err, in->max_ref);
  RecordProperty("max_err", std::to_string(r.max_err));
  RecordProperty("tol", std::to_string(r.tol));
}

INSTANTIATE_TEST_SUITE_P(Variants, PrefillVariantForced, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<VariantParam>& info) { return param_name(info.param); });

#if MUH_PAGED_PREFILL
// Paged K/V (both layouts): the window equal to a page, sinks, ALiBi and all at once, on prefixes
// of many pages, a page − 1, and decode-like single-token chunks.
const std::vector<check::PagedPrefillCase>& paged_variant_cases() {
  static const std::vector<check::PagedPrefillCase> cases = [] {
    std::vector<check::PagedPrefillCase> v;
    for (int P : {16, 528}) {
      const std::string p = "_p" + std::to_string(P);
      v.push_back({"win_page" + p, {5 * P + 3, 0, P - 1}, {2, 100, 7}, 8, 2, P, true, 0.f, window(P, 0)});
      v.push_back({"sinks" + p, {3 * P, 37}, {64, 1}, 8, 2, P, true, 1.f, sinks()});
      v.push_back({"alibi" + p, {1000, 0}, {1, 16}, 8, 2, P, true, 0.f, alibi()});
      v.push_back({"all" + p, {2 * P + 5, 1}, {33, 1}, 8, 2, P, true, 1.f, everything()});
    }
    return v;
  }();
  return cases;
}

struct PagedVariantParam {
  int target;
  DType dtype;
  int head_dim;
  KVLayout layout;
  std::size_t case_index;
};

std::string paged_param_name(const PagedVariantParam& p) {
  return "t" + std::to_string(p.target) + "_" + std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         (p.layout == KVLayout::nhd ? "_nhd_" : "_vllm_") + paged_variant_cases()[p.case_index].name + "_" +
         std::string(agent_name(prefill_policy(p.target, p.dtype, p.head_dim).agent));
}
void PrintTo(const PagedVariantParam& p, std::ostream* os) { *os << paged_param_name(p); }

std::vector<PagedVariantParam> paged_params() {
  std::vector<PagedVariantParam> v;
  for (std::size_t ti = 0; ti < compiled_targets::size; ++ti)
    for (const auto& [t, d] : kCompiledInstances)
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        for (std::size_t c = 0; c < paged_variant_cases().size() && is_general_instance(t, d); ++c)
          if (paged_variant_cases()[c].page_size % (16 / int(dtype_size(t))) == 0)
            v.push_back({compiled_targets::values[ti], t, d, l, c});
  return v;
}

class PagedPrefillVariantForced : public ::testing::TestWithParam<PagedVariantParam> {};

TEST_P(PagedPrefillVariantForced, MatchesReference) {
  MUH_REQUIRE_GPU();
  const PagedVariantParam prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc()))
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  const auto pi = check::make_paged_prefill_inputs(paged_variant_cases()[prm.case_index], prm.layout, prm.dtype,
                                                   prm.head_dim, 29u + unsigned(prm.case_index));
  PrefillPlan plan;
  const check::PrefillResult r = check::run_paged_prefill_case(*pi, prm.target, &plan);
  const PrefillPolicy pol = prefill_policy(prm.target, prm.dtype, prm.head_dim);
  const int page = paged_variant_cases()[prm.case_index].page_size;
  const bool reads = prefill_agent_reads_pages(pol.agent, paged_source(prm.layout), page);
  if (!reads || !prefill_agent_has_variants(pol.agent)) {
    // A forced row whose agent cannot read the layout (the sm75 agent on vLLM pages) or
    // has no variant hooks (the sm90 agent): a clear Status, as for the plain kind
    // (test_paged_prefill.cu), and the unforced selection runs the variant on a row whose agent
    // reads the layout and has the hooks.
    EXPECT_EQ(r.status.code(), StatusCode::unsupported) << r.status.message();
    EXPECT_NE(r.status.message().find(reads ? "no variant hooks" : "paged"), std::string::npos) << r.status.message();
    const check::PrefillResult walked = check::run_paged_prefill_case(*pi, -1, &plan);
    EXPECT_TRUE(prefill_agent_reads_pages(plan.policy.agent, paged_source(prm.layout), page));
    EXPECT_TRUE(prefill_agent_has_variants(plan.policy.agent));
    EXPECT_EQ(plan.variant, VariantKind::general);
    expect_pass(walked, pi->in->naive_err, pi->in->max_ref);
    return;
  }
  SCOPED_TRACE("plan: target " + std::to_string(plan.target) + ", " + to_string(plan.policy, prm.dtype, prm.head_dim));
  EXPECT_EQ(plan.target, prm.target);
  EXPECT_EQ(plan.variant, VariantKind::general);
  expect_pass(r, pi->in->naive_err, pi->in->max_ref);
}

INSTANTIATE_TEST_SUITE_P(Variants, PagedPrefillVariantForced, ::testing::ValuesIn(paged_params()),
                         [](const ::testing::TestParamInfo<PagedVariantParam>& info) {
                           return paged_param_name(info.param);
                         });
#endif

// The plain kind after the hooks: test_prefill.cu's shapes (check::prefill_cases(), the tail
// split forced included) at every compiled target, without that file's extra ring kernels (so a
// lean device build checks the plain path too).
struct PlainParam {
  int target;
  DType dtype;
  int head_dim;
  std::size_t case_index;
};
std::string plain_name(const PlainParam& p) {
  return "t" + std::to_string(p.target) + "_" + std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         "_" + check::prefill_cases()[p.case_index].name;
}
void PrintTo(const PlainParam& p, std::ostream* os) { *os << plain_name(p); }
std::vector<PlainParam> plain_params() {
  std::vector<PlainParam> v;
  for (std::size_t ti = 0; ti < compiled_targets::size; ++ti)
    for (const auto& [t, d] : kCompiledInstances)
      for (std::size_t c = 0; c < check::prefill_cases().size(); ++c) v.push_back({compiled_targets::values[ti], t, d, c});
  return v;
}
class PrefillPlainKind : public ::testing::TestWithParam<PlainParam> {};
TEST_P(PrefillPlainKind, MatchesReference) {
  MUH_REQUIRE_GPU();
  const PlainParam prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc())) GTEST_SKIP() << "target " << prm.target << " is newer than the device";
  const auto& in = check::cached_prefill_inputs(prm.case_index, prm.dtype, prm.head_dim);
  expect_pass(check::run_prefill_case(in, prm.target), in.naive_err, in.max_ref);
}
INSTANTIATE_TEST_SUITE_P(Plain, PrefillPlainKind, ::testing::ValuesIn(plain_params()),
                         [](const ::testing::TestParamInfo<PlainParam>& i) { return plain_name(i.param); });

// The plain kind is untouched by a variant that is off: a plan made with Variant{} runs plain.
TEST(PrefillVariantKind, NoVariantRunsThePlainKind) {
  MUH_REQUIRE_GPU();
  const auto in = check::make_prefill_inputs(variant_cases()[0], kCompiledInstances[0].dtype,
                                             kCompiledInstances[0].head_dim, 3);
  check::PrefillCase plain = variant_cases()[0];
  plain.variant = {};
  const auto in0 = check::make_prefill_inputs(plain, kCompiledInstances[0].dtype, kCompiledInstances[0].head_dim, 3);
  PrefillPlan p0, p1;
  HardwareCapability hw;
  ASSERT_TRUE(device_profile(-1, &hw).ok());
  ASSERT_TRUE(plan_prefill(check::shape_params(*in0), hw, {}, &p0).ok());
  PrefillParams pv = check::shape_params(*in);
  pv.variant = in->c->variant.host();
  ASSERT_TRUE(plan_prefill(pv, hw, {}, &p1).ok());
  EXPECT_EQ(p0.variant, VariantKind::plain);
  EXPECT_EQ(p1.variant, VariantKind::general);
  expect_pass(check::run_prefill_case(*in0, -1), in0->naive_err, in0->max_ref);
}

}  // namespace
}  // namespace muh

// ---- What the general kind costs (a timing, not a check: DISABLED_, run by the device script
// with --gtest_also_run_disabled_tests). fp16 or the first compiled dtype, hd 128 if compiled,
// 16k tokens × 16 heads (4 × 4096), the device's own plan; median of 30 event-timed calls. Rows:
// plain; general with a window past every key (normalised away: the hooks' bare cost); soft-cap
// 30; ALiBi; sinks; all three; windows of 1024 and 256 keys (skipped tiles: time ∝ window).
#include <algorithm>
#include <cstdio>

namespace muh {
namespace {

TEST(PrefillVariantCost, DISABLED_GeneralKindAgainstPlain) {
  MUH_REQUIRE_GPU();
  const DType t = kCompiledInstances[0].dtype;
  int d = kCompiledInstances[0].head_dim;
  for (const auto& e : kCompiledInstances)
    if (e.dtype == t && e.head_dim == 128 && is_general_instance(t, 128)) d = 128;
  if (!is_general_instance(t, d)) GTEST_SKIP() << "the general variant kind is not compiled for this instance";
  const int heads = 16, seq = 4096, batch = 4, total = batch * seq;
  const std::size_t n = std::size_t(total) * heads * d;
  check::DevBuf q(n * 2), k(n * 2), v(n * 2), o(n * 2), cu((batch + 1) * 4), sk(heads * 4), al(heads * 4);
  std::mt19937 rng(1);
  std::vector<float> x(n);
  for (auto& e : x) e = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  const auto bytes = ref::to_storage(x, t);
  MUH_CUDA_CHECK(cudaMemcpy(q.p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(k.p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(v.p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  std::vector<int> cuh(batch + 1);
  for (int b = 0; b <= batch; ++b) cuh[b] = b * seq;
  MUH_CUDA_CHECK(cudaMemcpy(cu.p, cuh.data(), cuh.size() * 4, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(sk.p, kSinks.data(), heads / 2 * 4, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(static_cast<char*>(sk.p) + heads / 2 * 4, kSinks.data(), heads / 2 * 4, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(al.p, kAlibi.data(), heads / 2 * 4, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(static_cast<char*>(al.p) + heads / 2 * 4, kAlibi.data(), heads / 2 * 4, cudaMemcpyHostToDevice));
  HardwareCapability hw;
  ASSERT_TRUE(device_profile(-1, &hw).ok());
  struct Row {
    const char* name;
    Variant v;
  };
  auto var = [&](int wl, float cap, bool al_on, bool sk_on) {
    Variant r;
    r.window_left = wl;
    r.softcap = cap;
    r.use_alibi = al_on;
    r.alibi_slopes = al_on ? static_cast<const float*>(al.p) : nullptr;
    r.use_sinks = sk_on;
    r.sinks = sk_on ? static_cast<const float*>(sk.p) : nullptr;
    return r;
  };
  const Row rows[] = {{"plain", Variant{}},
                      {"general_window_past_all_keys", var(1 << 20, 0.f, false, false)},
                      {"softcap30", var(-1, 30.f, false, false)},
                      {"alibi", var(-1, 0.f, true, false)},
                      {"sinks", var(-1, 0.f, false, true)},
                      {"softcap_alibi_sinks", var(-1, 30.f, true, true)},
                      {"window1024", var(1024, 0.f, false, false)},
                      {"window256", var(256, 0.f, false, false)}};
  std::printf("variant cost: %s hd %d, %d x %d tokens, %d heads, device plan\n", dtype_name(t).data(), d, batch, seq,
              heads);
  for (bool causal : {false, true}) {
    double plain_ms = 0;
    for (const Row& r : rows) {
      if (!causal && r.v.window_left >= 0 && r.v.window_left < seq) {
        // (a left window without causal still sees every later key: measured with causal only)
        continue;
      }
      PrefillParams p;
      p.dtype = t;
      p.head_dim = d;
      p.q = q.p, p.k = k.p, p.v = v.p, p.out = o.p;
      p.cu_seqlens_q = p.cu_seqlens_k = static_cast<const int*>(cu.p);
      p.batch = batch;
      p.total_q = p.total_k = total;
      p.max_seqlen_q = p.max_seqlen_k = seq;
      p.num_q_heads = p.num_kv_heads = heads;
      p.causal = causal;
      p.variant = r.v;
      PrefillPlan plan;
      ASSERT_TRUE(plan_prefill(p, hw, PrefillPlanOptions{-1, kPrefillTailOff}, &plan).ok());
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      std::vector<float> ms;
      for (int i = 0; i < 35; ++i) {
        cudaEventRecord(e0);
        ASSERT_TRUE(prefill(p, plan, nullptr, 0).ok());
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float t_ms = 0;
        cudaEventElapsedTime(&t_ms, e0, e1);
        if (i >= 5) ms.push_back(t_ms);
      }
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      if (r.v.window_left < 0 && variant_kind(r.v) == VariantKind::plain) plain_ms = med;
      std::printf("  %-10s %-30s %-8s target %d: %8.3f ms  %.3fx plain\n", causal ? "causal" : "non-causal", r.name,
                  variant_kind_name(plan.variant), plan.target, med, plain_ms > 0 ? med / plain_ms : 0.0);
    }
  }
}

}  // namespace
}  // namespace muh
