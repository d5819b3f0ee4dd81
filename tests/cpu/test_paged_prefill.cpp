// test_paged_prefill.cpp — prefill with K/V from a paged cache, on the CPU:
//   * the reference: ref::paged_prefill() == ref::prefill() over the same K/V written densely,
//     for both layouts, page sizes 8 / 16 / 528, random page order (the cache is written here
//     from the layouts' documented shapes, not with paged_kv.hpp), and chunked prefill of one
//     sequence in k chunks == one prefill of the whole sequence;
//   * the selection and the plan: paged calls keep the sm80 agent's row in both layouts; a
//     paged-vLLM call walks past the sm75 agent's row (with the trace saying why); paged plans
//     never split the tail;
//   * bad input: every shape error a clear Status from plan_prefill(), prefill() and
//     muh_paged_prefill() (muh_paged_prefill_quant(): the fp8 cache's rules too) before any
//     CUDA call, and the debug_checks' table checks (check_paged_tables_host) on host tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../../src/prefill_check.hpp"
#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/hardware.hpp"
#include "muh/instances.hpp"
#include "muh/muh.h"
#include "muh/reference.hpp"
#include "muh/select.hpp"
#include "paged_call.hpp"
#include "random_inputs.hpp"

namespace muh {
namespace {

using cpu_test::random_vec;

// ---- The reference ------------------------------------------------------------------------------

struct Case {
  KVLayout layout;
  int page_size;
  int head_dim;
  int num_kv_heads;
  int group;
  std::vector<int> q_lens;  // new tokens per sequence
  std::vector<int> k_lens;  // cached prefix + new tokens
  bool causal;
};

// A paged cache holding dense K/V [sum k_lens, H, D] (sequence b's keys at offset cu_k[b]),
// its pages in random order, every other element NaN; written with the documented shapes.
struct Cache {
  std::vector<float> k, v;          // dense
  std::vector<float> k_cache, v_cache;
  std::vector<int> block_table;
  std::vector<int> cu_k;
  int max_blocks = 0;
  PagedKVShape shape;
};

Cache make_cache(const Case& c, unsigned seed) {
  Cache r;
  const int B = int(c.k_lens.size()), H = c.num_kv_heads, D = c.head_dim, P = c.page_size, X = 8;
  r.cu_k.assign(B + 1, 0);
  for (int b = 0; b < B; ++b) {
    r.cu_k[b + 1] = r.cu_k[b] + c.k_lens[b];
    r.max_blocks = std::max(r.max_blocks, (c.k_lens[b] + P - 1) / P);
  }
  r.max_blocks = std::max(r.max_blocks, 1);
  const int pages = B * r.max_blocks + 2;
  std::vector<int> perm(pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  r.block_table.assign(perm.begin(), perm.begin() + std::size_t(B) * r.max_blocks);
  r.k = random_vec(std::size_t(r.cu_k[B]) * H * D, seed + 1);
  r.v = random_vec(r.k.size(), seed + 2);
  const std::size_t elems = std::size_t(pages) * P * H * D;
  r.k_cache.assign(elems, std::numeric_limits<float>::quiet_NaN());
  r.v_cache.assign(elems, std::numeric_limits<float>::quiet_NaN());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < c.k_lens[b]; ++t)
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) {
          const std::size_t src = (std::size_t(r.cu_k[b] + t) * H + h) * D + d;
          const std::size_t page = r.block_table[std::size_t(b) * r.max_blocks + t / P], slot = t % P;
          std::size_t ki, vi;
          if (c.layout == KVLayout::nhd) {
            ki = vi = ((page * P + slot) * H + h) * D + d;
          } else {
            ki = (((page * H + h) * (D / X) + d / X) * P + slot) * X + d % X;
            vi = ((page * H + h) * D + d) * P + slot;
          }
          r.k_cache[ki] = r.k[src];
          r.v_cache[vi] = r.v[src];
        }
  r.shape.layout = c.layout;
  r.shape.page_size = P;
  r.shape.num_kv_heads = H;
  r.shape.head_dim = D;
  r.shape.x = X;
  return r;
}

class PagedPrefillReference : public ::testing::TestWithParam<Case> {};

TEST_P(PagedPrefillReference, EqualsDenseOverTheSameKeys) {
  const Case& c = GetParam();
  const Cache kv = make_cache(c, 11);
  const int B = int(c.q_lens.size()), hq = c.num_kv_heads * c.group, D = c.head_dim;
  std::vector<int> cu_q(B + 1, 0);
  for (int b = 0; b < B; ++b) cu_q[b + 1] = cu_q[b] + c.q_lens[b];
  const std::vector<float> q = random_vec(std::size_t(cu_q[B]) * hq * D, 5);
  const float scale = 1.f / std::sqrt(float(D));
  std::vector<float> out(q.size()), lse(std::size_t(hq) * cu_q[B]);
  ref::paged_prefill(q.data(), kv.k_cache.data(), kv.v_cache.data(), kv.shape, kv.block_table.data(), kv.max_blocks,
                     cu_q.data(), c.k_lens.data(), B, hq, scale, c.causal, out.data(), lse.data());
  std::vector<float> d_out(q.size()), d_lse(lse.size());
  ref::prefill(q.data(), kv.k.data(), kv.v.data(), cu_q.data(), kv.cu_k.data(), B, hq, c.num_kv_heads, D, scale,
               c.causal, d_out.data(), d_lse.data());
  EXPECT_EQ(out, d_out);  // the same keys in the same order: bitwise
  EXPECT_EQ(lse, d_lse);
  for (float x : out) ASSERT_TRUE(std::isfinite(x)) << "a NaN slot of the cache was read";
}

const Case kCases[] = {
    {KVLayout::nhd, 16, 64, 2, 4, {1, 7, 16}, {1, 40, 16}, true},
    {KVLayout::vllm, 16, 64, 2, 4, {1, 7, 16}, {1, 40, 16}, true},
    {KVLayout::nhd, 8, 128, 1, 6, {2, 9}, {17, 9}, true},
    {KVLayout::vllm, 8, 128, 1, 6, {2, 9}, {17, 9}, false},
    {KVLayout::nhd, 528, 64, 2, 1, {5, 3}, {600, 527}, true},
    {KVLayout::vllm, 528, 64, 2, 1, {5, 3}, {600, 527}, true},
};

INSTANTIATE_TEST_SUITE_P(Layouts, PagedPrefillReference, ::testing::ValuesIn(kCases), [](const auto& info) {
  const Case& c = info.param;
  return std::string(c.layout == KVLayout::nhd ? "nhd" : "vllm") + "_page" + std::to_string(c.page_size) + "_hd" +
         std::to_string(c.head_dim) + "_g" + std::to_string(c.group) + (c.causal ? "_causal" : "");
});

// Chunked prefill: one sequence of L tokens run as chunks [s, e), each a paged call with its
// e − s queries over keys 0 .. e − 1 (the cached prefix and its own tokens), equals one causal
// prefill of the whole sequence, row for row (bitwise: the same keys in the same order).
TEST(PagedPrefillReference, ChunkedEqualsWhole) {
  for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm}) {
    const int L = 300, hq = 6, H = 1, D = 64;
    const Case whole{layout, 16, D, H, hq / H, {L}, {L}, true};
    const Cache kv = make_cache(whole, 3);
    const std::vector<float> q = random_vec(std::size_t(L) * hq * D, 9);
    const float scale = 1.f / std::sqrt(float(D));
    std::vector<float> ref_out(q.size()), ref_lse(std::size_t(hq) * L);
    const int cu[2] = {0, L};
    ref::prefill(q.data(), kv.k.data(), kv.v.data(), cu, cu, 1, hq, H, D, scale, true, ref_out.data(), ref_lse.data());
    const int bounds[] = {0, 1, 3, 10, 16, 17, 128, 299, 300};
    for (int i = 0; i + 1 < int(std::size(bounds)); ++i) {
      const int s = bounds[i], e = bounds[i + 1], n = e - s;
      const int cu_q[2] = {0, n}, used[1] = {e};
      std::vector<float> out(std::size_t(n) * hq * D), lse(std::size_t(hq) * n);
      ref::paged_prefill(q.data() + std::size_t(s) * hq * D, kv.k_cache.data(), kv.v_cache.data(), kv.shape,
                         kv.block_table.data(), kv.max_blocks, cu_q, used, 1, hq, scale, true, out.data(), lse.data());
      for (std::size_t j = 0; j < out.size(); ++j)
        ASSERT_EQ(out[j], ref_out[std::size_t(s) * hq * D + j]) << "chunk [" << s << ", " << e << ") element " << j;
      for (int h = 0; h < hq; ++h)
        for (int r = 0; r < n; ++r)
          ASSERT_EQ(lse[std::size_t(h) * n + r], ref_lse[std::size_t(h) * L + s + r]) << "chunk " << s << " head " << h;
    }
  }
}

