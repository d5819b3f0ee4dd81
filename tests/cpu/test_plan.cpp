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
  if (plan.wide) {
    EXPECT_TRUE(plan.policy == decode_wide_policy(plan.target, p.dtype, p.head_dim));
  } else {
    EXPECT_TRUE(plan.policy == decode_policy(plan.target, p.dtype, p.head_dim));
  }
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
    // A huge GPU splits a 100k context into many partitions: at least until its HBM is busy
    // (one SM pulls ≤ 1.5× its share, so ≥ 1000 / 1.5 CTAs).
    {"huge_gpu_100k", gpu(1000), shape(1, 100000), true, 660},
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
  if (plan.use_v2) EXPECT_EQ(plan.partition_tokens % decode_split_tokens(plan.policy), 0) << r.name;
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
  // Decode has no sm_90a rows (only prefill's Hopper agent does): the walk names sm_90 there.
  EXPECT_EQ(plan.target, target_arch(start_target(presets::h200)));
  EXPECT_EQ(plan.selection.target, plan.target);
  EXPECT_TRUE(plan.policy == plan.selection.policy);
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

// The walk (select.hpp) passes over every sm80-agent row (sm_90's, sm_89's and sm_86's at 99 KB,
// sm_80's at 163 KB all need more than 64 KB at hd 256) and takes sm_75's, which is the portable
// row: target 75, the portable agent.
TEST(PlanTarget, SmallSharedMemoryFallsBackToPortable) {
  HardwareCapability hw = presets::h200;
  hw.max_shared_memory_per_block_optin = 64 * 1024;  // less than the sm90 hd256 row's 206 KB
  const DecodePlan plan = plan_of(shape(1, 8192, 16, 4, 256), hw);
  EXPECT_EQ(plan.policy.agent, Agent::portable);
  EXPECT_TRUE(plan.policy == decode_policy(0, DType::bf16, 256));
  EXPECT_EQ(plan.target, compiled_target_set().contains(75) ? 75 : 0);
  EXPECT_LE(decode_smem_bytes(plan.policy, DType::bf16, 256), 64 * 1024);
}

