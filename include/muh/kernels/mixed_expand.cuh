// kernels/mixed_expand.cuh — the decode part of a split mixed call with short rows expanded
// (mixed_plan.hpp): decode row i (0 ≤ i < tokens, the call's q row i) is token t of sequence b,
// cu_seqlens_q[b] ≤ i < cu_seqlens_q[b + 1], t = i − cu_seqlens_q[b]. This kernel writes, into the
// plan's workspace, the row's kv length — the keys token t sees: seqused_k[b] − q_len + 1 + t under
// the causal mask (bottom-right), seqused_k[b] without — and its sequence's block-table row (the
// blocks that length reaches), so that the decode kernel reads each token as a sequence of its
// own. One warp per row: every lane finds b by the same binary search over cu_seqlens_q[0 .. nd]
// (L1 serves the repeats), then the lanes copy the block ids.
//
// The device arrays are inputs (muh/input_errors.hpp): cu_seqlens_q[0] != 0 flags
// cu_seqlens_q_start and cu_seqlens_q[nd] != tokens (the decode rows the plan was made for)
// cu_seqlens_q_end — rows past the planned ones would otherwise be left unwritten, or read by the
// prefill part too (without a prefill part the rebase kernel does not run); a row no decode
// sequence holds (cu_seqlens_q not increasing) gets length 0 and flags cu_seqlens_q_order; a decode sequence of more than max_q (kMixedShortRowMaxQ) queries flags
// seqlen_q_max, and one whose seqused_k lies outside [0, max_seqlen_k] flags seq_len — each with
// length 0, so that the decode kernel reads nothing for it. No write leaves [0, tokens) rows.
#pragma once

#include "muh/kernels/input_guard.cuh"

namespace muh::kernels {

inline constexpr int kMixedExpandWarps = 8;

struct MixedExpandArgs {
  const int* cu_seqlens_q;  // [batch + 1] (the call's; the decode sequences are 0 .. nd − 1)
  const int* seqused_k;     // [batch]
  const int* block_table;   // [batch][max_blocks]
  int nd, tokens, max_blocks, page_size, max_q, max_seqlen_k;
  bool causal;
  int* lens;                // [tokens] (workspace)
  int* table;               // [tokens][max_blocks] (workspace)
  int* input_errors;
};

__global__ void __launch_bounds__(kMixedExpandWarps * 32) mixed_expand_kernel(const MixedExpandArgs a) {
  const int lane = threadIdx.x & 31;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if (a.cu_seqlens_q[0] != 0) flag_input_error(a.input_errors, InputError::cu_seqlens_q_start);
    if (a.cu_seqlens_q[a.nd] != a.tokens) flag_input_error(a.input_errors, InputError::cu_seqlens_q_end);
  }
  const int i = static_cast<int>(blockIdx.x) * kMixedExpandWarps + static_cast<int>(threadIdx.x >> 5);
  if (i >= a.tokens) return;
  // The last b in [0, nd) with cu_seqlens_q[b] <= i (cu_seqlens_q[0] is 0 in a valid call).
  int lo = 0, hi = a.nd - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (a.cu_seqlens_q[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  const int b = lo, q0 = a.cu_seqlens_q[b], q1 = a.cu_seqlens_q[b + 1];
  int len = 0;
  if (q0 > i || i >= q1) {
    if (lane == 0) flag_input_error(a.input_errors, InputError::cu_seqlens_q_order);
  } else if (q1 - q0 > a.max_q) {
    if (lane == 0) flag_input_error(a.input_errors, InputError::seqlen_q_max);
  } else {
    const int used = a.seqused_k[b];
    if (used < 0 || used > a.max_seqlen_k) {
      if (lane == 0) flag_input_error(a.input_errors, InputError::seq_len);
    } else {
      len = a.causal ? used - (q1 - q0) + 1 + (i - q0) : used;
      len = len < 0 ? 0 : len;  // (a causal row with fewer keys than queries: its first tokens see none)
    }
  }
  if (lane == 0) a.lens[i] = len;
  const int blocks = (len + a.page_size - 1) / a.page_size;  // ≤ max_blocks: len ≤ max_seqlen_k (checked on the host)
  const int* src = a.block_table + static_cast<long long>(b) * a.max_blocks;
  int* dst = a.table + static_cast<long long>(i) * a.max_blocks;
  for (int k = lane; k < blocks; k += 32) dst[k] = src[k];
}

}  // namespace muh::kernels