// ---- Selection and plan -------------------------------------------------------------------------

alignas(64) unsigned char g_fake[1024];

PrefillParams good_paged(KVLayout layout = KVLayout::nhd) {
  return cpu_test::paged_call(g_fake, layout, kCompiledInstances[0].dtype, kCompiledInstances[0].head_dim);
}

// On Hopper the sm90 agent reads paged NHD K/V and vLLM's layout with pages of a multiple of 16
// slots (TMA boxes of pages); vLLM pages of 8 walk on to the sm80 agent's row of sm_90, the trace
// saying why.
TEST(PagedPrefillSelection, HopperAgentReadsNhdAndVllmPagesOf16kAndPagesOf8WalkOn) {
  for (DType t : {DType::fp16, DType::bf16}) {
    const PrefillSelection nhd =
        choose_prefill(presets::h200, t, 128, SelectOptions{-1, KVSource::paged_nhd}, kKnownTargets);
    EXPECT_EQ(nhd.target, kTargetSm90a);
    EXPECT_EQ(nhd.policy.agent, Agent::sm90);
    EXPECT_EQ(nhd.passed_count, 0);
    for (const int page : {16, 32, 528}) {
      SelectOptions so{-1, KVSource::paged_vllm};
      so.page_size = page;
      const PrefillSelection vllm = choose_prefill(presets::h200, t, 128, so, kKnownTargets);
      EXPECT_EQ(vllm.target, kTargetSm90a) << "page " << page;
      EXPECT_EQ(vllm.policy.agent, Agent::sm90);
      EXPECT_EQ(vllm.passed_count, 0);
    }
    SelectOptions so8{-1, KVSource::paged_vllm};
    so8.page_size = 8;
    const PrefillSelection vllm = choose_prefill(presets::h200, t, 128, so8, kKnownTargets);
    EXPECT_EQ(vllm.target, 90);
    EXPECT_EQ(vllm.policy.agent, Agent::sm80);
    ASSERT_EQ(vllm.passed_count, 1);
    EXPECT_EQ(vllm.passed[0].target, kTargetSm90a);
    EXPECT_EQ(vllm.passed[0].why, Pass::kv_source);
    EXPECT_NE(describe(vllm).find("paged vLLM-layout K/V of 8-slot pages"), std::string::npos) << describe(vllm);
    // NHD pages of 8 are the sm90 agent's (boxes of 8 rows).
    SelectOptions nhd8{-1, KVSource::paged_nhd};
    nhd8.page_size = 8;
    EXPECT_EQ(choose_prefill(presets::h200, t, 128, nhd8, kKnownTargets).policy.agent, Agent::sm90);
    // hd 96 has no sm_90a row of its own: sm_90's, for either layout, with nothing passed.
    for (KVSource src : {KVSource::paged_nhd, KVSource::paged_vllm}) {
      const PrefillSelection s96 = choose_prefill(presets::h200, t, 96, SelectOptions{-1, src}, kKnownTargets);
      EXPECT_EQ(s96.target, 90);
      EXPECT_EQ(s96.policy.agent, Agent::sm80);
    }
  }
}

