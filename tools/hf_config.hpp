// hf_config.hpp — reads the attention shape of a model from a Hugging Face config.json, for
// `muh config --model-config`.
#pragma once

#include <optional>
#include <string>

#include "muh/dtype.hpp"

namespace muh::cli {

// What muh needs from a config.json. Fields the file does not give stay empty; the caller
// decides whether a command-line flag supplies them.
struct HfModelShape {
  std::string name;              // "_name_or_path", else the first of "architectures", else the file name
  std::optional<long long> head_dim;                 // head_dim, else hidden_size / num_attention_heads
  std::string head_dim_rule;                         // which of the two gave head_dim
  long long num_attention_heads = 0;
  long long num_kv_heads = 0;                        // num_key_value_heads, else num_attention_heads
  std::string kv_heads_rule;
  std::optional<long long> max_position_embeddings;
  std::optional<DType> dtype;                        // torch_dtype (or "dtype", transformers >= 4.56)
  std::string dtype_key;                             // the key it came from
  bool nested = false;                               // read from "text_config" (multimodal configs)
  std::string served_layers;  // hybrid models: which layers muh serves (empty: every layer is attention)
};

// Parses `path`. Throws UsageError with one line naming the file and the problem when the file
// cannot be read, is not JSON, or lacks num_attention_heads or both head_dim and hidden_size, or
// holds a value of the wrong type or an unknown dtype — or when the model's attention is one muh's
// kernels cannot compute (MLA: kv_lora_rank; a sliding window: sliding_window; soft-capping:
// attn_logit_softcapping; sinks: gpt-oss; ALiBi: BLOOM, MPT's attn_config.alibi), naming the field.
HfModelShape read_hf_config(const std::string& path);

}  // namespace muh::cli
