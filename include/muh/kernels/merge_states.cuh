// kernels/merge_states.cuh — merge_attn_states: output = merge((prefix_output, prefix_lse),
// (suffix_output, suffix_lse)) row by row (the row math is merge_states.hpp's).
//
//   output, prefix_output, suffix_output  [num_tokens, num_heads, head_dim], a token stride each
//                                         (heads and dims packed)
//   prefix_lse, suffix_lse, output_lse    [num_heads, num_tokens] fp32 (vLLM's layout)
// One thread per kVec elements of a row (16 bytes where aligned, as vLLM's kernel): the row's
// two lse are read by each of its head_dim / kVec threads, from L1 — cheaper than a shuffle for a
// kernel that reads 2 and writes 1 rows of head_dim elements per two floats.
#pragma once

#include <cstdint>

#include "muh/kernels/merge_states.hpp"
#include "muh/kernels/numeric.cuh"
#include "muh/kernels/pack.hpp"

namespace muh::kernels::merge_states {

inline constexpr int kThreads = 128;

struct MergeStatesArgs {
  void* out = nullptr;
  float* out_lse = nullptr;  // optional
  const void* prefix = nullptr;
  const float* prefix_lse = nullptr;
  const void* suffix = nullptr;
  const float* suffix_lse = nullptr;
  int num_tokens = 0;
  int num_heads = 0;
  int head_dim = 0;
  // Token strides in elements.
  std::int64_t out_stride = 0, prefix_stride = 0, suffix_stride = 0;
};

template <class T, int kVec>
__global__ void __launch_bounds__(kThreads) merge_states_kernel(const MergeStatesArgs a) {
  const int per_row = a.head_dim / kVec;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= static_cast<std::int64_t>(a.num_tokens) * a.num_heads * per_row) return;
  const int chunk = static_cast<int>(i % per_row);
  const std::int64_t row = i / per_row;  // token · num_heads + head
  const int head = static_cast<int>(row % a.num_heads);
  const int token = static_cast<int>(row / a.num_heads);

  // 1. The row's weights from the two lse.
  const std::int64_t lse_at = static_cast<std::int64_t>(head) * a.num_tokens + token;
  const MergeWeights w = row_weights(a.prefix_lse[lse_at], a.suffix_lse[lse_at]);

  // 2. o = w.a · prefix + w.b · suffix, kVec elements, in fp32.
  const int dim = head * a.head_dim + chunk * kVec;
  const Pack<T, kVec> p = load_pack<T, kVec>(static_cast<const T*>(a.prefix) + token * a.prefix_stride + dim);
  const Pack<T, kVec> s = load_pack<T, kVec>(static_cast<const T*>(a.suffix) + token * a.suffix_stride + dim);
  Pack<T, kVec> o;
#pragma unroll
  for (int e = 0; e < kVec; ++e) o.v[e] = from_float<T>(merged(to_float(p.v[e]), to_float(s.v[e]), w));
  store_pack<T, kVec>(static_cast<T*>(a.out) + token * a.out_stride + dim, o);

  // 3. The merged lse, once per row.
  if (a.out_lse != nullptr && chunk == 0) a.out_lse[lse_at] = w.lse;
}

}  // namespace muh::kernels::merge_states