TEST(PagedPrefillSelection, VllmLayoutWalksPastTheSm75AgentAndSaysWhy) {
  // The T4 (sm_75, fp16): its own row is the sm75 agent's, which reads contiguous and paged NHD
  // K/V only; a paged-vLLM call walks on to the portable row, the trace saying why.
  const PrefillSelection nhd = choose_prefill(presets::t4, DType::fp16, 128, SelectOptions{-1, KVSource::paged_nhd}, kKnownTargets);
  ASSERT_EQ(nhd.target, 75);
  ASSERT_EQ(nhd.policy.agent, Agent::sm75);
  const PrefillSelection vllm =
      choose_prefill(presets::t4, DType::fp16, 128, SelectOptions{-1, KVSource::paged_vllm}, kKnownTargets);
  EXPECT_EQ(vllm.target, 0);
  EXPECT_EQ(vllm.policy.agent, Agent::portable);
  ASSERT_EQ(vllm.passed_count, 1);
  EXPECT_EQ(vllm.passed[0].target, 75);
  EXPECT_EQ(vllm.passed[0].why, Pass::kv_source);
  EXPECT_NE(describe(vllm).find("paged vLLM"), std::string::npos) << describe(vllm);
  // Forced onto the sm75 row it has no row (and says why) rather than another row.
  const PrefillSelection forced =
      choose_prefill(presets::h200, DType::fp16, 128, SelectOptions{75, KVSource::paged_vllm}, kKnownTargets);
  EXPECT_EQ(forced.error, NoRow::forced_does_not_fit);
  EXPECT_NE(describe(forced).find("paged vLLM"), std::string::npos) << describe(forced);
  // Contiguous calls are unchanged.
  EXPECT_EQ(choose_prefill(presets::t4, DType::fp16, 128, SelectOptions{}, kKnownTargets).target, 75);
}

