// test_plan.cpp — plan_decode() at its edges: which target and policy, V1 or V2, how many
// partitions, how much workspace. Host-only (presets stand in for devices).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/plan.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

DecodeParams shape(int num_seqs, int max_seq_len, int hq = 32, int hkv = 8, int hd = 128, DType t = DType::bf16) {
  DecodeParams p;
  p.dtype = t;
  p.head_dim = hd;
  p.num_seqs = num_seqs;
  p.num_q_heads = hq;
  p.num_kv_heads = hkv;
  p.page_size = 16;
  p.num_pages = 1;
  p.max_seq_len = max_seq_len;
  p.max_blocks_per_seq = std::max(1, (max_seq_len + 15) / 16);
  return p;
}

DecodePlan plan_of(const DecodeParams& p, const HardwareCapability& hw, PlanOptions o = {}) {
  DecodePlan plan;
  const Status s = plan_decode(p, hw, o, &plan);
  EXPECT_TRUE(s.ok()) << s.message();
  return plan;
}

HardwareCapability gpu(int sms, int gbps = 4800) {
  HardwareCapability hw = presets::h200;
  hw.sm_count = sms;
  hw.memory_bandwidth_gbps = gbps;
  return hw;
}

// Invariants every plan keeps, whatever it chose.
void expect_consistent(const DecodePlan& plan, const DecodeParams& p) {
  EXPECT_EQ(plan.use_v2, plan.num_splits > 1);
  EXPECT_GE(plan.num_splits, 1);
  if (plan.use_v2) {
    EXPECT_EQ(plan.partition_tokens % 16, 0);
    // Every partition holds tokens of the longest sequence; together they cover it.
    EXPECT_GE(static_cast<long long>(plan.num_splits) * plan.partition_tokens, p.max_seq_len);
    EXPECT_LT(static_cast<long long>(plan.num_splits - 1) * plan.partition_tokens, p.max_seq_len);
    EXPECT_EQ(plan.workspace_bytes, static_cast<std::size_t>(p.num_seqs) * plan.num_splits * p.num_q_heads *
                                        (p.head_dim + 1) * sizeof(float));
  } else {
    EXPECT_EQ(plan.workspace_bytes, 0u);
  }
  EXPECT_EQ(plan.ctas, p.num_seqs * p.num_kv_heads * plan.head_chunks * plan.num_splits);
  EXPECT_TRUE(plan.policy == decode_policy(plan.target, p.dtype, p.head_dim));
  EXPECT_TRUE(validate(plan.policy, p.dtype, p.head_dim));
}

// ---- Edge cases, one per test --------------------------------------------------------------------

struct PlanRow {
  const char* name;
  HardwareCapability hw;
  DecodeParams p;
  bool v2;        // expected V1 / V2
  int min_ctas;   // the grid must reach at least this many CTAs (0: no bound)
};

const int kH200Slots = presets::h200.sm_count * decode_policy(90, DType::bf16, 128).ctas_per_sm;  // 264