// A plan is made for the SMs it is given — stream_profile() gives it a green context's (issue
// 18): the seed's cells (fp16, hd 256, 4 q / 1 kv head, one sequence) split for 16 SMs differently
// than for the H200's 132, into at least one CTA per SM of the partition, and never the 132-SM
// count. The memory bandwidth of the partition is left at the device's: the model's per-SM cap
// (1.5× a fair share) is what limits 16 SMs.
TEST(PlanSms, APartitionChangesTheSplit) {
  for (int len : {32768, 100000, 262144}) {
    SCOPED_TRACE("seq " + std::to_string(len));
    const DecodeParams p = shape(1, len, 4, 1, 256, DType::fp16);
    const DecodePlan whole = plan_of(p, gpu(132));
    const DecodePlan part = plan_of(p, gpu(16));
    EXPECT_NE(whole.num_splits, part.num_splits);
    EXPECT_GE(part.num_splits, 16);
    EXPECT_LT(part.num_splits, whole.num_splits);
    EXPECT_EQ(part.target, whole.target) << "the SM count changes the split (and the row: PlanWide), not the target";
  }
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

// The L2 evict-first policy on the K/V copies: kept for calls that read little K/V for the L2
// (the H200's 60 MB: 134 MB read is 2.1 L2 sizes), dropped for large ones (537 MB, 8.5 sizes);
// a forced choice wins either way and does not touch the rest of the plan.
TEST(PlanL2Hint, FollowsTheBytesRead) {
  EXPECT_TRUE(plan_of(shape(1, 32768), presets::h200).l2_evict_first);                 // 134 MB
  EXPECT_TRUE(plan_of(shape(16, 2048), presets::h200).l2_evict_first);                 // 134 MB
  EXPECT_TRUE(plan_of(shape(1, 32768, 16, 4, 256), presets::h200).l2_evict_first);     // 134 MB
  EXPECT_FALSE(plan_of(shape(16, 8192), presets::h200).l2_evict_first);                // 537 MB
  EXPECT_FALSE(plan_of(shape(64, 2048), presets::h200).l2_evict_first);                // 537 MB
  EXPECT_FALSE(plan_of(shape(16, 8192, 16, 4, 256), presets::h200).l2_evict_first);    // 537 MB
  EXPECT_FALSE(plan_of(shape(256, 32768), presets::h200).l2_evict_first);
  // The bound scales with the device's L2: the same call on a 6 MB L2 drops the policy.
  HardwareCapability small_l2 = presets::h200;
  small_l2.l2_cache_size_bytes = 6ll << 20;
  EXPECT_FALSE(plan_of(shape(1, 32768), small_l2).l2_evict_first);
}

TEST(PlanL2Hint, ForcedChoiceWinsAndChangesNothingElse) {
  const DecodeParams p = shape(1, 32768);
  const DecodePlan a = plan_of(p, presets::h200);
  PlanOptions off;
  off.l2_evict_first = 0;
  const DecodePlan b = plan_of(p, presets::h200, off);
  EXPECT_TRUE(a.l2_evict_first);
  EXPECT_FALSE(b.l2_evict_first);
  EXPECT_EQ(a.num_splits, b.num_splits);
  EXPECT_EQ(a.partition_tokens, b.partition_tokens);
  EXPECT_EQ(a.workspace_bytes, b.workspace_bytes);
  PlanOptions on;
  on.l2_evict_first = 1;
  EXPECT_TRUE(plan_of(shape(256, 32768), presets::h200, on).l2_evict_first);
}

TEST(PlanL2Hint, OutOfRangeOptionIsAnError) {
  PlanOptions o;
  o.l2_evict_first = 2;
  DecodePlan plan;
  const Status s = plan_decode(shape(1, 4096), presets::h200, o, &plan);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("l2_evict_first"), std::string::npos) << s.message();
  EXPECT_EQ(plan.target, -1);  // untouched
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
// every cell of the benchmark's split sweep (muh bench decode on the H200, commit 669c6ba — K/V by
// TMA on the sm90 rows, head_dim 256 at 4 warps × 2 stages —, bench/results/decode-h200-2026-11-30-
// 669c6ba.log: bf16, page 16, cold L2, median µs per forced count). With the cost model fitted to
// it the plan's count is the best or within 8 % in every cell (batch 1 × 512 at both head dims
// and hd256 batch 16 × 2k are 6–8 % off); the sweeps of the cp.async kernels (d41c7f6, db46dd2,
// 705da92) are in the history of this file. A change to the cost model (plan.cpp) that picks a
// count measured slower fails here; re-measure and update the table when the kernel changes.
struct MeasuredCell {
  int head_dim, q_heads, kv_heads, batch, len;
  std::vector<std::pair<int, double>> us;  // (forced splits, median µs)
};

const std::vector<MeasuredCell>& h200_split_sweep() {
  static const std::vector<MeasuredCell> v = {
      {128, 32, 8, 1, 512, {{1, 13.7}, {2, 14.2}, {4, 12.8}, {8, 12.0}, {16, 11.9}, {32, 12.8}}},
      {128, 32, 8, 1, 2048, {{1, 32.7}, {2, 24.0}, {4, 17.7}, {8, 14.7}, {16, 14.5}, {32, 15.1}, {64, 17.8}, {128, 24.7}}},
      {128, 32, 8, 1, 8192, {{1, 110.1}, {2, 62.2}, {4, 36.7}, {8, 24.6}, {16, 20.9}, {32, 21.4}, {64, 25.2}, {128, 28.5}}},
      {128, 32, 8, 1, 32768, {{1, 408.7}, {2, 211.6}, {4, 111.3}, {8, 62.0}, {16, 48.6}, {32, 49.0}, {64, 49.7}, {128, 51.2}}},
      {128, 32, 8, 16, 512, {{1, 17.4}, {2, 23.9}, {4, 27.3}, {8, 30.4}, {16, 41.6}, {32, 67.3}}},
      {128, 32, 8, 16, 2048, {{1, 45.0}, {2, 51.0}, {4, 51.8}, {8, 52.2}, {16, 56.8}, {32, 72.9}, {64, 123.9}}},
      {128, 32, 8, 16, 8192, {{1, 141.4}, {2, 149.9}, {4, 147.1}, {8, 147.5}, {16, 147.8}, {32, 150.3}, {64, 169.9}}},
      {128, 32, 8, 16, 32768, {{1, 500.9}, {2, 519.3}, {4, 515.2}, {8, 512.1}, {16, 508.7}, {32, 511.0}, {64, 518.7}}},
      {256, 16, 4, 1, 512, {{1, 16.0}, {2, 15.8}, {4, 13.6}, {8, 12.7}, {16, 12.7}, {32, 12.8}}},
      {256, 16, 4, 1, 2048, {{1, 44.6}, {2, 29.8}, {4, 21.0}, {8, 16.3}, {16, 15.3}, {32, 15.2}, {64, 19.1}, {128, 27.6}}},
      {256, 16, 4, 1, 8192, {{1, 157.1}, {2, 86.3}, {4, 49.6}, {8, 30.6}, {16, 22.5}, {32, 21.8}, {64, 25.6}, {128, 32.9}}},
      {256, 16, 4, 1, 32768, {{1, 609.1}, {2, 312.4}, {4, 163.1}, {8, 87.0}, {16, 50.0}, {32, 48.4}, {64, 52.0}, {128, 57.9}}},
      {256, 16, 4, 16, 512, {{1, 18.1}, {2, 22.8}, {4, 25.4}, {8, 31.7}, {16, 44.8}, {32, 74.3}}},
      {256, 16, 4, 16, 2048, {{1, 46.2}, {2, 49.1}, {4, 51.7}, {8, 55.6}, {16, 60.5}, {32, 83.6}, {64, 141.0}, {128, 262.7}}},
      {256, 16, 4, 16, 8192, {{1, 161.7}, {2, 142.6}, {4, 144.7}, {8, 149.0}, {16, 155.4}, {32, 160.6}, {64, 195.2}, {128, 292.8}}},
      {256, 16, 4, 16, 32768, {{1, 612.1}, {2, 499.3}, {4, 502.9}, {8, 502.1}, {16, 506.5}, {32, 518.8}, {64, 529.2}, {128, 564.8}}},
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

// The seed's cells (fp16, hd 256, 4 or 6 q heads / 1 kv head, batch 1–2, page 16, vLLM layout:
// the sm80 agent's TMA form, decode_sm80_tma) measured on the H200 on its 132 SMs and on a 16-SM
// green partition (`muh bench decode --grid seed --emulate bi-v100 --no-portable`,
// bench/results/h200-2026-12-06-tile-pipeline/call3-T.json: the hd-256 row at 4 × 3 with the
// one-tile overlap; cold L2, median µs per forced count; the plan planned for the SMs it is given;
// the kernels before it: h200-2026-12-02-qk-chains/call4-T.json and h200-2026-12-02-vllm-tma/
// call1-A.json, in this file's history). Issue 18 asks for the plan within 10 % of the best count
// on every seed cell. The cp.async form of these pages needed its own CTA rate in the model
// (kLatencyVllmSeconds; h200-2026-12-02-heads-on-n/: before it 87–90 partitions at batch 1 ×
// 100k/256k, 1.07–1.22× the best); the TMA form is modelled like NHD's.
struct SeedCell {
  int sms, q_heads, batch, len;
  std::vector<std::pair<int, double>> us;  // (forced splits, median µs)
};

const std::vector<SeedCell>& h200_seed_sweep() {
  static const std::vector<SeedCell> v = {
      {132, 4, 1, 8192, {{1, 96.5}, {8, 22.8}, {16, 17.5}, {32, 15.5}, {64, 15.4}, {128, 16.1}, {256, 22.1},
                           {512, 32.8}}},
      {132, 4, 1, 32768, {{1, 363.2}, {16, 34.2}, {32, 23.8}, {64, 22.3}, {128, 23.3}, {256, 28.9}, {342, 32.8},
                           {512, 38.3}}},
      {132, 4, 1, 100000, {{1, 1087.9}, {32, 47.7}, {64, 41.2}, {87, 42.2}, {128, 41.7}, {131, 42.0}, {250, 46.9},
                           {261, 46.8}, {391, 50.1}, {481, 53.0}, {521, 53.9}}},
      {132, 4, 1, 262144, {{1, 2824.8}, {32, 108.7}, {64, 84.1}, {90, 86.7}, {128, 84.6}, {132, 85.0}, {256, 89.9},
                           {261, 91.1}, {391, 96.4}, {512, 100.6}}},
      {132, 4, 2, 8192, {{1, 97.3}, {8, 23.1}, {16, 18.4}, {32, 17.2}, {64, 17.4}, {128, 21.3}, {171, 25.6},
                           {256, 29.5}}},
      {132, 4, 2, 32768, {{1, 362.4}, {16, 35.4}, {32, 30.8}, {64, 30.9}, {128, 34.3}, {187, 37.4}, {256, 40.0}}},
      {132, 4, 2, 100000, {{1, 1082.6}, {16, 87.7}, {32, 68.1}, {46, 70.3}, {64, 67.7}, {66, 68.0}, {128, 72.6},
                           {131, 72.7}, {196, 75.8}, {250, 80.5}, {261, 79.5}}},
      {132, 4, 2, 262144, {{1, 2821.5}, {16, 196.8}, {32, 146.7}, {44, 153.7}, {64, 148.1}, {66, 149.2}, {128, 150.9},
                           {132, 152.6}, {198, 154.6}, {256, 157.0}, {261, 157.1}}},
      {132, 6, 1, 8192, {{1, 96.4}, {8, 23.0}, {16, 17.5}, {32, 16.0}, {64, 15.6}, {128, 16.8}, {256, 22.8},
                           {512, 34.0}}},
      {132, 6, 1, 32768, {{1, 362.1}, {16, 34.6}, {32, 24.3}, {64, 22.8}, {86, 23.6}, {128, 23.6}, {256, 29.4},
                           {342, 34.4}, {512, 38.7}}},
      {132, 6, 1, 100000, {{1, 1088.3}, {32, 48.1}, {64, 41.5}, {87, 42.8}, {128, 42.1}, {131, 42.6}, {250, 47.3},
                           {261, 47.6}, {391, 50.8}, {481, 54.3}, {521, 54.9}}},
      {132, 6, 1, 262144, {{1, 2826.1}, {32, 109.3}, {64, 84.3}, {90, 86.8}, {128, 84.8}, {132, 85.5}, {256, 90.3},
                           {261, 91.4}, {391, 97.2}, {512, 101.4}}},
      {132, 6, 2, 8192, {{1, 98.1}, {8, 23.3}, {16, 18.8}, {32, 17.4}, {64, 17.8}, {128, 22.0}, {171, 26.1},
                           {256, 30.7}}},
      {132, 6, 2, 32768, {{1, 364.2}, {16, 35.8}, {32, 31.1}, {64, 31.3}, {128, 34.6}, {187, 38.3}, {256, 41.3}}},
      {132, 6, 2, 100000, {{1, 1083.0}, {16, 88.0}, {32, 67.9}, {46, 70.7}, {64, 68.2}, {66, 68.1}, {128, 73.3},
                           {131, 73.4}, {196, 76.9}, {250, 81.7}, {261, 80.8}}},
      {132, 6, 2, 262144, {{1, 2821.7}, {16, 197.6}, {32, 147.0}, {44, 155.1}, {64, 148.5}, {66, 149.4}, {128, 151.4},
                           {132, 153.9}, {198, 155.0}, {256, 158.2}, {261, 158.0}}},
      {16, 4, 1, 8192, {{1, 95.7}, {8, 22.6}, {16, 17.5}, {32, 20.8}, {47, 24.6}, {64, 26.5}}},
      {16, 4, 1, 32768, {{1, 362.4}, {16, 34.0}, {32, 37.3}, {48, 41.4}, {64, 44.0}}},
      {16, 4, 1, 100000, {{1, 1088.5}, {16, 80.4}, {32, 83.5}, {48, 87.4}, {64, 91.7}}},
      {16, 4, 1, 262144, {{1, 2820.2}, {16, 191.2}, {32, 195.2}, {48, 200.0}, {64, 203.2}}},
      {16, 4, 2, 8192, {{1, 96.9}, {4, 34.0}, {8, 22.9}, {16, 26.3}, {24, 30.2}, {32, 32.2}}},
      {16, 4, 2, 32768, {{1, 362.4}, {8, 56.8}, {16, 60.1}, {24, 64.1}, {32, 65.8}}},
      {16, 4, 2, 100000, {{1, 1080.5}, {8, 149.3}, {16, 153.6}, {24, 157.5}, {32, 159.9}}},
      {16, 4, 2, 262144, {{1, 2824.2}, {8, 365.9}, {16, 370.8}, {24, 374.6}, {32, 377.5}}},
      {16, 6, 1, 8192, {{1, 95.8}, {8, 23.0}, {16, 17.9}, {32, 21.2}, {47, 25.5}, {64, 27.8}}},
      {16, 6, 1, 32768, {{1, 362.1}, {16, 34.5}, {32, 38.0}, {48, 42.2}, {64, 45.2}}},
      {16, 6, 1, 100000, {{1, 1089.3}, {16, 80.6}, {32, 84.4}, {48, 88.5}, {64, 92.8}}},
      {16, 6, 1, 262144, {{1, 2819.2}, {16, 191.8}, {32, 196.2}, {48, 201.2}, {64, 205.1}}},
      {16, 6, 2, 8192, {{1, 97.2}, {4, 34.5}, {8, 23.4}, {16, 26.8}, {24, 31.0}, {32, 33.7}}},
      {16, 6, 2, 32768, {{1, 363.5}, {8, 57.1}, {16, 60.8}, {24, 65.2}, {32, 67.7}}},
      {16, 6, 2, 100000, {{1, 1081.9}, {8, 150.1}, {16, 154.4}, {24, 159.0}, {32, 161.5}}},
      {16, 6, 2, 262144, {{1, 2823.9}, {8, 366.9}, {16, 372.1}, {24, 377.2}, {32, 381.0}}},
  };
  return v;
}

// Each cell planned for its SMs (force_target: -1 the device's own row, 0 the portable one) takes a
// split count the sweep measured within 10 % of its best, on `agent`'s row. The seed's shape, over
// a cache of element type `kv`, on `hw(sms)`. between: a count the sweep did not time passes when
// the two timed counts around it are both within 10 % of the best (the time is unimodal in the
// count in every sweep here); otherwise the count must have been timed. ctas_per_sm > 0: the CTAs a
// SM each plan was made for.
template <class Hw>
void expect_seed_plans_near_best(const std::vector<SeedCell>& cells, int force_target, Agent agent, Hw hw,
                                 KVDType kv = KVDType::same, bool between = false, int ctas_per_sm = 0,
                                 int wide_row = -1) {
  for (const SeedCell& c : cells) {
    DecodeParams p = shape(c.batch, c.len, c.q_heads, 1, 256, DType::fp16);
    p.layout = KVLayout::vllm;
    p.kv.dtype = kv;
    const DecodePlan plan = plan_of(p, hw(c.sms), PlanOptions{force_target, 0, false, -1, wide_row});
    double best = 1e30, chosen = -1, below = -1, above = -1;
    int below_n = 0, above_n = 1 << 30;
    for (const auto& [splits, us] : c.us) {
      best = std::min(best, us);
      if (splits == plan.num_splits) chosen = us;
      if (splits < plan.num_splits && splits > below_n) below_n = splits, below = us;
      if (splits > plan.num_splits && splits < above_n) above_n = splits, above = us;
    }
    const std::string cell = std::to_string(c.sms) + " SMs, " + std::to_string(c.q_heads) + " q heads, batch " +
                             std::to_string(c.batch) + " x " + std::to_string(c.len) + ": plan " +
                             std::to_string(plan.num_splits) + " partitions of " + std::to_string(plan.partition_tokens);
    EXPECT_EQ(plan.policy.agent, agent) << cell;
    if (ctas_per_sm > 0) EXPECT_EQ(plan.ctas_per_sm, ctas_per_sm) << cell;
    if (chosen > 0 || !between) {
      ASSERT_GT(chosen, 0) << cell << ", a count the sweep did not measure";
      EXPECT_LE(chosen, 1.10 * best) << cell << " measured " << chosen << " us, best " << best << " us";
    } else {
      ASSERT_TRUE(below > 0 && above > 0) << cell << ": not between two timed counts";
      EXPECT_LE(std::max(below, above), 1.10 * best)
          << cell << " between " << below_n << " (" << below << " us) and " << above_n << " (" << above
          << " us), best " << best << " us";
    }
  }
}

// The bandwidth the bench's plans saw: the lent H200's datasheet figure (the JSONs' device block,
// 4814 GB/s). With 4800 the model's b2 × 256k optimum on 132 SMs tips from 64 to 44 partitions, a
// count the sweep has not timed at 4 heads.
HardwareCapability h200_seed_gpu(int sms) { return gpu(sms, 4814); }

TEST(PlanModel, SeedCellsWithin10PercentOfTheMeasuredBestOn132And16Sms) {
  // (the 4 × 3 row's own counts: its wide row off; both rows together below)
  expect_seed_plans_near_best(h200_seed_sweep(), -1, Agent::sm80, h200_seed_gpu, KVDType::same, false, 0, 0);
}

// The same cells on the hd-256 wide row (tuning_sm90.hpp's kDecodeWide: 12 warps × 1 stage),
// measured in the same run as h200_seed_sweep() (call3-W.json beside call3-T.json; the counts are
// the forced ones, cut in 192-token partitions).
const std::vector<SeedCell>& h200_seed_sweep_wide() {
  static const std::vector<SeedCell> v = {
      {132, 4, 1, 8192, {{1, 70.6}, {4, 30.0}, {8, 23.8}, {16, 18.8}, {32, 17.2}, {43, 17.1}, {64, 17.1}, {128, 18.1},
                         {256, 25.1}, {512, 39.1}}},
      {132, 4, 1, 32768, {{1, 250.2}, {16, 32.3}, {32, 24.8}, {64, 23.8}, {86, 24.0}, {128, 24.5}, {256, 31.6},
                          {342, 36.8}, {512, 44.0}}},
      {132, 4, 1, 100000, {{1, 739.3}, {16, 65.9}, {32, 45.3}, {64, 43.6}, {87, 43.9}, {128, 43.3}, {131, 43.4},
                           {250, 50.1}, {261, 49.3}, {391, 55.0}, {481, 62.0}, {521, 59.9}}},
      {132, 4, 1, 262144, {{1, 1930.7}, {32, 95.9}, {64, 89.6}, {92, 90.2}, {128, 85.7}, {132, 86.1}, {256, 92.3},
                           {261, 93.5}, {391, 99.9}, {512, 105.2}}},
      {132, 4, 2, 8192, {{1, 71.5}, {4, 31.8}, {8, 24.0}, {16, 19.2}, {32, 18.5}, {43, 19.3}, {64, 19.1}, {128, 24.7},
                         {171, 30.4}, {256, 35.4}}},
      {132, 4, 2, 32768, {{1, 251.3}, {8, 48.5}, {16, 34.1}, {32, 33.1}, {57, 33.0}, {64, 32.2}, {128, 38.2},
                          {187, 41.8}, {256, 46.6}}},
      {132, 4, 2, 100000, {{1, 751.8}, {16, 77.8}, {32, 72.1}, {44, 72.2}, {64, 69.4}, {66, 69.2}, {128, 75.5},
                           {131, 74.9}, {196, 78.8}, {250, 86.3}, {261, 82.6}}},
      {132, 4, 2, 262144, {{1, 1929.1}, {16, 171.9}, {32, 157.4}, {46, 156.9}, {64, 149.3}, {66, 149.6}, {128, 152.3},
                           {132, 154.2}, {198, 155.3}, {256, 164.0}, {261, 163.3}}},
      {132, 6, 1, 8192, {{1, 71.0}, {4, 30.3}, {8, 24.1}, {16, 19.0}, {32, 17.2}, {43, 17.6}, {64, 17.3}, {128, 18.3},
                         {256, 25.5}, {512, 39.9}}},
      {132, 6, 1, 32768, {{1, 249.9}, {16, 32.4}, {32, 25.2}, {64, 23.9}, {86, 25.0}, {128, 25.0}, {256, 32.1},
                          {342, 37.9}, {512, 44.8}}},
      {132, 6, 1, 100000, {{1, 739.5}, {16, 66.2}, {32, 45.3}, {64, 43.6}, {87, 43.8}, {128, 43.6}, {131, 43.5},
                           {250, 50.5}, {261, 49.7}, {391, 55.5}, {481, 63.0}, {521, 60.5}}},
      {132, 6, 1, 262144, {{1, 1929.0}, {32, 96.1}, {64, 90.3}, {92, 90.2}, {128, 86.4}, {132, 86.5}, {256, 92.8},
                           {261, 93.8}, {391, 100.4}, {512, 106.0}}},
      {132, 6, 2, 8192, {{1, 72.0}, {4, 32.0}, {8, 24.4}, {16, 19.6}, {32, 18.8}, {43, 19.3}, {64, 19.2}, {128, 25.3},
                         {171, 30.7}, {256, 37.3}}},
      {132, 6, 2, 32768, {{1, 251.2}, {8, 48.9}, {16, 34.5}, {32, 32.9}, {57, 33.0}, {64, 32.6}, {128, 37.8},
                          {187, 42.3}, {256, 47.1}}},
      {132, 6, 2, 100000, {{1, 753.2}, {16, 78.1}, {32, 72.2}, {44, 73.2}, {64, 69.3}, {66, 69.3}, {128, 76.0},
                           {131, 75.1}, {196, 79.3}, {250, 87.6}, {261, 83.7}}},
      {132, 6, 2, 262144, {{1, 1931.3}, {16, 172.4}, {32, 157.1}, {46, 157.5}, {64, 149.4}, {66, 150.4}, {128, 152.9},
                           {132, 154.2}, {198, 155.9}, {256, 165.9}, {261, 164.5}}},
      {16, 4, 1, 8192, {{1, 70.5}, {4, 30.0}, {8, 23.0}, {15, 19.2}, {16, 18.8}, {32, 23.9}, {47, 27.6}, {64, 31.7}}},
      {16, 4, 1, 32768, {{1, 249.9}, {8, 46.1}, {16, 32.1}, {32, 37.8}, {48, 43.0}, {64, 47.7}}},
      {16, 4, 1, 100000, {{1, 739.0}, {16, 65.3}, {32, 70.8}, {48, 75.7}, {64, 82.8}}},
      {16, 4, 1, 262144, {{1, 1928.0}, {16, 148.3}, {32, 154.3}, {48, 160.4}, {64, 167.2}}},
      {16, 4, 2, 8192, {{1, 71.3}, {4, 30.9}, {8, 24.1}, {16, 28.6}, {24, 32.7}, {32, 38.8}}},
      {16, 4, 2, 32768, {{1, 250.2}, {8, 48.4}, {16, 53.0}, {24, 59.8}, {32, 65.1}}},
      {16, 4, 2, 100000, {{1, 747.3}, {8, 118.1}, {16, 123.8}, {24, 129.2}, {32, 135.5}}},
      {16, 4, 2, 262144, {{1, 1924.9}, {8, 273.4}, {16, 280.0}, {24, 285.9}, {32, 291.4}}},
      {16, 6, 1, 8192, {{1, 70.6}, {4, 30.4}, {8, 23.1}, {15, 19.4}, {16, 19.2}, {32, 24.4}, {47, 28.2}, {64, 32.5}}},
      {16, 6, 1, 32768, {{1, 249.7}, {8, 46.4}, {16, 32.2}, {32, 38.3}, {48, 43.3}, {64, 48.3}}},
      {16, 6, 1, 100000, {{1, 739.5}, {16, 65.0}, {32, 71.0}, {48, 76.3}, {64, 83.6}}},
      {16, 6, 1, 262144, {{1, 1927.4}, {16, 148.3}, {32, 154.7}, {48, 160.8}, {64, 168.0}}},
      {16, 6, 2, 8192, {{1, 71.5}, {4, 30.7}, {8, 24.0}, {16, 29.1}, {24, 33.5}, {32, 39.4}}},
      {16, 6, 2, 32768, {{1, 251.9}, {8, 48.5}, {16, 54.1}, {24, 60.2}, {32, 65.8}}},
      {16, 6, 2, 100000, {{1, 747.4}, {8, 118.3}, {16, 124.1}, {24, 130.0}, {32, 137.1}}},
      {16, 6, 2, 262144, {{1, 1925.6}, {8, 273.4}, {16, 280.4}, {24, 285.8}, {32, 292.5}}},
  };
  return v;
}

// Both rows together: each cell's plan (its row and its count, the wide row left to the plan)
// within 10 % of the best of both sweeps, and the wide row exactly where it was the faster by
// more than noise — the 16-SM cells at ≥ 32k (W 0.75–0.94× the 4 × 3 row); on 132 SMs the 4 × 3
// row's best count beat the wide row's on every cell (1.02–1.12×).
TEST(PlanWide, SeedCellsOfBothHd256RowsWithin10PercentOfTheBest) {
  const auto& rows = h200_seed_sweep();
  const auto& wide = h200_seed_sweep_wide();
  ASSERT_EQ(rows.size(), wide.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SeedCell& t = rows[i];
    const SeedCell& w = wide[i];
    ASSERT_TRUE(t.sms == w.sms && t.q_heads == w.q_heads && t.batch == w.batch && t.len == w.len);
    DecodeParams p = shape(t.batch, t.len, t.q_heads, 1, 256, DType::fp16);
    p.layout = KVLayout::vllm;
    const DecodePlan plan = plan_of(p, h200_seed_gpu(t.sms));
    expect_consistent(plan, p);
    double best = 1e30, chosen = -1;
    for (const SeedCell* c : {&t, &w})
      for (const auto& [splits, us] : c->us) {
        best = std::min(best, us);
        if (c == (plan.wide ? &w : &t) && splits == plan.num_splits) chosen = us;
      }
    const std::string cell = std::to_string(t.sms) + " SMs, " + std::to_string(t.q_heads) + " q heads, batch " +
                             std::to_string(t.batch) + " x " + std::to_string(t.len) + ": plan " +
                             (plan.wide ? "wide, " : "4 x 3, ") + std::to_string(plan.num_splits) + " partitions of " +
                             std::to_string(plan.partition_tokens);
    EXPECT_EQ(plan.wide, t.sms == 16 && t.len >= 32768) << cell;
    ASSERT_GT(chosen, 0) << cell << ", a count the sweep did not measure";
    EXPECT_LE(chosen, 1.10 * best) << cell << " measured " << chosen << " us, best " << best << " us";
    if (plan.wide) {
      EXPECT_EQ(plan.policy.num_warps, 12) << cell;
      EXPECT_GE(plan.partition_tokens, kDecodeWideMinTokens) << cell;
    }
  }
}

// The wide row is the plan's choice only; wide_row forces it (tests, tuning) or keeps it off.
DecodeParams seed_cell(int len, int q_heads = 4) {
  DecodeParams p = shape(1, len, q_heads, 1, 256, DType::fp16);
  p.layout = KVLayout::vllm;
  return p;
}

TEST(PlanWide, OffKeepsTheTargetsRowAndForcedTakesItAtAnyLength) {
  if (!is_compiled_target(90)) GTEST_SKIP() << "sm_90 is not a compiled target";
  const DecodeParams p = seed_cell(262144);
  const DecodePlan chosen = plan_of(p, gpu(16));
  EXPECT_TRUE(chosen.wide);
  const DecodePlan off = plan_of(p, gpu(16), PlanOptions{-1, 0, false, -1, 0});
  EXPECT_FALSE(off.wide);
  EXPECT_TRUE(off.policy == decode_policy(90, DType::fp16, 256));
  expect_consistent(off, p);
  for (int len : {1, 100, 1000}) {  // shorter than any partition the plan gives the row itself
    const DecodeParams q = seed_cell(len);
    const DecodePlan forced = plan_of(q, presets::h200, PlanOptions{-1, 0, false, -1, 1});
    EXPECT_TRUE(forced.wide) << len;
    expect_consistent(forced, q);
    EXPECT_FALSE(plan_of(q, gpu(16)).wide) << len;
  }
  const DecodePlan split = plan_of(p, presets::h200, PlanOptions{-1, 7, false, -1, 1});
  EXPECT_TRUE(split.wide);
  EXPECT_EQ(split.num_splits, 7);
  expect_consistent(split, p);
}

TEST(PlanWide, NeverOnTheH200sOwnSms) {
  // The default grid's hd-256 shapes and the seed's cells: on 132 SMs one SM's share of HBM bounds
  // both rows' CTAs alike (kSmShareCap), and the target's own row stays.
  for (int batch : {1, 2, 16, 64, 256})
    for (int len : {512, 2048, 8192, 32768, 262144}) {
      const DecodeParams nhd = shape(batch, len, 16, 4, 256, DType::bf16);
      EXPECT_FALSE(plan_of(nhd, presets::h200).wide) << batch << " x " << len;
      DecodeParams seed = shape(batch, len, 4, 1, 256, DType::fp16);
      seed.layout = KVLayout::vllm;
      EXPECT_FALSE(plan_of(seed, h200_seed_gpu(132)).wide) << batch << " x " << len;
    }
}

TEST(PlanWide, ACallTheRowCannotTakeKeepsTheTargetsRowAndForcingItIsAnError) {
  if (!is_compiled_target(90)) GTEST_SKIP() << "sm_90 is not a compiled target";
  struct Case {
    const char* name;
    DecodeParams p;
    int force_target;
    const char* says;
  };
  auto with = [](auto f) {
    DecodeParams p = seed_cell(262144);
    f(p);
    return p;
  };
  const Case cases[] = {
      {"group_12", seed_cell(262144, 12), -1, "8 query heads"},
      {"vllm_pages_of_32", with([](DecodeParams& p) {
         p.page_size = 32;
         p.max_blocks_per_seq = 262144 / 32;
       }), -1, "vLLM pages of 16"},
      {"nhd_pages_of_8", with([](DecodeParams& p) {
         p.layout = KVLayout::nhd;
         p.page_size = 8;
         p.max_blocks_per_seq = 262144 / 8;
       }), -1, "NHD pages"},
      {"fp8_cache", with([](DecodeParams& p) { p.kv.dtype = KVDType::fp8_e4m3; }), -1, "16-bit cache"},
      {"general_kind", with([](DecodeParams& p) { p.variant.softcap = 30.f; }), -1, "plain kind"},
      {"head_dim_128", shape(1, 262144, 4, 1, 128, DType::fp16), -1, "no wide decode row"},
      {"target_80", seed_cell(262144), 80, "no wide decode row"},
  };
  for (const Case& c : cases) {
    if (c.force_target > 0 && !is_compiled_target(c.force_target)) continue;
    DecodePlan plan;
    EXPECT_TRUE(plan_decode(c.p, gpu(16), PlanOptions{c.force_target, 0, false}, &plan).ok()) << c.name;
    EXPECT_FALSE(plan.wide) << c.name;
    const Status s = plan_decode(c.p, gpu(16), PlanOptions{c.force_target, 0, false, -1, 1}, &plan);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << c.name;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.name << ": " << s.message();
    EXPECT_NE(s.message().find("wide_row"), std::string::npos) << c.name << ": " << s.message();
  }
  DecodePlan plan;
  EXPECT_EQ(plan_decode(seed_cell(8192), gpu(16), PlanOptions{-1, 0, false, -1, 2}, &plan).code(),
            StatusCode::invalid_argument);
}

// The same cells over an e4m3 cache (the codes kernels: ldmatrix fragments of the codes, two CTAs
// a SM at hd 256), measured on an H100 (132 SMs, 3352 GB/s datasheet; and its 16-SM green
// partition) by bench/results/2026-12-06-fp8-nhd-fragments/call13 (seed/ and seed16/ JSONs:
// 132 SMs from the first, 16 SMs from the second). With the widening pass's per-code time in the
// model (5.97e-11 s) the plan filled both CTA slots of every SM on 132 SMs — 196–256 partitions at
// batch 1, 103–128 at batch 2 — and was 1.04–1.18× the best; with the fragments' own time
// (fp8_token_seconds, src/plan.cpp) one CTA a SM already takes the SM's share of HBM there, while
// on 16 SMs the second CTA still pays (32 / 16 partitions, the best). Some counts the plan takes
// were not timed in that run (`between`, above).
const std::vector<SeedCell>& h100_seed_sweep_e4m3() {
  static const std::vector<SeedCell> v = {
      {132, 4, 1, 8192, {{1, 100.9}, {8, 22.5}, {16, 16.8}, {32, 14.7}, {64, 14.6}, {128, 15.2}, {256, 18.1}, {512, 26.2}}},
      {132, 4, 1, 32768, {{1, 382.5}, {16, 34.3}, {32, 23.2}, {64, 19.8}, {128, 20.1}, {256, 23.2}, {342, 28.9}, {512, 30.5}}},
      {132, 4, 1, 100000, {{1, 1140.9}, {32, 46.8}, {64, 33.2}, {128, 32.7}, {131, 32.9}, {196, 35.0}, {250, 36.2},
                           {261, 36.4}, {391, 41.3}, {481, 43.2}, {521, 43.9}}},
      {132, 4, 1, 262144, {{1, 2908.0}, {64, 65.4}, {128, 63.2}, {132, 63.1}, {205, 66.2}, {256, 65.7}, {261, 66.0},
                           {391, 70.3}, {512, 71.6}}},
      {132, 4, 2, 8192, {{1, 98.8}, {8, 22.0}, {16, 17.0}, {32, 15.0}, {64, 15.2}, {128, 16.8}, {171, 21.3}, {256, 22.7}}},
      {132, 4, 2, 32768, {{1, 382.5}, {16, 35.2}, {32, 26.1}, {64, 25.1}, {128, 27.1}, {187, 31.5}, {256, 33.3}}},
      {132, 4, 2, 100000, {{1, 1140.6}, {32, 53.2}, {64, 50.6}, {66, 50.7}, {112, 52.2}, {128, 52.2}, {131, 52.2},
                           {196, 54.7}, {250, 57.0}, {261, 57.2}}},
      {132, 4, 2, 262144, {{1, 2912.1}, {32, 121.7}, {64, 112.0}, {66, 111.7}, {103, 116.1}, {128, 114.3}, {132, 114.2},
                           {198, 120.0}, {256, 120.3}, {261, 121.6}}},
      {132, 6, 1, 8192, {{1, 98.0}, {8, 22.6}, {16, 17.0}, {32, 14.8}, {64, 14.3}, {128, 15.0}, {256, 18.4}, {512, 27.0}}},
      {132, 6, 1, 32768, {{1, 383.0}, {16, 34.5}, {32, 24.0}, {64, 20.6}, {128, 20.5}, {256, 24.1}, {342, 30.1}, {512, 32.6}}},
      {132, 6, 1, 100000, {{1, 1141.0}, {32, 47.8}, {64, 33.9}, {128, 33.3}, {131, 33.1}, {196, 35.5}, {250, 36.9},
                           {261, 37.1}, {391, 42.2}, {481, 44.3}, {521, 45.1}}},
      {132, 6, 1, 262144, {{1, 2908.8}, {64, 65.9}, {128, 63.3}, {132, 63.4}, {205, 66.7}, {256, 66.3}, {261, 66.9},
                           {391, 71.3}, {512, 73.1}}},
      {132, 6, 2, 8192, {{1, 99.1}, {8, 22.2}, {16, 17.2}, {32, 15.5}, {64, 15.7}, {128, 17.3}, {171, 21.9}, {256, 23.7}}},
      {132, 6, 2, 32768, {{1, 376.7}, {16, 35.0}, {32, 26.3}, {64, 25.3}, {128, 27.2}, {187, 32.2}, {256, 34.2}}},
      {132, 6, 2, 100000, {{1, 1123.0}, {32, 52.9}, {64, 50.7}, {66, 51.0}, {112, 52.3}, {128, 52.4}, {131, 52.4},
                           {196, 55.6}, {250, 57.7}, {261, 57.3}}},
      {132, 6, 2, 262144, {{1, 2912.1}, {32, 122.2}, {64, 112.5}, {66, 112.2}, {103, 116.2}, {128, 114.4}, {132, 114.7},
                           {198, 120.2}, {256, 121.0}, {261, 122.5}}},
      {16, 4, 1, 8192, {{1, 100.8}, {8, 22.0}, {16, 16.8}, {32, 15.9}, {47, 20.1}, {64, 20.2}}},
      {16, 4, 1, 32768, {{1, 381.5}, {16, 34.2}, {32, 28.1}, {48, 32.8}, {64, 32.3}}},
      {16, 4, 1, 100000, {{1, 1143.2}, {16, 81.4}, {32, 61.3}, {48, 68.7}, {64, 65.1}}},
      {16, 4, 1, 262144, {{1, 2934.7}, {32, 135.4}, {48, 150.8}, {64, 139.6}}},
      {16, 4, 2, 8192, {{1, 101.3}, {8, 22.8}, {16, 20.0}, {24, 24.7}, {32, 23.7}}},
      {16, 4, 2, 32768, {{1, 380.8}, {8, 57.5}, {16, 43.7}, {24, 51.7}, {32, 47.8}}},
      {16, 4, 2, 100000, {{1, 1141.4}, {16, 108.1}, {24, 121.3}, {32, 111.7}}},
      {16, 4, 2, 262144, {{1, 2916.2}, {16, 257.2}, {24, 286.0}, {32, 260.2}}},
      {16, 6, 1, 8192, {{1, 101.1}, {8, 22.6}, {16, 17.2}, {32, 16.3}, {47, 20.7}, {64, 20.6}}},
      {16, 6, 1, 32768, {{1, 381.9}, {16, 34.5}, {32, 28.6}, {48, 33.5}, {64, 32.9}}},
      {16, 6, 1, 100000, {{1, 1143.5}, {16, 82.0}, {32, 61.9}, {48, 69.4}, {64, 65.9}}},
      {16, 6, 1, 262144, {{1, 2935.0}, {32, 136.1}, {48, 151.6}, {64, 140.2}}},
      {16, 6, 2, 8192, {{1, 101.3}, {4, 34.1}, {8, 22.9}, {16, 20.3}, {24, 25.5}, {32, 24.3}}},
      {16, 6, 2, 32768, {{1, 380.1}, {8, 57.7}, {16, 44.1}, {24, 51.4}, {32, 48.3}}},
      {16, 6, 2, 100000, {{1, 1141.1}, {16, 108.9}, {24, 122.2}, {32, 112.9}}},
      {16, 6, 2, 262144, {{1, 2917.4}, {16, 258.0}, {24, 287.1}, {32, 261.5}}},
  };
  return v;
}

// The same e4m3 cells on the lent H200 (132 SMs, 4814 GB/s), bench/results/2026-12-07-causal-key-split
// (call17, seed/ CSV). The plan of session 11's model (3.0e-11 s a code) took 256 partitions at
// batch 1 × 32k here (21.5 µs against 18.1 at 128: 1.19×); at 2.7e-11 it takes counts this run
// timed, 1.00–1.06× the best.
const std::vector<SeedCell>& h200_seed_sweep_e4m3() {
  static const std::vector<SeedCell> v = {
      {132, 4, 1, 8192, {{1, 102.4}, {8, 22.3}, {16, 16.6}, {32, 13.9}, {64, 13.5}, {128, 14.2}, {256, 17.4}, {512, 25.9}}},
      {132, 4, 1, 32768, {{1, 386.8}, {32, 23.3}, {64, 18.8}, {128, 18.1}, {256, 21.9}, {342, 26.9}, {512, 29.6}}},
      {132, 4, 1, 100000, {{1, 1158.9}, {64, 31.2}, {128, 27.3}, {131, 27.0}, {157, 28.9}, {250, 30.7}, {261, 30.6},
                           {391, 35.9}, {481, 38.8}, {521, 39.2}}},
      {132, 4, 1, 262144, {{1, 3031.0}, {64, 60.3}, {128, 48.8}, {132, 49.0}, {147, 51.7}, {256, 52.1}, {261, 52.2},
                           {391, 57.5}, {512, 59.7}}},
      {132, 4, 2, 8192, {{1, 102.8}, {8, 22.4}, {16, 16.5}, {32, 14.6}, {64, 14.5}, {128, 16.3}, {171, 20.6}, {256, 22.6}}},
      {132, 4, 2, 32768, {{1, 383.3}, {16, 34.5}, {32, 24.0}, {64, 21.3}, {86, 23.0}, {128, 23.2}, {187, 28.1}, {256, 30.2}}},
      {132, 4, 2, 100000, {{1, 1158.9}, {32, 47.7}, {64, 39.2}, {66, 38.8}, {72, 41.4}, {128, 41.0}, {131, 41.3},
                           {196, 45.3}, {250, 47.2}, {261, 47.2}}},
      {132, 4, 2, 262144, {{1, 3012.2}, {32, 111.0}, {64, 83.5}, {66, 84.0}, {76, 88.7}, {128, 86.1}, {132, 86.6},
                           {198, 94.0}, {256, 93.4}, {261, 94.5}}},
      {132, 6, 1, 8192, {{1, 102.7}, {8, 22.4}, {16, 16.3}, {32, 14.0}, {64, 13.7}, {128, 14.3}, {256, 17.7}, {512, 26.8}}},
      {132, 6, 1, 32768, {{1, 384.0}, {32, 23.3}, {64, 18.9}, {128, 18.5}, {256, 21.8}, {342, 27.7}, {512, 30.3}}},
      {132, 6, 1, 100000, {{1, 1153.8}, {64, 31.7}, {128, 27.6}, {131, 27.4}, {157, 29.6}, {250, 30.9}, {261, 31.4},
                           {391, 37.4}, {481, 39.7}, {521, 39.6}}},
      {132, 6, 1, 262144, {{1, 3010.8}, {64, 60.3}, {128, 48.9}, {132, 49.6}, {147, 51.6}, {256, 52.0}, {261, 52.5},
                           {391, 58.3}, {512, 59.9}}},
      {132, 6, 2, 8192, {{1, 102.1}, {8, 22.6}, {16, 16.8}, {32, 14.7}, {64, 14.9}, {128, 16.6}, {171, 21.3}, {256, 23.1}}},
      {132, 6, 2, 32768, {{1, 384.6}, {16, 35.2}, {32, 24.1}, {64, 21.5}, {86, 23.3}, {128, 23.5}, {187, 29.0}, {256, 30.7}}},
      {132, 6, 2, 100000, {{1, 1153.0}, {32, 48.4}, {64, 39.3}, {66, 39.9}, {72, 41.7}, {128, 41.2}, {131, 41.1},
                           {196, 46.1}, {250, 48.2}, {261, 47.8}}},
      {132, 6, 2, 262144, {{1, 3013.5}, {32, 111.7}, {64, 84.1}, {66, 84.4}, {76, 89.5}, {128, 86.5}, {132, 87.0},
                           {198, 95.1}, {256, 93.7}, {261, 95.0}}},
  };
  return v;
}

TEST(PlanModel, SeedCellsOverAnE4m3CacheWithin10PercentOfTheMeasuredBest) {
  auto h100 = [](int sms) {
    HardwareCapability hw = presets::h100;  // 3352 GB/s, the run's device block
    hw.sm_count = sms;
    return hw;
  };
  // Planned for the codes kernels' two CTAs a SM.
  expect_seed_plans_near_best(h100_seed_sweep_e4m3(), -1, Agent::sm80, h100, KVDType::fp8_e4m3, true, 2);
  expect_seed_plans_near_best(h200_seed_sweep_e4m3(), -1, Agent::sm80, h200_seed_gpu, KVDType::fp8_e4m3, true, 2);
}

// The slower CTA rate of the sm80 agent's cp.async copies of vLLM pages (kLatencyVllmSeconds)
// is theirs alone: NHD pages on a cp.async row (sm_80–89 have no TMA) keep the NHD rate, so one
// CTA (V1) of an NHD cell is modelled ~1.45× faster than the same cell in the vLLM layout (3.5 /
// 2.4 µs over the same bytes in flight) — where the SM's share of HBM does not cap both first: on
// the A100, and the A100's row forced on the H200. cdc35ed once gave the vLLM rate to every
// cp.async row (1535bc1 undid it) and no test saw it.
TEST(PlanModel, VllmCpAsyncCtaRateIsForVllmPagesOnly) {
  for (const auto& [hw, target] : {std::pair{presets::a100, -1}, std::pair{presets::h200, 80}}) {
    DecodeParams p = shape(1, 32768, 32, 8, 128, DType::bf16);
    PlanOptions v1;
    v1.force_target = target;
    v1.force_splits = 1;
    const DecodePlan nhd = plan_of(p, hw, v1);
    p.layout = KVLayout::vllm;
    const DecodePlan vllm = plan_of(p, hw, v1);
    ASSERT_EQ(nhd.policy.agent, Agent::sm80) << hw.name;
    ASSERT_FALSE(nhd.policy.tma) << hw.name;
    ASSERT_FALSE(nhd.use_v2 || vllm.use_v2) << hw.name;
    EXPECT_LT(nhd.est_seconds, 0.8 * vllm.est_seconds) << hw.name << ": NHD " << nhd.est_seconds << " s, vLLM "
                                                       << vllm.est_seconds << " s";
  }
}

// The portable agent (forced target 0: the BI-V100 profile's kernels) on the 16-SM partition,
// the same run (decode-seed-new.json, its portable rows). Planned in the seed's 512-token
// partitions it was 1.13–1.34× off at batch 1 × 8k and 100k; in 32-token ones
// (decode_split_tokens) every cell is within 10 %.
const std::vector<SeedCell>& h200_seed_sweep_portable() {
  static const std::vector<SeedCell> v = {
      {16, 4, 1, 8192, {{1, 501.7}, {16, 41.6}, {32, 31.1}, {47, 42.9}, {64, 33.6}, {74, 42.4}, {86, 38.2}, {103, 43.9}, {128, 37.8}}},
      {16, 4, 1, 32768, {{1, 1991.7}, {32, 94.9}, {48, 124.7}, {64, 96.9}, {79, 114.8}, {94, 101.8}, {108, 117.2}, {128, 101.1}}},
      {16, 4, 1, 100000, {{1, 6044.0}, {28, 298.0}, {32, 263.5}, {48, 345.8}, {64, 265.6}, {80, 316.4}, {95, 270.3},
                          {112, 298.8}, {128, 273.8}}},
      {16, 4, 1, 262144, {{1, 15742.0}, {32, 662.7}, {48, 860.5}, {64, 665.1}, {80, 774.8}, {96, 671.1}, {112, 726.8},
                          {128, 670.8}}},
      {16, 4, 2, 8192, {{1, 501.3}, {8, 73.9}, {16, 52.2}, {24, 67.9}, {32, 53.7}, {40, 66.5}, {47, 60.4}, {52, 63.1}, {64, 57.6}}},
      {16, 4, 2, 32768, {{1, 1984.6}, {16, 178.2}, {24, 230.4}, {32, 177.9}, {40, 212.0}, {48, 184.2}, {56, 207.2}, {64, 182.6}}},
      {16, 4, 2, 100000, {{1, 6011.4}, {16, 540.7}, {24, 666.0}, {32, 512.6}, {40, 605.7}, {48, 520.2}, {56, 568.4}, {64, 515.7}}},
      {16, 4, 2, 262144, {{1, 15736.7}, {16, 1309.7}, {24, 1713.6}, {32, 1309.5}, {40, 1436.1}, {48, 1312.5}, {56, 1402.7},
                          {64, 1313.5}}},
      {16, 6, 1, 8192, {{1, 663.4}, {16, 52.8}, {32, 40.8}, {47, 52.2}, {64, 43.6}, {74, 53.9}, {86, 49.4}, {103, 56.7}, {128, 48.0}}},
      {16, 6, 1, 32768, {{1, 2628.8}, {32, 131.0}, {48, 163.1}, {64, 133.5}, {79, 146.1}, {94, 139.8}, {108, 152.1}, {128, 138.4}}},
      {16, 6, 1, 100000, {{1, 8000.0}, {28, 427.4}, {32, 377.6}, {48, 425.4}, {64, 379.3}, {80, 410.4}, {95, 385.4},
                          {112, 396.9}, {128, 390.2}}},
      {16, 6, 1, 262144, {{1, 20888.9}, {32, 960.9}, {48, 1078.6}, {64, 964.3}, {80, 1031.0}, {96, 971.1}, {112, 1015.4},
                          {128, 968.7}}},
      {16, 6, 2, 8192, {{1, 661.3}, {8, 94.1}, {16, 70.7}, {24, 91.7}, {32, 72.6}, {40, 85.9}, {47, 81.9}, {52, 83.5}, {64, 77.0}}},
      {16, 6, 2, 32768, {{1, 2624.1}, {16, 251.0}, {24, 314.6}, {32, 252.3}, {40, 276.1}, {48, 260.9}, {56, 277.5}, {64, 256.4}}},
      {16, 6, 2, 100000, {{1, 7981.0}, {16, 786.1}, {24, 950.4}, {32, 741.4}, {40, 793.1}, {48, 751.2}, {56, 801.5}, {64, 744.5}}},
      {16, 6, 2, 262144, {{1, 20879.4}, {16, 1909.0}, {24, 2134.2}, {32, 1911.5}, {40, 2032.3}, {48, 1915.6}, {56, 1994.5},
                          {64, 1913.2}}},
  };
  return v;
}

TEST(PlanModel, SeedCellsOfThePortableAgentWithin10PercentOfTheMeasuredBestOn16Sms) {
  expect_seed_plans_near_best(h200_seed_sweep_portable(), 0, Agent::portable, h200_seed_gpu);
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
