// kernels/merge_states.hpp — vLLM's merge_attn_states on one row (token, head), host and device:
// the weights of the two partials and the merged element. The kernel (merge_states.cuh) and the
// CPU tests (tests/cpu/test_merge_states.cpp) call these same functions; the merge itself is
// online_softmax.hpp's (merge_weights(): OnlineSoftmax's two add()s).
//
// vLLM's conventions on the inputs (csrc/attention/merge_attn_states.cu, current main):
//   * an lse of +inf is read as −inf: FlashAttention 2 returns +inf for a row with no keys,
//     FlashAttention 3 −inf; both mean "empty";
//   * both partials empty: the output is prefix_output (vLLM copies it; muh's kernels write 0
//     there) and the merged lse −inf — vLLM's fix for MLA chunked prefill, where the triton
//     version and vLLM ≤ 0.8 gave NaN.
// Where muh differs: a partial of weight 0 contributes 0, not 0 · o (vLLM's NaN when an empty
// partial's output holds NaN or inf, as an unwritten buffer may).
#pragma once

#include <cmath>

#include "muh/host_device.hpp"
#include "muh/kernels/online_softmax.hpp"

namespace muh::kernels::merge_states {

MUH_HOST_DEVICE MUH_FORCEINLINE float empty_if_inf(float lse) { return lse == INFINITY ? -INFINITY : lse; }

// The row's weights: o = w.a · prefix + w.b · suffix, lse = w.lse.
MUH_HOST_DEVICE MUH_FORCEINLINE MergeWeights row_weights(float prefix_lse, float suffix_lse) {
  const float p = empty_if_inf(prefix_lse), s = empty_if_inf(suffix_lse);
  if (p == -INFINITY && s == -INFINITY) return {1.f, 0.f, -INFINITY};  // both empty: prefix_output
  return merge_weights(p, s);
}

MUH_HOST_DEVICE MUH_FORCEINLINE float merged(float prefix, float suffix, const MergeWeights& w) {
  return (w.a == 0.f ? 0.f : prefix * w.a) + (w.b == 0.f ? 0.f : suffix * w.b);
}

}  // namespace muh::kernels::merge_states