const PlanRow kRows[] = {
    // A long sequence alone splits until every SM of the H200 is busy.
    {"h200_batch1_32k", presets::h200, shape(1, 32768), true, presets::h200.sm_count * 9 / 10},
    {"h200_batch1_8k", presets::h200, shape(1, 8192), true, presets::h200.sm_count * 9 / 10},
    // Batch 16 × 8 KV heads = 128 CTAs, about one per SM, each at its share of HBM: V1 (on the
    // H200, 2 partitions measured 4–10 % slower). At hd 256 (1 CTA/SM) 16 × 4 = 64 CTAs leave
    // half of the SMs idle: V2.
    {"h200_batch16_32k", presets::h200, shape(16, 32768), false, 0},
    {"h200_hd256_batch16_8k", presets::h200, shape(16, 8192, 16, 4, 256), true, presets::h200.sm_count * 9 / 10},
    // A batch that fills the GPU on its own stays V1 (no merge, no partial traffic).
    {"h200_batch256_32k", presets::h200, shape(256, 32768), false, 0},
    {"h200_batch64_8k", presets::h200, shape(64, 8192), false, 0},
    // Nothing to split: one tile, an empty batch, all sequences empty.
    {"h200_len16", presets::h200, shape(1, 16), false, 0},
    {"h200_len0", presets::h200, shape(4, 0), false, 0},
    {"h200_no_seqs", presets::h200, shape(0, 4096), false, 0},
    // hd 256, 16q / 4kv (1 CTA/SM): batch 1 at 32k splits, batch 256 does not.
    {"h200_hd256_batch1_32k", presets::h200, shape(1, 32768, 16, 4, 256), true, presets::h200.sm_count * 9 / 10},
    {"h200_hd256_batch256_8k", presets::h200, shape(256, 8192, 16, 4, 256), false, 0},
    // A tiny GPU (2 slots) is filled by one sequence's 8 KV heads: never split.
    {"tiny_gpu_100k", gpu(1, 100), shape(1, 100000), false, 0},
    // A huge GPU splits a 100k context into many partitions.
    {"huge_gpu_100k", gpu(1000), shape(1, 100000), true, 800},
    // The seed's deployment: BI-V100 (16 SMs, portable agent), Qwen3.6 (hd 256, 4 KV heads), 100k.
    {"biv100_qwen36_100k", presets::bi_v100, shape(1, 100000, 16, 4, 256), true, 16},
};

void PrintTo(const PlanRow& r, std::ostream* os) { *os << r.name; }

class PlanEdges : public ::testing::TestWithParam<PlanRow> {};

