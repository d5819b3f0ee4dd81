// params.hpp — the problem a call describes: PrefillParams (flash attention over a varlen batch)
// and DecodeParams (one query token per sequence over a paged KV cache). Plain values read by the
// plans (plan.hpp, prefill_plan.hpp) and by the entry points (attention.hpp); they include no
// plan and no kernel header.
//
// All pointers are device pointers; tensors are contiguous in the shapes given.
#pragma once

#include <cmath>

#include "muh/dtype.hpp"
#include "muh/kv_quant.hpp"
#include "muh/paged_kv.hpp"
#include "muh/variant.hpp"

namespace muh {

// ---- Prefill ------------------------------------------------------------------------------------
// Where a prefill call's K and V come from:
//   contiguous  k, v [total_k, num_kv_heads, head_dim] and cu_seqlens_k (FlashAttention's varlen)
//   paged_nhd   k_cache, v_cache [num_pages, page_size, num_kv_heads, head_dim]
//   paged_vllm  k_cache [num_pages, num_kv_heads, head_dim / x, page_size, x] (x = 16 B / elem),
//               v_cache [num_pages, num_kv_heads, head_dim, page_size]   (paged_kv.hpp)
// A paged call reads sequence b's keys 0 .. seqused_k[b] − 1 through block_table row b (key j in
// page block_table[b][j / page_size], slot j % page_size): the cached prefix and the new tokens of
// the chunk, which the caller wrote into the cache first (reshape_and_cache). Chunked prefill and
// prefix reuse are such calls. (KVSource is in paged_kv.hpp, which the kernels read too.)
// q   [total_q, num_q_heads, head_dim]         k, v [total_k, num_kv_heads, head_dim]
// out [total_q, num_q_heads, head_dim]         lse  [num_q_heads, total_q] fp32, or nullptr
// cu_seqlens_q / cu_seqlens_k: device int32 [batch + 1], FlashAttention's varlen convention.
// Causal masks are bottom-right aligned (query i sees keys j <= i + len_k − len_q).
// Paged (kv_source != contiguous): k, v, cu_seqlens_k are not read and total_k must be 0; len_k
// of sequence b is seqused_k[b] (device int32 [batch]), at most max_seqlen_k, the host-known bound
// that sizes the plan, which must fit the block table (max_seqlen_k <= max_blocks_per_seq ·
// page_size); every len_q <= its len_k. block_table is device int32 [batch, max_blocks_per_seq]
// holding page ids in [0, num_pages). page_size: a multiple of 16 bytes' worth of elements
// (8 for 16-bit dtypes, 4 for fp32), not necessarily a power of two (e.g. 528).
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
  // Paged K/V (see above); page_size, num_pages and max_blocks_per_seq are read only when paged.
  KVSource kv_source = KVSource::contiguous;
  int page_size = 0;
  int num_pages = 0;           // pages in the cache (block ids are checked against it with debug_checks)
  int max_blocks_per_seq = 0;  // columns of block_table

  friend bool operator==(const PrefillShape& a, const PrefillShape& b) {
    return a.dtype == b.dtype && a.batch == b.batch && a.total_q == b.total_q && a.total_k == b.total_k &&
           a.max_seqlen_q == b.max_seqlen_q && a.max_seqlen_k == b.max_seqlen_k && a.num_q_heads == b.num_q_heads &&
           a.num_kv_heads == b.num_kv_heads && a.head_dim == b.head_dim && a.causal == b.causal &&
           a.kv_source == b.kv_source &&
           (!is_paged(a.kv_source) || (a.page_size == b.page_size && a.num_pages == b.num_pages &&
                                       a.max_blocks_per_seq == b.max_blocks_per_seq));
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
  // Paged K/V (kv_source != contiguous):
  const void* k_cache = nullptr;     // in kv_source's layout
  const void* v_cache = nullptr;
  const int* block_table = nullptr;  // [batch, max_blocks_per_seq]
  const int* seqused_k = nullptr;    // [batch]: keys of each sequence (cached prefix + new tokens)
  // Sliding window, soft-capping, sinks, ALiBi (muh/variant.hpp; all off by default). The plan
  // records the instantiation kind it needs (PrefillPlan::variant), so a plan is made with the
  // variant the calls will use.
  Variant variant;
  // The paged cache's element type and scales (muh/kv_quant.hpp; DecodeParams::kv's meaning): by
  // default the cache holds `dtype`. An fp8 cache (paged K/V only, fp16 / bf16 q and out, no
  // variant) holds 1-byte codes in kv_source's layout (the vLLM layout's x is then 16; its value
  // pages a multiple of 16 slots) and is read by the sm80 agent's rows; the plan records its
  // type (PrefillPlan::kv_dtype).
  KVQuant kv;
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
  // Sliding window, soft-capping, sinks, ALiBi (muh/variant.hpp); the query is the sequence's
  // last token (i' = seq_len − 1).
  Variant variant;
  // The cache's element type and scales (muh/kv_quant.hpp): by default it holds `dtype`. An fp8
  // cache (fp16 / bf16 q and out) is read by both decode agents; its pages hold 1-byte elements
  // in `layout` (the vLLM layout's x is then 16).
  KVQuant kv;
};

// The scale a call applies to q·k: softmax_scale, or 1/sqrt(head_dim) when it is 0 (the default
// of PrefillParams and DecodeParams).
inline float effective_softmax_scale(float softmax_scale, int head_dim) {
  return softmax_scale > 0.f ? softmax_scale : 1.f / std::sqrt(static_cast<float>(head_dim));
}

// The scale of q·k as the kernels apply it, decode's and prefill's alike: the softmax scale,
// times an fp8 cache's k_scale (muh/kv_quant.hpp: the kernels multiply q by the codes; v_scale
// is applied to the output). A cache of q's type: the softmax scale times 1, the same bits.
inline float qk_scale(float softmax_scale, int head_dim, const KVQuant& kv) {
  return effective_softmax_scale(softmax_scale, head_dim) * (is_fp8(kv.dtype) ? kv.k_scale : 1.f);
}

}  // namespace muh