TEST(PagedPrefillPlan, NeverSplitsAndKeepsTheShape) {
  PrefillParams p = good_paged();
  // A shape the contiguous plan splits (non-causal, equal lengths, many tiles).
  p.causal = false;
  cpu_test::make_long(&p);
  PrefillPlan plan;
  ASSERT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{}, &plan).ok());
  EXPECT_FALSE(plan.split.split());
  // (Only the sm90 agent's persistent schedule's counter, where sm_90a is compiled: 1024 q tiles.)
  EXPECT_EQ(plan.workspace_bytes, plan.persistent.on() ? 16u : 0u);
  EXPECT_EQ(plan.persistent.on(), plan.policy.agent == Agent::sm90);
  EXPECT_TRUE(plan.shape == static_cast<const PrefillShape&>(p));
  PrefillShape other = p;
  other.page_size = 32;
  EXPECT_FALSE(plan.shape == other);  // a plan is for one page size
  other = p;
  other.kv_source = KVSource::paged_vllm;
  EXPECT_FALSE(plan.shape == other);
}

TEST(PagedPrefillPlan, TheContiguousShapeIgnoresThePagedFields) {
  PrefillShape a, b;
  b.page_size = 16;
  b.num_pages = 3;
  EXPECT_TRUE(a == b);  // unread for contiguous K/V
}

// ---- Bad input ----------------------------------------------------------------------------------

struct Bad {
  const char* name;
  void (*mutate)(PrefillParams&);
  const char* says;
};

