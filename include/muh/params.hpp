// params.hpp — the problem a call describes: PrefillParams (flash attention over a varlen batch)
// and DecodeParams (one query token per sequence over a paged KV cache). Plain values read by the
// plans (plan.hpp, prefill_plan.hpp) and by the entry points (attention.hpp); they include no
// plan and no kernel header.
//
// All pointers are device pointers; tensors are contiguous in the shapes given.
#pragma once

#include <cmath>

#include "muh/dtype.hpp"
#include "muh/paged_kv.hpp"

namespace muh {

// ---- Prefill ------------------------------------------------------------------------------------
// q   [total_q, num_q_heads, head_dim]         k, v [total_k, num_kv_heads, head_dim]
// out [total_q, num_q_heads, head_dim]         lse  [num_q_heads, total_q] fp32, or nullptr
// cu_seqlens_q / cu_seqlens_k: device int32 [batch + 1], FlashAttention's varlen convention.
// Causal masks are bottom-right aligned (query i sees keys j <= i + len_k − len_q).
// The sizes and flags of a prefill call: all a plan depends on (prefill_plan.hpp), so a plan is
// made for a PrefillShape and taken by exactly the calls of that shape.
struct PrefillShape {
  DType dtype = DType::bf16;
  int batch = 0;
  int total_q = 0;
  int total_k = 0;
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  bool causal = false;

  friend bool operator==(const PrefillShape& a, const PrefillShape& b) {
    return a.dtype == b.dtype && a.batch == b.batch && a.total_q == b.total_q && a.total_k == b.total_k &&
           a.max_seqlen_q == b.max_seqlen_q && a.max_seqlen_k == b.max_seqlen_k && a.num_q_heads == b.num_q_heads &&
           a.num_kv_heads == b.num_kv_heads && a.head_dim == b.head_dim && a.causal == b.causal;
  }
  friend bool operator!=(const PrefillShape& a, const PrefillShape& b) { return !(a == b); }
};

// A call: its shape, the device pointers, and the scale.
struct PrefillParams : PrefillShape {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  float softmax_scale = 0.f;  // 0 → 1/sqrt(head_dim)
};

// ---- Decode -------------------------------------------------------------------------------------
// q [num_seqs, num_q_heads, head_dim]; out [num_seqs, num_q_heads, head_dim];
// lse [num_seqs, num_q_heads] fp32 or nullptr; block_table [num_seqs, max_blocks_per_seq] int32;
// seq_lens [num_seqs] int32; k_cache / v_cache in `layout` (muh/paged_kv.hpp).
// A sequence of length 0 yields out = 0 and lse = −inf (padded CUDA-graph batches rely on it).
struct DecodeParams {
  DType dtype = DType::bf16;
  KVLayout layout = KVLayout::nhd;
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  const int* block_table = nullptr;
  const int* seq_lens = nullptr;
  int num_seqs = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int page_size = 16;
  int num_pages = 0;            // pages in the cache (bounds for debug_checks)
  int max_blocks_per_seq = 0;
  int max_seq_len = 0;          // host-known upper bound of seq_lens (sizes the plan)
  float softmax_scale = 0.f;    // 0 → 1/sqrt(head_dim)
};

// The scale a call applies to q·k: softmax_scale, or 1/sqrt(head_dim) when it is 0 (the default
// of PrefillParams and DecodeParams).
inline float effective_softmax_scale(float softmax_scale, int head_dim) {
  return softmax_scale > 0.f ? softmax_scale : 1.f / std::sqrt(static_cast<float>(head_dim));
}

}  // namespace muh
