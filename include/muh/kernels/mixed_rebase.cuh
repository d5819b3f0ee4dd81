// kernels/mixed_rebase.cuh — the first kernel of a split mixed call (mixed_plan.hpp): the prefill
// part's cu_seqlens_q, the call's offsets past the nd decode sequences less their q rows (nd, or
// the planned decode_tokens with short rows expanded), written into the plan's workspace, and the
// guard of the decodes-first contract. One CTA: a batch is at most a few thousand sequences, a
// few loads per thread.
//
//   cu_seqlens_q [batch + 1] (the call's, device)  →  cu_part [n_part] = cu_seqlens_q[nd + i] − base
//
// Subtracting the planned base rather than cu_seqlens_q[nd] keeps a broken contract visible: if
// the decode rows do not hold the planned queries, cu_part[0] != 0 and the paged prefill's own
// guard flags cu_seqlens_q_start for the part's first sequence. This kernel flags the decode
// rows themselves: cu_seqlens_q[0] != 0 as cu_seqlens_q_start, a decode sequence whose q length
// is outside [1, max_q] as seqlen_q_max (max_q: 1, or kMixedShortRowMaxQ expanded) — the decode
// kernel reads row s as sequence s and cannot see it.
#pragma once

#include "muh/kernels/input_guard.cuh"

namespace muh::kernels {

inline constexpr int kMixedRebaseThreads = 256;

__global__ void __launch_bounds__(kMixedRebaseThreads)
    mixed_rebase_kernel(const int* __restrict__ cu_seqlens_q, int nd, int base, int max_q, int n_part,
                        int* __restrict__ cu_part, int* input_errors) {
  bool bad_row = false;
  for (int i = static_cast<int>(threadIdx.x); i < nd; i += kMixedRebaseThreads) {
    const int n = cu_seqlens_q[i + 1] - cu_seqlens_q[i];
    bad_row |= n < 1 || n > max_q;
  }
  for (int i = static_cast<int>(threadIdx.x); i < n_part; i += kMixedRebaseThreads)
    cu_part[i] = cu_seqlens_q[nd + i] - base;
  const bool bad = __syncthreads_or(bad_row) != 0;
  if (threadIdx.x == 0) {
    if (cu_seqlens_q[0] != 0) flag_input_error(input_errors, InputError::cu_seqlens_q_start);
    if (bad) flag_input_error(input_errors, InputError::seqlen_q_max);
  }
}

}  // namespace muh::kernels