const Bad kBad[] = {
    {"page_size_0", [](PrefillParams& p) { p.page_size = 0; }, "page_size 0"},
    {"page_size_negative", [](PrefillParams& p) { p.page_size = -16; }, "page_size -16"},
    {"page_size_not_16_bytes", [](PrefillParams& p) { p.page_size = 13; }, "multiple of"},
    {"num_pages_0", [](PrefillParams& p) { p.num_pages = 0; }, "num_pages"},
    {"max_blocks_0", [](PrefillParams& p) { p.max_blocks_per_seq = 0; }, "max_blocks_per_seq"},
    {"max_seqlen_k_past_the_block_table", [](PrefillParams& p) { p.max_seqlen_k = 8 * 16 + 1; }, "block table covers"},
    {"q_longer_than_kv", [](PrefillParams& p) { p.max_seqlen_q = 6; p.max_seqlen_k = 5; }, "exceeds max_seqlen_k"},
    {"total_k_set", [](PrefillParams& p) { p.total_k = 8; }, "total_k must be 0"},
    {"bad_source", [](PrefillParams& p) { p.kv_source = static_cast<KVSource>(7); }, "kv_source 7"},
    {"head_dim_80", [](PrefillParams& p) { p.head_dim = 80; }, "head_dim 80"},
    {"gqa_not_a_multiple", [](PrefillParams& p) { p.num_kv_heads = 4; }, "multiple of num_kv_heads"},
};

TEST(PagedPrefillBadInput, ShapeErrorsAreClearBeforeAnyLaunch) {
  for (const Bad& c : kBad) {
    for (KVLayout layout : {KVLayout::nhd, KVLayout::vllm}) {
      PrefillParams p = good_paged(layout);
      c.mutate(p);
      PrefillPlan plan;
      const Status planned = plan_prefill(p, presets::h200, PrefillPlanOptions{}, &plan);
      EXPECT_EQ(planned.code(), StatusCode::invalid_argument) << c.name;
      EXPECT_NE(planned.message().find(c.says), std::string::npos) << c.name << ": " << planned.message();
      const Status run = prefill(p);
      EXPECT_EQ(run.code(), StatusCode::invalid_argument) << c.name << ": " << run.message();
    }
  }
}

// Not causal, a chunk may be longer than the paged keys it sees: context_attention_fwd's prefix
// part (the chunk's queries against a shorter cached prefix, merged with the chunk's own causal
// attention by LSE). Only the causal bottom-right call needs its keys to include its queries.
TEST(PagedPrefillShape, QueriesLongerThanKeysArePlannedWhenNotCausal) {
  PrefillParams p = good_paged(KVLayout::vllm);
  p.causal = false;
  p.max_seqlen_q = 6;
  p.max_seqlen_k = 5;
  p.total_q = 8;
  PrefillPlan plan;
  EXPECT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{}, &plan).ok());
  p.causal = true;
  EXPECT_EQ(plan_prefill(p, presets::h200, PrefillPlanOptions{}, &plan).code(), StatusCode::invalid_argument);
}

TEST(PagedPrefillBadInput, NullAndMisalignedPointers) {
  using Mut = void (*)(PrefillParams&);
  const Mut muts[] = {
      [](PrefillParams& p) { p.k_cache = nullptr; },     [](PrefillParams& p) { p.v_cache = nullptr; },
      [](PrefillParams& p) { p.block_table = nullptr; }, [](PrefillParams& p) { p.seqused_k = nullptr; },
      [](PrefillParams& p) { p.cu_seqlens_q = nullptr; }, [](PrefillParams& p) { p.q = nullptr; },
      [](PrefillParams& p) { p.k_cache = g_fake + 8; },  [](PrefillParams& p) { p.seqused_k = reinterpret_cast<const int*>(g_fake + 2); },
  };
  for (Mut m : muts) {
    PrefillParams p = good_paged();
    m(p);
    const Status s = detail::check_prefill_call(p);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
    EXPECT_EQ(prefill(p).code(), StatusCode::invalid_argument);
  }
  // k, v and cu_seqlens_k are not read by a paged call: null is fine.
  EXPECT_TRUE(detail::check_prefill_call(good_paged()).ok()) << detail::check_prefill_call(good_paged()).message();
}

