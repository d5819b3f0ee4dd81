// The seed's BI-V100 outputs, reproduced exactly: fp16/bf16 × head_dim {64, 128, 256} under the
// seed's backend situation (no native V2 ⇒ V1 forced, threshold = max_seq_len + 1). The values
// are what seed/muh_dispatch.py's select_attention_config returns for these inputs.
#include <gtest/gtest.h>

#include "muh/models.hpp"

namespace muh {
namespace {

struct SeedRow {
  DType dtype;
  int head_dim;
  int block;  // triton_block_m == triton_block_n
};

// seed: block_n = 64, halved while block_n·head_dim·2·2 > 49152 → 64 (hd 64), 64 (hd 128), 32 (hd 256).
constexpr SeedRow kSeedRows[] = {
    {DType::fp16, 64, 64}, {DType::fp16, 128, 64}, {DType::fp16, 256, 32},
    {DType::bf16, 64, 64}, {DType::bf16, 128, 64}, {DType::bf16, 256, 32},
};

class SeedTable : public ::testing::TestWithParam<SeedRow> {};

TEST_P(SeedTable, ReproducesSeedOutput) {
  const SeedRow r = GetParam();
  for (int max_seq_len : {1, 4096, 100000}) {
    for (int kv_heads : {1, 4, 8}) {
      const AttentionConfig c = select_attention_config(presets::bi_v100, r.dtype, r.head_dim,
                                                        max_seq_len, kv_heads, kSeedBackends);
      EXPECT_EQ(c.prefill.block_m, r.block);
      EXPECT_EQ(c.prefill.block_n, r.block);
      EXPECT_EQ(c.prefill.num_warps, 4);
      EXPECT_EQ(c.prefill.num_stages, 1);
      EXPECT_EQ(c.decode.partition_size, 512);
      EXPECT_EQ(c.v1_v2_threshold, max_seq_len + 1);
      EXPECT_TRUE(c.use_native_v1);
      EXPECT_FALSE(c.use_native_v2);
      EXPECT_TRUE(c.use_native_prefill);
      EXPECT_EQ(c.prefill.agent, Agent::portable);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BiV100, SeedTable, ::testing::ValuesIn(kSeedRows),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.dtype)) + "_hd" +
                                  std::to_string(info.param.head_dim);
                         });

TEST(SeedConfigs, Qwen36MatchesSeedMain) {
  // seed __main__: BLOCK_M=32 BLOCK_N=32 warps=4 stages=1, partition=512 v1_thresh=100001
  EXPECT_EQ(QWEN36_BF16.prefill.block_m, 32);
  EXPECT_EQ(QWEN36_BF16.prefill.block_n, 32);
  EXPECT_EQ(QWEN36_BF16.v1_v2_threshold, 100001);
  EXPECT_EQ(QWEN36_FP16.v1_v2_threshold, 100001);
  EXPECT_FALSE(QWEN36_BF16.use_native_v2);
}

// fp32: the seed halved its tile twice (loop on 4-byte elements, then "fp32 halves the block"):
// 32/16/8 at hd 64/128/256. muh fits the real footprint (Q + K + V tiles ≤ 48 KB) once.
TEST(SeedTable, Fp32FitsRealFootprintNotDoubleHalving) {
  const int expect[][2] = {{64, 64}, {128, 32}, {256, 16}};
  for (auto [hd, block] : expect) {
    const AttentionConfig c = select_attention_config(presets::bi_v100, DType::fp32, hd, 4096, 4, kSeedBackends);
    EXPECT_EQ(c.prefill.block_n, block) << "hd " << hd;
    EXPECT_LE(prefill_smem_bytes(c.prefill, DType::fp32, hd), 48 * 1024);
    // One step larger would not fit: the rule takes the largest tile that fits.
    PrefillPolicy bigger = c.prefill;
    bigger.block_m *= 2;
    bigger.block_n *= 2;
    if (bigger.block_n <= 64) EXPECT_GT(prefill_smem_bytes(bigger, DType::fp32, hd), 48 * 1024) << "hd " << hd;
  }
}

}  // namespace
}  // namespace muh