TEST_P(PlanEdges, ChoosesAndStaysConsistent) {
  const PlanRow& r = GetParam();
  const DecodePlan plan = plan_of(r.p, r.hw);
  expect_consistent(plan, r.p);
  EXPECT_EQ(plan.use_v2, r.v2) << r.name << ": " << plan.num_splits << " partitions of " << plan.partition_tokens;
  EXPECT_GE(plan.ctas, r.min_ctas) << r.name;
  if (plan.use_v2) EXPECT_EQ(plan.partition_tokens % plan.policy.partition_size, 0) << r.name;
  if (r.p.num_seqs > 0) EXPECT_GT(plan.est_seconds, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Decode, PlanEdges, ::testing::ValuesIn(kRows),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- Forced split counts are exact where 16-token partitions allow them -----------------------

class ForcedSplits : public ::testing::TestWithParam<int> {};

TEST_P(ForcedSplits, Exact) {
  const DecodeParams p = shape(3, 1000);
  const DecodePlan plan = plan_of(p, presets::h200, PlanOptions{-1, GetParam(), false});
  expect_consistent(plan, p);
  EXPECT_EQ(plan.num_splits, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Decode, ForcedSplits, ::testing::Values(1, 2, 3, 5, 8, 13, 32, 63));

TEST(ForcedSplitsCap, AtMostOnePartitionPer16Tokens) {
  const DecodeParams p = shape(1, 100);
  const DecodePlan plan = plan_of(p, presets::h200, PlanOptions{-1, 50, false});
  expect_consistent(plan, p);
  EXPECT_EQ(plan.partition_tokens, 16);
  EXPECT_EQ(plan.num_splits, 7);
}

// ---- Targets ------------------------------------------------------------------------------------

TEST(PlanTarget, DeviceTargetIsTheBestCompiledOne) {
  const DecodePlan plan = plan_of(shape(2, 4096), presets::h200);
  EXPECT_EQ(plan.target, best_compiled_target(90) < 0 ? 0 : best_compiled_target(90));
}

TEST(PlanTarget, OwnArchRunsThePortableAgent) {
  const DecodePlan plan = plan_of(shape(2, 4096), presets::bi_v100);
  EXPECT_EQ(plan.target, 0);
  EXPECT_EQ(plan.policy.agent, Agent::portable);
  EXPECT_EQ(plan.policy.partition_size, 512);  // the seed's partition
}

TEST(PlanTarget, ForcedPortableOnTheH200) {
  const DecodePlan plan = plan_of(shape(2, 4096), presets::h200, PlanOptions{0, 0, false});
  EXPECT_EQ(plan.target, 0);
  EXPECT_EQ(plan.policy.agent, Agent::portable);
}

TEST(PlanTarget, Fp32RunsThePortableAgentEverywhere) {
  for (const HardwareCapability& hw : kPresets) {
    const DecodePlan plan = plan_of(shape(2, 4096, 8, 2, 128, DType::fp32), hw);
    EXPECT_EQ(plan.policy.agent, Agent::portable) << hw.name;
  }
}

TEST(PlanTarget, SmallSharedMemoryFallsBackToPortable) {
  HardwareCapability hw = presets::h200;
  hw.max_shared_memory_per_block_optin = 64 * 1024;  // less than the sm90 hd256 row's 206 KB
  const DecodePlan plan = plan_of(shape(1, 8192, 16, 4, 256), hw);
  EXPECT_EQ(plan.target, 0);
  EXPECT_LE(decode_smem_bytes(plan.policy, DType::bf16, 256), 64 * 1024);
}

// ---- Head chunks, graphs ---------------------------------------------------------------------------

TEST(PlanShape, GroupsAbove16TakeSeveralChunks) {
  const DecodeParams p = shape(2, 4096, 40, 2);
  const DecodePlan plan = plan_of(p, presets::h200);
  EXPECT_EQ(plan.head_chunks, 2);
  expect_consistent(plan, p);
}

TEST(PlanGraph, SameChoiceMarkedAsACapacity) {
  const DecodeParams p = shape(8, 20000);
  const DecodePlan a = plan_of(p, presets::h200);
  const DecodePlan g = plan_of(p, presets::h200, PlanOptions{-1, 0, true});
  EXPECT_TRUE(g.cuda_graph);
  EXPECT_FALSE(a.cuda_graph);
  EXPECT_EQ(a.num_splits, g.num_splits);
  EXPECT_EQ(a.workspace_bytes, g.workspace_bytes);
  EXPECT_EQ(g.max_seq_len, 20000);
  EXPECT_EQ(g.num_seqs, 8);
}

// The model never prefers V2 for a batch that already gives every slot ≥ 4 CTAs.
TEST(PlanModel, FullBatchesStayV1) {
  for (int batch : {64, 128, 256, 1024})
    for (int len : {512, 2048, 8192, 32768}) {
      const DecodePlan plan = plan_of(shape(batch, len), presets::h200);
      if (batch * 8 >= 2 * kH200Slots) EXPECT_FALSE(plan.use_v2) << batch << " x " << len;
    }
}

// The split count the plan takes on the H200 was measured within 10 % of the best forced count in
// every cell of the benchmark's split sweep (muh bench decode on the H200, commit db46dd2,
// bench/results/decode-h200-2026-11-30-db46dd2.log: bf16, page 16, cold L2, median µs per forced
// count). A change to the cost model (plan.cpp) that picks a count measured slower fails here;
// re-measure and update the table when the kernel changes.
struct MeasuredCell {
  int head_dim, q_heads, kv_heads, batch, len;
  std::vector<std::pair<int, double>> us;  // (forced splits, median µs)
};

const std::vector<MeasuredCell>& h200_split_sweep() {
  static const std::vector<MeasuredCell> v = {
      {128, 32, 8, 1, 512, {{1, 14.3}, {2, 14.3}, {4, 12.4}, {8, 11.6}, {16, 12.2}, {32, 13.6}}},
      {128, 32, 8, 1, 2048, {{1, 35.2}, {2, 24.5}, {4, 17.6}, {8, 14.8}, {16, 14.5}, {32, 15.3}, {64, 20.7}, {128, 30.0}}},
      {128, 32, 8, 1, 8192, {{1, 109.8}, {2, 62.1}, {4, 36.9}, {8, 25.0}, {16, 21.6}, {32, 22.0}, {64, 28.0}, {128, 33.9}}},
      {128, 32, 8, 1, 32768, {{1, 404.9}, {2, 209.7}, {4, 110.7}, {8, 62.5}, {16, 50.3}, {32, 50.7}, {64, 53.2}, {128, 57.4}}},
      {128, 32, 8, 16, 512, {{1, 17.6}, {2, 20.9}, {4, 25.1}, {8, 28.1}, {16, 40.7}, {32, 66.2}}},
      {128, 32, 8, 16, 2048, {{1, 45.8}, {2, 49.6}, {4, 50.1}, {8, 51.6}, {16, 58.5}, {32, 75.6}, {64, 125.8}}},
      {128, 32, 8, 16, 8192, {{1, 155.5}, {2, 158.6}, {4, 158.7}, {8, 160.0}, {16, 158.4}, {32, 161.1}, {64, 184.6}}},
      {128, 32, 8, 16, 32768, {{1, 565.0}, {2, 565.0}, {4, 570.0}, {8, 569.2}, {16, 564.1}, {32, 561.0}, {64, 564.9}}},
      {256, 16, 4, 1, 512, {{1, 22.0}, {2, 17.6}, {4, 13.7}, {8, 12.6}, {16, 13.2}, {32, 14.7}}},
      {256, 16, 4, 1, 2048, {{1, 68.9}, {2, 40.4}, {4, 25.8}, {8, 18.6}, {16, 16.5}, {32, 17.0}, {64, 24.1}, {128, 38.4}}},
      {256, 16, 4, 1, 8192, {{1, 232.5}, {2, 124.8}, {4, 72.5}, {8, 41.6}, {16, 27.5}, {32, 24.4}, {64, 32.9}, {128, 44.5}}},
      {256, 16, 4, 1, 32768, {{1, 878.2}, {2, 451.8}, {4, 243.1}, {8, 126.4}, {16, 70.1}, {32, 57.1}, {64, 61.5}, {128, 72.9}}},
      {256, 16, 4, 16, 512, {{1, 23.0}, {2, 22.0}, {4, 27.5}, {8, 33.4}, {16, 47.8}, {32, 81.1}}},
      {256, 16, 4, 16, 2048, {{1, 66.0}, {2, 54.3}, {4, 55.0}, {8, 61.7}, {16, 78.8}, {32, 96.2}, {64, 155.3}, {128, 291.3}}},
      {256, 16, 4, 16, 8192, {{1, 230.8}, {2, 173.0}, {4, 168.2}, {8, 169.1}, {16, 174.5}, {32, 194.3}, {64, 238.4}, {128, 343.3}}},
      {256, 16, 4, 16, 32768, {{1, 874.1}, {2, 590.9}, {4, 581.1}, {8, 579.3}, {16, 577.1}, {32, 581.7}, {64, 607.4}, {128, 719.8}}},
  };
  return v;
}

TEST(PlanModel, H200SplitCountsWithin10PercentOfTheMeasuredBest) {
  for (const MeasuredCell& c : h200_split_sweep()) {
    const DecodePlan plan = plan_of(shape(c.batch, c.len, c.q_heads, c.kv_heads, c.head_dim), presets::h200);
    double best = 1e30, chosen = -1;
    for (const auto& [splits, us] : c.us) {
      best = std::min(best, us);
      if (splits == plan.num_splits) chosen = us;
    }
    const std::string cell = "hd" + std::to_string(c.head_dim) + " batch " + std::to_string(c.batch) + " x " +
                             std::to_string(c.len) + ": plan " + std::to_string(plan.num_splits) + " partitions";
    ASSERT_GT(chosen, 0) << cell << ", a count the sweep did not measure";
    EXPECT_LE(chosen, 1.10 * best) << cell << " measured " << chosen << " us, best " << best << " us";
  }
}

// Long contexts at batch 1 keep at least ~every SM busy.
TEST(PlanModel, Batch1LongContextsFillTheSMs) {
  for (int len : {8192, 16384, 32768, 65536, 131072}) {
    const DecodePlan plan = plan_of(shape(1, len), presets::h200);
    EXPECT_GE(plan.ctas, presets::h200.sm_count * 9 / 10) << len;
  }
}

}  // namespace
}  // namespace muh