TEST(PagedPrefillBadInput, CAbiSaysWhy) {
  const PrefillParams p = good_paged();
  auto call = [&](int dtype, int layout, int page_size, int max_seqlen_k) {
    return muh_paged_prefill(dtype, layout, p.q, p.k_cache, p.v_cache, p.out, p.lse, p.cu_seqlens_q, p.block_table,
                             p.seqused_k, p.batch, p.total_q, p.max_seqlen_q, max_seqlen_k, p.num_q_heads,
                             p.num_kv_heads, p.head_dim, page_size, p.num_pages, p.max_blocks_per_seq, 0.f, 1, nullptr,
                             0, -1, 0, nullptr);
  };
  const int dt = static_cast<int>(p.dtype);
  EXPECT_NE(call(dt, 5, 16, 100), 0);
  EXPECT_NE(std::string(muh_last_error()).find("layout 5"), std::string::npos) << muh_last_error();
  EXPECT_NE(call(9, MUH_KV_NHD, 16, 100), 0);
  EXPECT_NE(std::string(muh_last_error()).find("dtype 9"), std::string::npos) << muh_last_error();
  EXPECT_NE(call(dt, MUH_KV_VLLM, 0, 100), 0);
  EXPECT_NE(std::string(muh_last_error()).find("page_size"), std::string::npos) << muh_last_error();
  EXPECT_NE(call(dt, MUH_KV_NHD, 16, 1000), 0);
  EXPECT_NE(std::string(muh_last_error()).find("block table covers"), std::string::npos) << muh_last_error();
  // 528 is a valid page size (not a power of two): the shape passes; without a GPU the call may
  // then stop at the device, but never at the page size.
  size_t ws = 7;
  PrefillParams q528 = p;
  q528.page_size = 528;
  q528.max_blocks_per_seq = 1;
  EXPECT_TRUE(detail::check_prefill_shape(q528, "prefill: ").ok()) << detail::check_prefill_shape(q528, "").message();
  if (muh_paged_prefill_workspace_size(dt, MUH_KV_NHD, p.batch, p.total_q, p.max_seqlen_q, p.max_seqlen_k,
                                       p.num_q_heads, p.num_kv_heads, p.head_dim, 528, 1, 1, 1, -1, nullptr, &ws) != 0)
    EXPECT_EQ(std::string(muh_last_error()).find("page_size"), std::string::npos) << muh_last_error();
  EXPECT_EQ(ws, 0u);
  EXPECT_NE(muh_paged_prefill_workspace_size(dt, MUH_KV_NHD, p.batch, p.total_q, p.max_seqlen_q, p.max_seqlen_k,
                                             p.num_q_heads, p.num_kv_heads, p.head_dim, 16, 1, 1, 1, -1, nullptr, &ws),
            0);  // 100 keys > 1 block of 16
  EXPECT_NE(std::string(muh_last_error()).find("block table covers"), std::string::npos) << muh_last_error();
}

