// models.hpp — configurations of known models, computed at compile time and checked with
// static_assert (the seed computed QWEN36_BF16 / QWEN36_FP16 at import time).
#pragma once

#include <array>
#include <string_view>

#include "muh/config.hpp"

namespace muh {

struct ModelShape {
  const char* name;
  int head_dim;
  int num_attention_heads;
  int num_kv_heads;
  int max_position_embeddings;
  DType dtype;
};

// Qwen3.6-class (the seed's deployment): head_dim 256 (qwen3_5.py: text_cfg.head_dim), 4 KV
// heads, 16 query heads, served with --max-model-len 100000, bf16.
inline constexpr ModelShape kQwen36{"qwen3.6", 256, 16, 4, 100000, DType::bf16};
inline constexpr ModelShape kLlama3_8B{"llama3-8b", 128, 32, 8, 8192, DType::bf16};
inline constexpr ModelShape kLlama3_70B{"llama3-70b", 128, 64, 8, 8192, DType::bf16};
inline constexpr ModelShape kMistral7B{"mistral-7b", 128, 32, 8, 32768, DType::bf16};

inline constexpr std::array<ModelShape, 4> kModels{kQwen36, kLlama3_8B, kLlama3_70B, kMistral7B};

constexpr const ModelShape* find_model(std::string_view name) {
  for (const auto& m : kModels)
    if (std::string_view(m.name) == name) return &m;
  return nullptr;
}

// The seed's two precomputed configs, on its hardware and backend situation.
inline constexpr AttentionConfig QWEN36_BF16 =
    select_attention_config(presets::bi_v100, DType::bf16, 256, 100000, 4, kSeedBackends);
inline constexpr AttentionConfig QWEN36_FP16 =
    select_attention_config(presets::bi_v100, DType::fp16, 256, 100000, 4, kSeedBackends);

// The seed's __main__ output: BLOCK_M=32 BLOCK_N=32 warps=4 stages=1, partition=512,
// v1_thresh=100001 (V1 forced), SMEM 32×256×2×2 = 32 KB ≤ 48 KB.
static_assert(QWEN36_BF16.prefill.block_m == 32 && QWEN36_BF16.prefill.block_n == 32);
static_assert(QWEN36_BF16.prefill.num_warps == 4 && QWEN36_BF16.prefill.num_stages == 1);
static_assert(QWEN36_BF16.decode.partition_size == 512 && QWEN36_BF16.v1_v2_threshold == 100001);
static_assert(QWEN36_BF16.use_native_v1 && !QWEN36_BF16.use_native_v2 && QWEN36_BF16.use_native_prefill);
static_assert(QWEN36_FP16 == QWEN36_BF16, "fp16 and bf16 have the same element size");
static_assert(check_config_inputs(presets::bi_v100, 256, 100000, 4).empty());

}  // namespace muh
