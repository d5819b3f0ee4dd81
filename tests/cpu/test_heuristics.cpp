// The V1/V2 threshold (heuristics.hpp) at its edges: tiny and huge GPUs, short and 100k
// contexts, the seed's backends. The decode policy is fixed here (partition 512, 2 CTAs/SM, as
// every table row has today) so that the expectations follow the formula, not table retuning:
//   L* = P + overhead · (bw / sm_count) / (B · (1 − kv_heads / (sm_count · ctas_per_sm))),
//   threshold = floor(L*) + 1, or max_seq_len + 1 ("never") when L* does not fit or V1 fills the GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "muh/config.hpp"
#include "muh/heuristics.hpp"

namespace muh {
namespace {

constexpr DecodePolicy kPolicy{Agent::portable, 4, 16, 1, 512, 2, 48 * 1024, "test"};

HardwareCapability gpu(int sms, int gbps) {
  HardwareCapability hw = presets::h200;
  hw.sm_count = sms;
  hw.memory_bandwidth_gbps = gbps;
  return hw;
}

// The formula, written out independently of heuristics.hpp.
long long expected_threshold(const HardwareCapability& hw, DType t, int hd, int kv, int max_len) {
  const double slots = double(hw.sm_count) * kPolicy.ctas_per_sm;
  if (kv >= slots) return max_len + 1;
  const double l = kPolicy.partition_size +
                   4e-6 * (hw.memory_bandwidth_gbps * 1e9 / hw.sm_count) / (2.0 * hd * dtype_size(t) * (1 - kv / slots));
  const long long th = (long long)std::floor(l) + 1;
  return th > max_len ? max_len + 1 : th;
}

struct EdgeCase {
  const char* name;
  HardwareCapability hw;
  DType dtype;
  int head_dim, kv_heads, max_seq_len;
  Backends backends;
  int expect;  // the threshold
};

const EdgeCase kEdges[] = {
    // Seed backends: V1 forced whatever the hardware.
    {"seed_backends_bi_v100", presets::bi_v100, DType::bf16, 256, 4, 100000, kSeedBackends, 100001},
    {"seed_backends_h200", presets::h200, DType::bf16, 256, 4, 100000, kSeedBackends, 100001},
    {"seed_backends_len_1", presets::h200, DType::fp16, 128, 8, 1, kSeedBackends, 2},
    // No native V1: always V2.
    {"no_native_v1", presets::h200, DType::bf16, 128, 8, 4096, Backends{false, true, true}, 0},
    // Tiny GPU: 1 SM × 2 CTAs = 2 slots; 4 KV heads already fill them → never split.
    {"tiny_gpu_kv_fill_every_slot", gpu(1, 100), DType::bf16, 256, 4, 100000, kMuhBackends, 100001},
    {"tiny_gpu_kv_equal_slots", gpu(2, 100), DType::bf16, 256, 4, 100000, kMuhBackends, 100001},
    // One slot left free: splitting pays only much later (the free slot is 1/4 of the GPU).
    {"tiny_gpu_one_free_slot", gpu(2, 100), DType::bf16, 256, 3, 100000, kMuhBackends, 1294},
    // Huge GPU: a thin slice of bandwidth per SM, so split as soon as one partition is exceeded.
    {"huge_gpu", gpu(1000, 10000), DType::bf16, 256, 4, 100000, kMuhBackends, 552},
    // Short context: L* (657 on the H200) is beyond max_seq_len → V1 always.
    {"short_context_h200", presets::h200, DType::bf16, 256, 4, 512, kMuhBackends, 513},
    {"context_just_below_threshold", presets::h200, DType::bf16, 256, 4, 656, kMuhBackends, 657},
    {"context_at_threshold", presets::h200, DType::bf16, 256, 4, 657, kMuhBackends, 657},
    // 100k contexts, the seed's model shape (bf16, head_dim 256, 4 KV heads).
    {"context_100k_h200", presets::h200, DType::bf16, 256, 4, 100000, kMuhBackends, 657},
    {"context_100k_bi_v100_muh", presets::bi_v100, DType::bf16, 256, 4, 100000, kMuhBackends, 764},
    {"context_100k_a100", presets::a100, DType::bf16, 256, 4, 100000, kMuhBackends, 588},
    {"context_100k_t4_fp32", presets::t4, DType::fp32, 128, 8, 100000, kMuhBackends, 547},
};

class V1V2Threshold : public ::testing::TestWithParam<EdgeCase> {};

TEST_P(V1V2Threshold, Edge) {
  const EdgeCase& c = GetParam();
  const int th = v1_v2_threshold(c.hw, kPolicy, c.dtype, c.head_dim, c.kv_heads, c.max_seq_len, c.backends);
  EXPECT_EQ(th, c.expect);
  if (c.backends == kMuhBackends) {
    EXPECT_EQ(th, expected_threshold(c.hw, c.dtype, c.head_dim, c.kv_heads, c.max_seq_len));
  }
  if (c.backends.native_v1) {
    // Splitting never pays within one partition: V2 only beyond partition_size tokens.
    EXPECT_GT(th, kPolicy.partition_size < c.max_seq_len ? kPolicy.partition_size : c.max_seq_len);
    EXPECT_LE(th, c.max_seq_len + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Edges, V1V2Threshold, ::testing::ValuesIn(kEdges),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- Monotonic in the inputs that should move it ---------------------------------------------------

TEST(V1V2ThresholdTrend, MoreKvHeadsNeverLowerIt) {
  int prev = 0;
  for (int kv = 1; kv <= 300; ++kv) {
    const int th = v1_v2_threshold(presets::h200, kPolicy, DType::bf16, 128, kv, 100000, kMuhBackends);
    EXPECT_GE(th, prev) << "kv " << kv;
    prev = th;
  }
  EXPECT_EQ(prev, 100001);  // 300 KV heads fill 264 slots: V1 only
}

TEST(V1V2ThresholdTrend, MoreSmsLowerIt) {
  // Same total bandwidth spread over more SMs: each V1 CTA gets less, splitting pays sooner.
  int prev = 1 << 30;
  for (int sms : {8, 16, 32, 64, 132, 264}) {
    const int th = v1_v2_threshold(gpu(sms, 4800), kPolicy, DType::bf16, 256, 4, 100000, kMuhBackends);
    EXPECT_LT(th, prev) << sms << " SMs";
    prev = th;
  }
}

TEST(V1V2ThresholdTrend, LargerTokensLowerIt) {
  // More bytes per token (head_dim, dtype) → the saved stream grows faster → split earlier.
  const int hd64 = v1_v2_threshold(presets::h200, kPolicy, DType::bf16, 64, 4, 100000, kMuhBackends);
  const int hd256 = v1_v2_threshold(presets::h200, kPolicy, DType::bf16, 256, 4, 100000, kMuhBackends);
  const int fp32 = v1_v2_threshold(presets::h200, kPolicy, DType::fp32, 256, 4, 100000, kMuhBackends);
  EXPECT_GT(hd64, hd256);
  EXPECT_GT(hd256, fp32);
}

TEST(V1V2ThresholdTrend, LargestContextDoesNotOverflow) {
  const int max_len = 0x3fffffff;  // check_config_inputs' limit
  EXPECT_EQ(v1_v2_threshold(presets::h200, kPolicy, DType::bf16, 256, 4, max_len, kSeedBackends), max_len + 1);
  EXPECT_EQ(v1_v2_threshold(gpu(1, 100), kPolicy, DType::bf16, 256, 4, max_len, kMuhBackends), max_len + 1);
}

// ---- Through select_attention_config with the real tables ------------------------------------------

TEST(V1V2ThresholdConfig, MuhBackendsUseHardwareNotAConstant) {
  // Same model, different hardware → different thresholds; none is the seed's "never".
  const auto h200 = select_attention_config(presets::h200, DType::bf16, 256, 100000, 4, kMuhBackends);
  const auto a100 = select_attention_config(presets::a100, DType::bf16, 256, 100000, 4, kMuhBackends);
  const auto biv = select_attention_config(presets::bi_v100, DType::bf16, 256, 100000, 4, kMuhBackends);
  EXPECT_LT(h200.v1_v2_threshold, 100001);
  EXPECT_LT(a100.v1_v2_threshold, 100001);
  EXPECT_LT(biv.v1_v2_threshold, 100001);
  EXPECT_NE(h200.v1_v2_threshold, a100.v1_v2_threshold);
  EXPECT_TRUE(h200.use_native_v2);
  // Each matches the formula for its own decode row.
  for (const auto& [hw, c] : {std::pair{presets::h200, h200}, std::pair{presets::a100, a100}, std::pair{presets::bi_v100, biv}})
    EXPECT_EQ(c.v1_v2_threshold, v1_v2_threshold(hw, c.decode, DType::bf16, 256, 4, 100000, kMuhBackends)) << hw.name;
}

}  // namespace
}  // namespace muh