// muh_paged_prefill_quant() and muh_paged_prefill_workspace_size_quant(): the cache's element type
// and scales are checked with the shape, before any CUDA call (the fake pointers are never read).
TEST(PagedPrefillBadInput, CAbiQuantSaysWhy) {
  const PrefillParams p = good_paged();
  auto call = [&](int dtype, int layout, int page_size, int max_blocks, const muh_variant* variant,
                  const muh_kv_quant* kv) {
    return muh_paged_prefill_quant(dtype, layout, p.q, p.k_cache, p.v_cache, p.out, p.lse, p.cu_seqlens_q,
                                   p.block_table, p.seqused_k, p.batch, p.total_q, p.max_seqlen_q, p.max_seqlen_k,
                                   p.num_q_heads, p.num_kv_heads, p.head_dim, page_size, p.num_pages, max_blocks, 0.f,
                                   1, nullptr, 0, -1, 0, nullptr, variant, kv);
  };
  auto says = [](const char* what) { return std::string(muh_last_error()).find(what) != std::string::npos; };
  const int dt = p.dtype == DType::fp32 ? MUH_FP16 : static_cast<int>(p.dtype);  // a 16-bit q
  muh_kv_quant kv = MUH_KV_QUANT_AUTO;
  kv.kv_dtype = 7;
  EXPECT_EQ(call(dt, MUH_KV_NHD, 16, 8, nullptr, &kv), MUH_INVALID_ARGUMENT);
  EXPECT_TRUE(says("kv.kv_dtype 7")) << muh_last_error();
  EXPECT_TRUE(says("muh_paged_prefill_quant")) << muh_last_error();
  kv.kv_dtype = -1;
  EXPECT_EQ(call(dt, MUH_KV_NHD, 16, 8, nullptr, &kv), MUH_INVALID_ARGUMENT);
  for (int t : {MUH_KV_FP8_E4M3, MUH_KV_FP8_E5M2}) {
    kv = MUH_KV_QUANT_AUTO;
    kv.kv_dtype = t;
    kv.k_scale = 0.f;
    EXPECT_EQ(call(dt, MUH_KV_NHD, 16, 8, nullptr, &kv), MUH_INVALID_ARGUMENT) << t;
    EXPECT_TRUE(says("k_scale")) << muh_last_error();
    kv.k_scale = 1.f;
    kv.v_scale = std::numeric_limits<float>::infinity();
    EXPECT_EQ(call(dt, MUH_KV_VLLM, 16, 8, nullptr, &kv), MUH_INVALID_ARGUMENT) << t;
    EXPECT_TRUE(says("v_scale")) << muh_last_error();
    kv.v_scale = 2.f;
    EXPECT_EQ(call(MUH_FP32, MUH_KV_NHD, 16, 8, nullptr, &kv), MUH_INVALID_ARGUMENT) << t;
    EXPECT_TRUE(says("fp32")) << muh_last_error();
    // 8 slots a page is a valid 16-bit vLLM page (16 bytes of fp16), not an fp8 one (16 codes).
    EXPECT_EQ(call(dt, MUH_KV_VLLM, 8, 16, nullptr, &kv), MUH_INVALID_ARGUMENT) << t;
    EXPECT_TRUE(says("multiple of 16")) << muh_last_error();
    // A variant over an fp8 cache is checked like any other (a bad value: a clear Status); a valid
    // one passes the checks (checked without a call: the fake pointers must not reach a GPU).
    muh_variant v = MUH_VARIANT_NONE;
    v.softcap = -30.f;
    EXPECT_EQ(call(dt, MUH_KV_NHD, 16, 8, &v, &kv), MUH_INVALID_ARGUMENT) << t;
    EXPECT_TRUE(says("softcap")) << muh_last_error();
    PrefillParams fp8 = p;
    fp8.dtype = static_cast<DType>(dt);
    fp8.kv = KVQuant{static_cast<KVDType>(t), 1.f, 2.f};
    fp8.variant.softcap = 30.f;
    fp8.variant.window_left = 64;
    EXPECT_TRUE(detail::check_prefill_shape(fp8, "prefill: ").ok()) << detail::check_prefill_shape(fp8, "").message();
  }
  // The ABI's own checks come first, kv or not (null kv: MUH_KV_QUANT_AUTO).
  EXPECT_EQ(call(dt, 5, 16, 8, nullptr, &kv), MUH_INVALID_ARGUMENT);
  EXPECT_TRUE(says("layout 5")) << muh_last_error();
  EXPECT_EQ(call(dt, 5, 16, 8, nullptr, nullptr), MUH_INVALID_ARGUMENT);
  EXPECT_TRUE(says("layout 5")) << muh_last_error();
  // A cache of q's type reads no scale: MUH_KV_QUANT_AUTO with a k_scale of 0 passes the checks.
  PrefillParams same = p;
  same.kv.k_scale = 0.f;
  EXPECT_TRUE(detail::check_prefill_shape(same, "prefill: ").ok()) << detail::check_prefill_shape(same, "").message();

  auto size = [&](int dtype, int layout, int page_size, int max_blocks, int kv_dtype, size_t* ws) {
    return muh_paged_prefill_workspace_size_quant(dtype, layout, p.batch, p.total_q, p.max_seqlen_q, p.max_seqlen_k,
                                                  p.num_q_heads, p.num_kv_heads, p.head_dim, page_size, p.num_pages,
                                                  max_blocks, 0, -1, nullptr, ws, kv_dtype);
  };
  size_t ws = 7;
  EXPECT_EQ(size(dt, MUH_KV_NHD, 16, 8, 3, &ws), MUH_INVALID_ARGUMENT);
  EXPECT_TRUE(says("kv_dtype 3")) << muh_last_error();
  EXPECT_TRUE(says("muh_paged_prefill_workspace_size_quant")) << muh_last_error();
  EXPECT_EQ(ws, 0u);
  EXPECT_EQ(size(MUH_FP32, MUH_KV_NHD, 16, 8, MUH_KV_FP8_E4M3, &ws), MUH_INVALID_ARGUMENT);
  EXPECT_TRUE(says("fp32")) << muh_last_error();
  EXPECT_EQ(size(dt, MUH_KV_VLLM, 8, 16, MUH_KV_FP8_E5M2, &ws), MUH_INVALID_ARGUMENT);
  EXPECT_TRUE(says("multiple of 16")) << muh_last_error();
  EXPECT_EQ(size(dt, MUH_KV_NHD, 16, 8, MUH_KV_FP8_E4M3, nullptr), MUH_INVALID_ARGUMENT);
  EXPECT_TRUE(says("workspace_bytes")) << muh_last_error();
  // A good fp8 shape passes every check; without a GPU (or without the instance) the call may then
  // stop at the device or the build, never at the cache type.
  if (size(dt, MUH_KV_VLLM, 16, 8, MUH_KV_FP8_E4M3, &ws) != MUH_OK) {
    EXPECT_FALSE(says("kv_dtype")) << muh_last_error();
    EXPECT_FALSE(says("multiple of 16")) << muh_last_error();
  }
}

