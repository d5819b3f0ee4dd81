// test_mixed_plan.cpp — plan_mixed() on the host (mixed_plan.hpp): which route a batch mix takes
// and why, the two parts' shapes and pointer offsets (the decodes-first contract: prefixes and
// suffixes, no copies), the workspace layout, the CUDA-graph plan's fixed parts, and the bad
// inputs that fail before any launch. Every mix runs at GQA 1, 4, 6 and 8 on the 16-SM (bi-v100)
// and 132-SM (H200) profiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/mixed_plan.hpp"
#include "muh/muh.h"

namespace muh {
namespace {

constexpr int kPage = 16;

// A batch as an engine has it on the host: q lengths (new tokens) and kv lengths (prefix + new).
struct Batch {
  std::vector<int> q, kv;
  std::vector<int> cu, used;
  PrefillParams p;
};

// Device pointers the plan and the checks see but never dereference (16-byte aligned).
void* fake(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

Batch make_batch(std::vector<int> q, std::vector<int> kv, int hq, int hkv, DType t = DType::bf16, int hd = 128,
                 KVLayout layout = KVLayout::vllm) {
  Batch b;
  b.q = std::move(q);
  b.kv = std::move(kv);
  b.cu.assign(1, 0);
  for (int x : b.q) b.cu.push_back(b.cu.back() + x);
  b.used = b.kv;
  PrefillParams s;
  s.dtype = t;
  s.batch = int(b.q.size());
  s.total_q = b.cu.back();
  s.max_seqlen_q = b.q.empty() ? 0 : *std::max_element(b.q.begin(), b.q.end());
  s.max_seqlen_k = b.kv.empty() ? 0 : *std::max_element(b.kv.begin(), b.kv.end());
  s.num_q_heads = hq;
  s.num_kv_heads = hkv;
  s.head_dim = hd;
  s.causal = true;
  s.q = fake(0x100000);
  s.out = fake(0x200000);
  s.cu_seqlens_q = static_cast<const int*>(fake(0x300000));
  const int max_blocks = std::max(1, (s.max_seqlen_k + kPage - 1) / kPage);
  b.p = make_paged_prefill(s, layout, fake(0x400000), fake(0x500000), static_cast<const int*>(fake(0x600000)),
                           static_cast<const int*>(fake(0x700000)), kPage, s.batch * max_blocks + 1, max_blocks);
  return b;
}

std::vector<int> rep(int n, int v) { return std::vector<int>(std::size_t(n), v); }
std::vector<int> cat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- Batch mixes × GQA × profiles ----------------------------------------------------------------

enum class Want { split, single, either };

struct Mix {
  const char* name;
  std::vector<int> q, kv;
  Want want;            // the route expected on both profiles
  const char* why;      // a word the reason must contain (single), or ""
};

const std::vector<Mix>& mixes() {
  static const std::vector<Mix> m = {
      {"all_decodes", rep(64, 1), rep(64, 8192), Want::split, ""},
      {"all_prefills", rep(4, 512), rep(4, 1536), Want::single, "no decode rows"},
      {"decodes_first_serving", cat(rep(63, 1), {2048}), cat(rep(63, 8192), {16384 + 2048}), Want::split, ""},
      {"decodes_interleaved", {1, 2048, 1, 1}, {8192, 4096, 8192, 8192}, Want::single, "not a prefix"},
      {"decode_after_prefill", {300, 1}, {300, 8192}, Want::single, "not a prefix"},
      {"one_decode", {1}, {8192}, Want::either, ""},
      {"one_chunk", {2048}, {4096}, Want::single, "no decode rows"},
      {"empty_rows", {1, 1, 0, 7, 0}, {4096, 4095, 100, 7, 0}, Want::either, ""},
      // Expanded, one decode row per token (256 here): split where GQA shares the keys (the
      // model keeps MHA in one launch: each token's row then streams all of its keys).
      {"verification_rows", rep(64, 4), rep(64, 8192), Want::either, ""},
      {"decodes_and_verification", cat(rep(16, 1), rep(16, 5)), rep(32, 8192), Want::either, ""},
      {"verification_then_chunk", cat(rep(8, 3), {2048}), cat(rep(8, 8192), {4096}), Want::either, ""},
      {"short_then_decode", {4, 1, 300}, {8192, 8192, 300}, Want::either, ""},
      {"decodes_then_short", cat(rep(8, 1), {2, 7, 16}), cat(rep(8, 4096), {4096, 15, 16}), Want::either, ""},
      {"tiny_decode_kv", {1, 300}, {5, 300}, Want::either, ""},  // one launch on the H200 (ForcedRoutes)
      {"page_edges", {1, 1, 1, 511}, {1, kPage - 1, kPage * 50, 511 + kPage}, Want::either, ""},
  };
  return m;
}

struct Gqa {
  int hq, hkv;
};
constexpr Gqa kGqas[] = {{8, 8}, {32, 8}, {24, 4}, {64, 8}};  // group 1, 4, 6, 8

struct MixParam {
  int mix;
  Gqa gqa;
  bool h200;
};

std::string mix_param_name(const testing::TestParamInfo<MixParam>& i) {
  return std::string(mixes()[i.param.mix].name) + "_g" + std::to_string(i.param.gqa.hq / i.param.gqa.hkv) +
         (i.param.h200 ? "_h200" : "_16sm");
}

std::vector<MixParam> all_mix_params() {
  std::vector<MixParam> v;
  for (int m = 0; m < int(mixes().size()); ++m)
    for (Gqa g : kGqas)
      for (bool h : {false, true}) v.push_back({m, g, h});
  return v;
}

// The leading rows of q_len 1, and of q_len 1 to kMixedShortRowMaxQ (decodes and short rows).
int lead_of(const Batch& b, int max_q) {
  int lead = 0;
  while (lead < b.p.batch && b.q[lead] >= 1 && b.q[lead] <= max_q) ++lead;
  return lead;
}

// The invariants of a split plan of batch b: the decode prefix (the q_len-1 rows, or with short
// rows expanded the decode-like rows, one decode row per token) and the suffix, exactly the batch
// between them; the parts' views of the call's tensors; the workspace layout.
void check_split(const Batch& b, const MixedPlan& plan) {
  const int lead = lead_of(b, 1), lead_short = lead_of(b, kMixedShortRowMaxQ);
  ASSERT_TRUE(plan.num_decodes == lead || plan.num_decodes == lead_short) << plan.num_decodes;
  const int nd = plan.num_decodes, tokens = b.cu[nd];
  EXPECT_EQ(plan.decode_tokens, tokens);
  EXPECT_EQ(plan.expand(), tokens != nd);
  EXPECT_EQ(plan.num_decodes + plan.num_prefills, b.p.batch);
  EXPECT_EQ(plan.decode_tokens + plan.prefill_tokens, b.p.total_q);
  EXPECT_EQ(plan.decode_max_kv, *std::max_element(b.kv.begin(), b.kv.begin() + nd));
  EXPECT_TRUE(plan.has_decode());
  EXPECT_EQ(plan.decode.num_seqs, tokens);
  EXPECT_EQ(plan.decode.max_seq_len, plan.decode_max_kv);
  EXPECT_FALSE(plan.decode.cuda_graph);
  const bool rows_after = b.cu.back() > tokens;
  EXPECT_EQ(plan.has_prefill(), rows_after);
  EXPECT_EQ(plan.rebase, rows_after);
  const DecodeParams d = mixed_decode_part(b.p, plan);
  EXPECT_EQ(d.q, b.p.q);
  EXPECT_EQ(d.out, b.p.out);
  EXPECT_EQ(d.num_seqs, tokens);
  if (plan.expand()) {
    // Lengths and block-table rows of the tokens: the workspace's (none given here: null).
    EXPECT_EQ(d.block_table, nullptr);
    EXPECT_EQ(d.seq_lens, nullptr);
    unsigned char* ws = static_cast<unsigned char*>(fake(0x900000));
    const DecodeParams dw = mixed_decode_part(b.p, plan, ws);
    EXPECT_EQ(reinterpret_cast<const unsigned char*>(dw.seq_lens), ws + plan.lens_offset);
    EXPECT_EQ(reinterpret_cast<const unsigned char*>(dw.block_table), ws + plan.table_offset);
    EXPECT_EQ(dw.max_blocks_per_seq, b.p.max_blocks_per_seq);
  } else {
    EXPECT_EQ(d.block_table, b.p.block_table);
    EXPECT_EQ(d.seq_lens, b.p.seqused_k);
  }
  EXPECT_EQ(d.layout, KVLayout::vllm);
  EXPECT_EQ(d.lse, nullptr);
  const int* cu_dev = static_cast<const int*>(fake(0x800000));
  const PrefillParams pp = mixed_prefill_part(b.p, plan, cu_dev);
  const std::ptrdiff_t row = std::ptrdiff_t(b.p.num_q_heads) * b.p.head_dim * 2;  // bf16
  EXPECT_EQ(static_cast<const char*>(pp.q) - static_cast<const char*>(b.p.q), tokens * row);
  EXPECT_EQ(static_cast<char*>(pp.out) - static_cast<char*>(b.p.out), tokens * row);
  EXPECT_EQ(pp.block_table - b.p.block_table, std::ptrdiff_t(nd) * b.p.max_blocks_per_seq);
  EXPECT_EQ(pp.seqused_k - b.p.seqused_k, nd);
  EXPECT_EQ(pp.cu_seqlens_q, cu_dev);
  EXPECT_EQ(pp.max_seqlen_k, b.p.max_seqlen_k);  // the kernels' guard bounds seqused_k by it
  if (plan.has_prefill()) {
    EXPECT_TRUE(plan.prefill.shape == static_cast<const PrefillShape&>(pp));
    EXPECT_EQ(pp.max_seqlen_q, *std::max_element(b.q.begin() + nd, b.q.end()));
  }
  EXPECT_EQ(plan.cu_offset % 16, 0u);
  EXPECT_GE(plan.cu_offset, plan.decode.workspace_bytes);
  EXPECT_LT(plan.cu_offset, plan.decode.workspace_bytes + 16);
  std::size_t end = plan.cu_offset;
  if (plan.rebase) {
    end += sizeof(int) * (plan.num_prefills + 1);
    EXPECT_GE(plan.workspace_bytes, end);
  }
  if (plan.expand()) {  // after the offsets, each 16-byte aligned, none overlapping
    EXPECT_EQ(plan.lens_offset % 16, 0u);
    EXPECT_EQ(plan.table_offset % 16, 0u);
    EXPECT_GE(plan.lens_offset, end);
    EXPECT_GE(plan.table_offset, plan.lens_offset + sizeof(int) * tokens);
    EXPECT_GE(plan.workspace_bytes, plan.table_offset + sizeof(int) * std::size_t(tokens) * b.p.max_blocks_per_seq);
    EXPECT_NE(describe(plan).find("one decode row each"), std::string::npos);
  }
  EXPECT_EQ(plan.workspace_bytes % 16, 0u);
}

class MixedPlanMix : public testing::TestWithParam<MixParam> {};

TEST_P(MixedPlanMix, RouteAndPartsFollowTheBatch) {
  const Mix& mix = mixes()[GetParam().mix];
  const HardwareCapability hw = GetParam().h200 ? presets::h200 : presets::bi_v100;
  const Batch b = make_batch(mix.q, mix.kv, GetParam().gqa.hq, GetParam().gqa.hkv);
  MixedPlan plan;
  const Status s = plan_mixed(b.p, b.cu.data(), b.used.data(), hw, MixedPlanOptions{}, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string text = describe(plan);
  SCOPED_TRACE(text);
  EXPECT_NE(text.find(mixed_route_name(plan.route)), std::string::npos);
  EXPECT_FALSE(plan.reason.empty());
  EXPECT_TRUE(plan.shape == static_cast<const PrefillShape&>(b.p));
  if (mix.want == Want::split) {
    EXPECT_EQ(plan.route, MixedRoute::split);
  }
  if (mix.want == Want::single) {
    EXPECT_EQ(plan.route, MixedRoute::single);
    EXPECT_NE(plan.reason.find(mix.why), std::string::npos);
  }
  // The rows as counted on the host.
  EXPECT_EQ(plan.rows_decode, int(std::count(b.q.begin(), b.q.end(), 1)));
  EXPECT_EQ(plan.rows_empty, int(std::count(b.q.begin(), b.q.end(), 0)));
  EXPECT_EQ(plan.rows_decode + plan.rows_short + plan.rows_long + plan.rows_empty, b.p.batch);

  if (plan.route == MixedRoute::single) {
    // One launch over the whole batch: the prefill plan of the call's own shape, no workspace.
    EXPECT_TRUE(plan.prefill.shape == static_cast<const PrefillShape&>(b.p));
    EXPECT_EQ(plan.workspace_bytes, 0u);
    EXPECT_FALSE(plan.has_decode());
    EXPECT_TRUE(plan.has_prefill());
  } else {
    EXPECT_GT(plan.est_rows_in_prefill, plan.est_rows_as_decode);  // the model chose it
    check_split(b, plan);
  }
  // Forced, every batch whose decode-like rows lead splits, as many rows as it can in the decode
  // part (and the parts are the same views); the others are refused with the reason.
  const int lead_short = lead_of(b, kMixedShortRowMaxQ);
  const bool splittable = lead_short > 0 && std::find(b.q.begin() + lead_short, b.q.end(), 1) == b.q.end();
  MixedPlanOptions forced;
  forced.force_split = 1;
  MixedPlan fp;
  const Status fs = plan_mixed(b.p, b.cu.data(), b.used.data(), hw, forced, &fp);
  if (!splittable) {
    EXPECT_EQ(fs.code(), StatusCode::invalid_argument);
    return;
  }
  ASSERT_TRUE(fs.ok()) << fs.message();
  EXPECT_EQ(fp.route, MixedRoute::split);
  EXPECT_EQ(fp.num_decodes, lead_short);
  SCOPED_TRACE(describe(fp));
  check_split(b, fp);
}

INSTANTIATE_TEST_SUITE_P(Mixes, MixedPlanMix, testing::ValuesIn(all_mix_params()), mix_param_name);

// ---- The decision ------------------------------------------------------------------------------

// The serving cell on the H200: the decode rows' padded tensor-core tiles inside one
// paged-prefill launch cost several times their stream through the decode kernel.
TEST(MixedPlan, ServingCellSplitsByTheModel) {
  const Batch b = make_batch(cat(rep(63, 1), {2048}), cat(rep(63, 8192), {16384 + 2048}), 32, 8);
  MixedPlan plan;
  ASSERT_TRUE(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, {}, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::split);
  EXPECT_EQ(plan.num_decodes, 63);
  EXPECT_EQ(plan.num_prefills, 1);
  EXPECT_EQ(plan.prefill_max_q, 2048);
  EXPECT_GT(plan.est_rows_in_prefill, 2.0 * plan.est_rows_as_decode);
  EXPECT_EQ(plan.decode.target, 90);
  // The chunk (2048 tokens over 16k, vLLM pages of 16): the Hopper agent where it is built.
  EXPECT_EQ(plan.prefill.target, compiled_target_set().contains(kTargetSm90a) ? kTargetSm90a : 90);
}

// The verification cell (64 sequences × 4 tokens at 8k, 32 / 8 heads, bf16 hd 128): no
// q_len-1 row, so before short rows could be expanded it was one paged-prefill launch (0.63× the
// separate decode calls on vLLM pages, bench/results/2026-12-07-prefill-flashinfer). Now the
// decode part: 256 decode rows, each token over its own keys (8189 + t), no prefill part; the
// workspace holds the rows' lengths and block-table rows after the decode partials.
TEST(MixedPlan, VerificationRowsRunAsExpandedDecodeRows) {
  const Batch b = make_batch(rep(64, 4), rep(64, 8192), 32, 8);
  MixedPlan plan;
  ASSERT_TRUE(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, {}, &plan).ok());
  SCOPED_TRACE(describe(plan));
  EXPECT_EQ(plan.route, MixedRoute::split);
  EXPECT_TRUE(plan.expand());
  EXPECT_EQ(plan.num_decodes, 64);
  EXPECT_EQ(plan.decode_tokens, 256);
  EXPECT_EQ(plan.decode.num_seqs, 256);
  EXPECT_EQ(plan.decode.max_seq_len, 8192);
  EXPECT_FALSE(plan.has_prefill());
  EXPECT_FALSE(plan.rebase);
  // The model: 3.3 ms of padded tiles against the decode plan's 1.9 ms for 256 rows read as first
  // reads, of which the part pays (64 + 192 / 3) / 256 = 1/2 (a sequence's repeats mostly from
  // L2: measured 1.98× one 64-row call on the H200, not 4×).
  EXPECT_GT(plan.est_rows_in_prefill, 3.0 * plan.est_rows_as_decode);
  EXPECT_NEAR(plan.est_rows_as_decode, 0.5 * plan.decode.est_seconds, 0.02 * plan.decode.est_seconds);
  EXPECT_EQ(plan.table_offset - plan.lens_offset, 256u * sizeof(int));
  EXPECT_EQ(plan.workspace_bytes, plan.table_offset + std::size_t(256) * b.p.max_blocks_per_seq * sizeof(int));
  // With lse asked, or under a graph plan (whose decode rows are q_len 1), still one launch.
  MixedPlanOptions lse;
  lse.with_lse = true;
  ASSERT_TRUE(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, lse, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::single);
  // Decodes then verification rows: the decode-like rows all go (the larger gain), a chunk after them stays.
  const Batch m = make_batch(cat(cat(rep(16, 1), rep(16, 5)), {2048}), cat(rep(32, 8192), {4096}), 32, 8);
  ASSERT_TRUE(plan_mixed(m.p, m.cu.data(), m.used.data(), presets::h200, {}, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::split);
  EXPECT_EQ(plan.num_decodes, 32);
  EXPECT_EQ(plan.decode_tokens, 16 + 16 * 5);
  EXPECT_EQ(plan.prefill_tokens, 2048);
  EXPECT_TRUE(plan.rebase);
  EXPECT_GE(plan.lens_offset, plan.cu_offset + 2 * sizeof(int));
}

TEST(MixedPlan, ForcedRoutes) {
  const Batch b = make_batch({1, 1, 300}, {5, 9, 300}, 32, 8);  // the model keeps these in one launch
  MixedPlan plan;
  ASSERT_TRUE(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, {}, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::single);
  MixedPlanOptions split;
  split.force_split = 1;
  ASSERT_TRUE(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, split, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::split);
  EXPECT_NE(plan.reason.find("force_split = 1"), std::string::npos);
  const Batch big = make_batch(cat(rep(63, 1), {2048}), cat(rep(63, 8192), {18432}), 32, 8);
  MixedPlanOptions single;
  single.force_split = 0;
  ASSERT_TRUE(plan_mixed(big.p, big.cu.data(), big.used.data(), presets::h200, single, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::single);
}

TEST(MixedPlan, ForcedSplitOfAnInterleavedBatchIsRefused) {
  const Batch b = make_batch({1, 2048, 1}, {8192, 4096, 8192}, 32, 8);
  MixedPlanOptions split;
  split.force_split = 1;
  MixedPlan plan;
  const Status s = plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, split, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("not a prefix"), std::string::npos) << s.message();
}

TEST(MixedPlan, LseAskedPlansOneLaunch) {
  const Batch b = make_batch(cat(rep(63, 1), {2048}), cat(rep(63, 8192), {18432}), 32, 8);
  MixedPlanOptions o;
  o.with_lse = true;
  MixedPlan plan;
  ASSERT_TRUE(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, o, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::single);
  EXPECT_NE(plan.reason.find("lse"), std::string::npos);
}

// Page sizes the paged prefill takes and the decode kernel does not (528: hybrid models' pages)
// keep the batch in one launch.
TEST(MixedPlan, PageTheDecodeKernelCannotReadPlansOneLaunch) {
  Batch b = make_batch(cat(rep(63, 1), {2048}), cat(rep(63, 8192), {18432}), 32, 8, DType::bf16, 128, KVLayout::nhd);
  b.p.page_size = 528;
  b.p.max_blocks_per_seq = (18432 + 527) / 528;
  MixedPlan plan;
  ASSERT_TRUE(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, {}, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::single);
  EXPECT_NE(plan.reason.find("page_size 528"), std::string::npos) << plan.reason;
}

// ---- CUDA graphs: a plan for maxima ---------------------------------------------------------------

PrefillParams graph_maxima(int seqs, int q_tokens, int max_q, int max_kv, int hq = 32, int hkv = 8) {
  PrefillParams s;
  s.dtype = DType::bf16;
  s.batch = seqs;
  s.total_q = q_tokens;
  s.max_seqlen_q = max_q;
  s.max_seqlen_k = max_kv;
  s.num_q_heads = hq;
  s.num_kv_heads = hkv;
  s.head_dim = 128;
  s.causal = true;
  const int blocks = (max_kv + kPage - 1) / kPage;
  return make_paged_prefill(s, KVLayout::vllm, nullptr, nullptr, nullptr, nullptr, kPage, seqs * blocks, blocks);
}

TEST(MixedPlanGraph, FixedPartsComeFromTheMaxima) {
  const PrefillParams p = graph_maxima(64, 63 + 2048, 2048, 16384 + 2048);
  MixedPlanOptions o;
  o.cuda_graph = true;
  o.graph_num_decodes = 63;
  MixedPlan plan;
  ASSERT_TRUE(plan_mixed(p, nullptr, nullptr, presets::h200, o, &plan).ok());
  SCOPED_TRACE(describe(plan));
  EXPECT_EQ(plan.route, MixedRoute::split);
  EXPECT_TRUE(plan.cuda_graph);
  EXPECT_TRUE(plan.rebase);
  EXPECT_EQ(plan.num_decodes, 63);
  EXPECT_EQ(plan.num_prefills, 1);
  EXPECT_EQ(plan.prefill_tokens, 2048);
  // The decode part is plan_decode's cuda_graph plan for the maxima: a capacity.
  EXPECT_TRUE(plan.decode.cuda_graph);
  EXPECT_EQ(plan.decode.num_seqs, 63);
  EXPECT_EQ(plan.decode.max_seq_len, p.max_seqlen_k);
  DecodePlan direct;
  PlanOptions dopt;
  dopt.cuda_graph = true;
  ASSERT_TRUE(plan_decode(mixed_decode_part(p, plan), presets::h200, dopt, &direct).ok());
  EXPECT_EQ(plan.decode.num_splits, direct.num_splits);
  EXPECT_EQ(plan.decode.partition_tokens, direct.partition_tokens);
  EXPECT_EQ(plan.decode.workspace_bytes, direct.workspace_bytes);
  // The prefill part's grid is the maxima's: max_seqlen_q × (batch − nd) × heads.
  EXPECT_EQ(plan.prefill.shape.batch, 1);
  EXPECT_EQ(plan.prefill.shape.total_q, 2048);
  EXPECT_EQ(plan.prefill.shape.max_seqlen_q, 2048);
  EXPECT_EQ(plan.prefill.shape.max_seqlen_k, p.max_seqlen_k);
  EXPECT_GE(plan.workspace_bytes, plan.cu_offset + 2 * sizeof(int));
}

// Host lengths of any replay within the maxima, given to a graph plan, change none of its fixed
// parts: the plan captured once serves every replay.
TEST(MixedPlanGraph, ReplayLengthsChangeNothingFixed) {
  const PrefillParams p = graph_maxima(8, 4 + 64, 64, 4096);
  MixedPlanOptions o;
  o.cuda_graph = true;
  o.graph_num_decodes = 4;
  MixedPlan base;
  ASSERT_TRUE(plan_mixed(p, nullptr, nullptr, presets::h200, o, &base).ok());
  // Replays: decode rows fixed at 4 (a padded one has kv 0); the rest padded to 64 q tokens.
  const std::vector<std::vector<int>> qs = {{1, 1, 1, 1, 60, 2, 1, 1}, {1, 1, 1, 1, 16, 16, 16, 16}, {1, 1, 1, 1, 0, 0, 0, 64}};
  const std::vector<std::vector<int>> kvs = {{4096, 1, 15, 0, 4000, 2, 1, 1}, {17, 33, 4096, 2, 16, 100, 1000, 16}, {0, 0, 0, 0, 0, 0, 0, 64}};
  for (std::size_t r = 0; r < qs.size(); ++r) {
    SCOPED_TRACE("replay " + std::to_string(r));
    std::vector<int> cu(1, 0);
    for (int x : qs[r]) cu.push_back(cu.back() + x);
    ASSERT_EQ(cu.back(), p.total_q);
    MixedPlan with;
    ASSERT_TRUE(plan_mixed(p, cu.data(), kvs[r].data(), presets::h200, o, &with).ok());
    EXPECT_EQ(with.route, base.route);
    EXPECT_EQ(with.num_decodes, base.num_decodes);
    EXPECT_EQ(with.decode.num_splits, base.decode.num_splits);
    EXPECT_EQ(with.decode.max_seq_len, base.decode.max_seq_len);
    EXPECT_TRUE(with.prefill.shape == base.prefill.shape);
    EXPECT_EQ(with.workspace_bytes, base.workspace_bytes);
    EXPECT_EQ(with.cu_offset, base.cu_offset);
  }
}

TEST(MixedPlanGraph, AllDecodesStillGuardTheRows) {
  const PrefillParams p = graph_maxima(32, 32, 1, 8192);
  MixedPlanOptions o;
  o.cuda_graph = true;
  o.graph_num_decodes = 32;
  MixedPlan plan;
  ASSERT_TRUE(plan_mixed(p, nullptr, nullptr, presets::h200, o, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::split);
  EXPECT_FALSE(plan.has_prefill());
  EXPECT_TRUE(plan.rebase);  // the decodes-first guard runs on every replay
  EXPECT_GE(plan.workspace_bytes, plan.cu_offset + sizeof(int));
}

TEST(MixedPlanGraph, NoDecodeRowsIsOneLaunch) {
  const PrefillParams p = graph_maxima(4, 256, 64, 8192);
  MixedPlanOptions o;
  o.cuda_graph = true;
  MixedPlan plan;
  ASSERT_TRUE(plan_mixed(p, nullptr, nullptr, presets::h200, o, &plan).ok());
  EXPECT_EQ(plan.route, MixedRoute::single);
}

TEST(MixedPlanGraph, DecodeRowsOutsideTheBatchOrNotOneTokenAreRefused) {
  const PrefillParams p = graph_maxima(4, 256, 253, 8192);
  MixedPlanOptions o;
  o.cuda_graph = true;
  o.graph_num_decodes = 5;
  MixedPlan plan;
  EXPECT_EQ(plan_mixed(p, nullptr, nullptr, presets::h200, o, &plan).code(), StatusCode::invalid_argument);
  o.graph_num_decodes = 2;
  const std::vector<int> cu = {0, 1, 3, 100, 256}, kv = {10, 10, 100, 200};  // row 1 has 2 tokens
  const Status s = plan_mixed(p, cu.data(), kv.data(), presets::h200, o, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("q_len 1"), std::string::npos) << s.message();
  MixedPlanOptions eager;
  eager.graph_num_decodes = 1;  // only for graph plans
  EXPECT_EQ(plan_mixed(p, cu.data(), kv.data(), presets::h200, eager, &plan).code(), StatusCode::invalid_argument);
}

// ---- Bad inputs: host lengths that disagree with the shape ------------------------------------

struct BadHost {
  const char* name;
  std::vector<int> cu, kv;
  const char* says;
};

class MixedPlanBadHost : public testing::TestWithParam<BadHost> {};

TEST_P(MixedPlanBadHost, IsRefusedWithAClearLine) {
  // The shape: 3 sequences, 10 q tokens, max q 8, max kv 64.
  const Batch b = make_batch({1, 1, 8}, {64, 64, 64}, 32, 8);
  MixedPlan plan;
  const Status s = plan_mixed(b.p, GetParam().cu.data(), GetParam().kv.data(), presets::h200, {}, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find(GetParam().says), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(
    Lengths, MixedPlanBadHost,
    testing::Values(BadHost{"start", {1, 2, 3, 10}, {64, 64, 64}, "cu_seqlens_q_host[0]"},
                    BadHost{"end", {0, 1, 2, 9}, {64, 64, 64}, "not total_q 10"},
                    BadHost{"order", {0, 2, 1, 10}, {64, 64, 64}, "not monotonic"},
                    BadHost{"q_above_max", {0, 1, 1, 10}, {64, 64, 64}, "above max_seqlen_q"},
                    BadHost{"kv_above_max", {0, 1, 2, 10}, {64, 65, 64}, "outside [0, max_seqlen_k"},
                    BadHost{"kv_negative", {0, 1, 2, 10}, {-1, 64, 64}, "outside [0, max_seqlen_k"},
                    BadHost{"q_above_kv", {0, 1, 2, 10}, {64, 64, 7}, "keys include"}),
    [](const testing::TestParamInfo<BadHost>& i) { return std::string(i.param.name); });

TEST(MixedPlanBadInput, ContiguousKvAndMissingHostLengthsAreRefused) {
  Batch b = make_batch({1, 8}, {64, 64}, 32, 8);
  MixedPlan plan;
  EXPECT_EQ(plan_mixed(b.p, nullptr, nullptr, presets::h200, {}, &plan).code(), StatusCode::invalid_argument);
  EXPECT_EQ(plan_mixed(b.p, b.cu.data(), nullptr, presets::h200, {}, &plan).code(), StatusCode::invalid_argument);
  EXPECT_EQ(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, {}, nullptr).code(),
            StatusCode::invalid_argument);
  PrefillParams dense = b.p;
  dense.kv_source = KVSource::contiguous;
  const Status s = plan_mixed(dense, b.cu.data(), b.used.data(), presets::h200, {}, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("paged"), std::string::npos);
  MixedPlanOptions o;
  o.force_split = 2;
  EXPECT_EQ(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, o, &plan).code(), StatusCode::invalid_argument);
}

// paged_attention() refuses, before it touches the device, a call its plan does not fit. (fp16 hd
// 128: compiled in every build, the lean one included.)
TEST(MixedPlanBadInput, RunRefusesACallThePlanDoesNotFit) {
  const Batch b = make_batch(cat(rep(63, 1), {2048}), cat(rep(63, 8192), {18432}), 32, 8, DType::fp16);
  MixedPlan plan;
  ASSERT_TRUE(plan_mixed(b.p, b.cu.data(), b.used.data(), presets::h200, {}, &plan).ok());
  ASSERT_EQ(plan.route, MixedRoute::split);
  ASSERT_GT(plan.workspace_bytes, 0u);
  void* ws = fake(0x900000);
  if (!MUH_PAGED_PREFILL) {  // a build without the paged kernels says so first
    EXPECT_EQ(paged_attention(b.p, plan, ws, plan.workspace_bytes).code(), StatusCode::not_compiled);
    return;
  }
  // lse asked of a split plan.
  PrefillParams with_lse = b.p;
  with_lse.lse = static_cast<float*>(fake(0xa00000));
  Status s = paged_attention(with_lse, plan, ws, plan.workspace_bytes);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("lse"), std::string::npos) << s.message();
  // Another shape.
  PrefillParams other = b.p;
  other.max_seqlen_k -= 16;
  s = paged_attention(other, plan, ws, plan.workspace_bytes);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("another shape"), std::string::npos) << s.message();
  // Workspace too small, or none.
  s = paged_attention(b.p, plan, ws, plan.workspace_bytes - 16);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("too small"), std::string::npos) << s.message();
  EXPECT_EQ(paged_attention(b.p, plan, nullptr, 0).code(), StatusCode::invalid_argument);
  // An empty plan.
  EXPECT_EQ(paged_attention(b.p, MixedPlan{}, nullptr, 0).code(), StatusCode::invalid_argument);
  // A contiguous call.
  PrefillParams dense = b.p;
  dense.kv_source = KVSource::contiguous;
  EXPECT_EQ(paged_attention(dense, plan, ws, plan.workspace_bytes).code(), StatusCode::invalid_argument);
}

// The C ABI: its own argument checks and the shape's, before any device call.
TEST(MixedPlanBadInput, CAbiSaysWhy) {
  const Batch b = make_batch({1, 8}, {64, 64}, 32, 8, DType::fp16);
  const PrefillParams& p = b.p;
  auto call = [&](int dtype, int layout, int max_seqlen_k) {
    return muh_paged_attention(dtype, layout, p.q, p.k_cache, p.v_cache, p.out, nullptr, p.cu_seqlens_q,
                               p.block_table, p.seqused_k, b.cu.data(), b.used.data(), p.batch, p.total_q,
                               p.max_seqlen_q, max_seqlen_k, p.num_q_heads, p.num_kv_heads, p.head_dim, p.page_size,
                               p.num_pages, p.max_blocks_per_seq, 0.f, 1, nullptr, 0, -1, -1, 0, 0, 0, nullptr);
  };
  const int dt = static_cast<int>(p.dtype);
  EXPECT_EQ(call(dt, 5, 64), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("layout 5"), std::string::npos) << muh_last_error();
  EXPECT_EQ(call(9, MUH_KV_VLLM, 64), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("dtype 9"), std::string::npos) << muh_last_error();
  EXPECT_EQ(call(dt, MUH_KV_VLLM, 1000), MUH_INVALID_ARGUMENT);  // 1000 keys > 4 blocks of 16
  EXPECT_NE(std::string(muh_last_error()).find("block table covers"), std::string::npos) << muh_last_error();
  EXPECT_EQ(muh_paged_attention_workspace_size(dt, MUH_KV_VLLM, b.cu.data(), b.used.data(), p.batch, p.total_q,
                                               p.max_seqlen_q, p.max_seqlen_k, p.num_q_heads, p.num_kv_heads,
                                               p.head_dim, p.page_size, p.num_pages, p.max_blocks_per_seq, 1, 0, -1,
                                               -1, 0, 0, nullptr, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("workspace_bytes"), std::string::npos) << muh_last_error();
}

// The fp8 form: the cache type and its scales checked before any device call, as the paged
// prefill's (muh_paged_prefill_quant); the workspace size planned for the type.
TEST(MixedPlanBadInput, CAbiQuantSaysWhy) {
  const Batch b = make_batch({1, 8}, {64, 64}, 32, 8, DType::fp16);
  const PrefillParams& p = b.p;
  auto call = [&](int dtype, const muh_kv_quant* kv) {
    return muh_paged_attention_quant(dtype, MUH_KV_VLLM, p.q, p.k_cache, p.v_cache, p.out, nullptr, p.cu_seqlens_q,
                                     p.block_table, p.seqused_k, b.cu.data(), b.used.data(), p.batch, p.total_q,
                                     p.max_seqlen_q, p.max_seqlen_k, p.num_q_heads, p.num_kv_heads, p.head_dim,
                                     p.page_size, p.num_pages, p.max_blocks_per_seq, 0.f, 1, nullptr, 0, -1, -1, 0, 0,
                                     0, nullptr, kv);
  };
  const int dt = static_cast<int>(p.dtype);
  const muh_kv_quant bad_type{7, 1.f, 1.f}, zero_scale{MUH_KV_FP8_E4M3, 0.f, 1.f}, good{MUH_KV_FP8_E4M3, 0.5f, 2.f};
  EXPECT_EQ(call(dt, &bad_type), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("kv.kv_dtype 7"), std::string::npos) << muh_last_error();
  EXPECT_EQ(call(dt, &zero_scale), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("k_scale"), std::string::npos) << muh_last_error();
  EXPECT_EQ(call(static_cast<int>(DType::fp32), &good), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("not fp32"), std::string::npos) << muh_last_error();
  size_t bytes = 1;
  EXPECT_EQ(muh_paged_attention_workspace_size_quant(dt, MUH_KV_VLLM, b.cu.data(), b.used.data(), p.batch, p.total_q,
                                                     p.max_seqlen_q, p.max_seqlen_k, p.num_q_heads, p.num_kv_heads,
                                                     p.head_dim, p.page_size, p.num_pages, p.max_blocks_per_seq, 1, 0,
                                                     -1, -1, 0, 0, nullptr, &bytes, 3),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("kv_dtype 3"), std::string::npos) << muh_last_error();
  EXPECT_EQ(bytes, 0u);
}

}  // namespace
}  // namespace muh
