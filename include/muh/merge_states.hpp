// merge_states.hpp — vLLM's merge_attn_states: two attention partials over disjoint key sets
// (a shared prefix and a suffix, two halves of a context-parallel sequence) merged into one,
// row by row, with OnlineSoftmax's merge (kernels/online_softmax.hpp, kernels/merge_states.hpp
// for vLLM's conventions on ±inf lse).
//
//   output, prefix_output, suffix_output  [num_tokens, num_heads, head_dim], heads and dims packed,
//                                         a token stride each (0 = packed)
//   prefix_lse, suffix_lse                [num_heads, num_tokens] fp32, packed (vLLM's layout)
//   output_lse                            the same, or nullptr
// output may be prefix_output or suffix_output (the same pointer and stride: in place); it must
// not overlap them otherwise, and output_lse must not overlap the input lse.
#pragma once

#include <cstdint>

#include "muh/attention.hpp"  // RunOptions
#include "muh/dtype.hpp"
#include "muh/status.hpp"

namespace muh {

struct MergeStatesParams {
  DType dtype = DType::bf16;
  void* output = nullptr;
  float* output_lse = nullptr;
  const void* prefix_output = nullptr;
  const float* prefix_lse = nullptr;
  const void* suffix_output = nullptr;
  const float* suffix_lse = nullptr;
  int num_tokens = 0;
  int num_heads = 0;
  int head_dim = 0;
  // Token strides in elements; 0 = packed (num_heads · head_dim).
  std::int64_t output_token_stride = 0, prefix_token_stride = 0, suffix_token_stride = 0;
};

// Validates (no launch on a failure), then merges. num_tokens 0 is a no-op.
Status merge_attn_states(const MergeStatesParams& p, const RunOptions& opt = {});

// The host checks alone.
Status check_merge_states(const MergeStatesParams& p);

}  // namespace muh