// The debug_checks' checks of the device tables, on host copies (prefill() runs them after a
// device→host copy; without a GPU they are reached only here).
TEST(PagedPrefillBadInput, DebugChecksOfTheTables) {
  PrefillParams p = good_paged();  // batch 2, total_q 8, max_seqlen_q 5, max_seqlen_k 100, page 16, 64 pages, 8 blocks
  std::vector<int> cq = {0, 3, 8}, used = {40, 100};
  std::vector<int> bt(16);
  std::iota(bt.begin(), bt.end(), 10);
  auto run = [&] { return detail::check_paged_tables_host(p, cq.data(), used.data(), bt.data()); };
  EXPECT_TRUE(run().ok()) << run().message();
  struct Mut {
    const char* says;
    void (*f)(std::vector<int>&, std::vector<int>&, std::vector<int>&);
  };
  const Mut muts[] = {
      {"block_table[0][1] is 64", [](auto&, auto&, auto& b) { b[1] = 64; }},
      {"block_table[1][6] is -1", [](auto&, auto&, auto& b) { b[8 + 6] = -1; }},
      {"seqused_k[1] is 101", [](auto&, auto& u, auto&) { u[1] = 101; }},
      {"seqused_k[0] is -1", [](auto&, auto& u, auto&) { u[0] = -1; }},
      {"not monotonic at 2", [](auto& c, auto&, auto&) { c = {0, 5, 4}; }},
      {"cu_seqlens_q[0] is 1", [](auto& c, auto&, auto&) { c[0] = 1; }},
      {"not total_q 8", [](auto& c, auto&, auto&) { c[2] = 7; }},
      {"above max_seqlen_q", [](auto& c, auto&, auto&) { c = {0, 2, 8}; }},
      {"3 queries but seqused_k 2", [](auto&, auto& u, auto&) { u[0] = 2; }},
  };
  for (const Mut& m : muts) {
    std::vector<int> c0 = cq, u0 = used, b0 = bt;
    m.f(cq, used, bt);
    const Status s = run();
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << m.says;
    EXPECT_NE(s.message().find(m.says), std::string::npos) << m.says << " vs " << s.message();
    cq = c0, used = u0, bt = b0;
  }
  // Blocks past a sequence's last used one are not read: garbage there is fine.
  bt[7] = -5;  // sequence 0 uses 3 blocks (40 keys / 16)
  EXPECT_TRUE(run().ok()) << run().message();
}

}  // namespace
}  // namespace muh
