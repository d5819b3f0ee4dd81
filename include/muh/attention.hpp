// attention.hpp — muh's public host API: prefill() (flash attention over a varlen batch) and
// paged_decode() (one query token per sequence over a paged KV cache), with plan_decode().
//
// Every entry point validates its inputs first and returns a Status with one clear line; on a
// non-ok Status no kernel was launched. All pointers are device pointers unless said otherwise;
// tensors are contiguous in the shapes given.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "muh/config.hpp"
#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/kernels/paged_kv.hpp"
#include "muh/status.hpp"

namespace muh {

// How a call runs. A forced target picks the policy of that dispatch target instead of the
// present device's: e.g. 0 runs the portable agent (the BI-V100 profile) with its 48 KB cap,
// 75 the T4 rows, 80 the A100 rows. The target must be compiled in (MUH_TARGETS) and not newer
// than the device. A policy only changes speed, never the result.
struct RunOptions {
  int force_target = -1;        // -1: the present device's best compiled target
  cudaStream_t stream = nullptr;
  bool debug_checks = false;    // extra input checks that need a device→host copy (block ids)
  // Prefill's tail split (prefill_plan.hpp): -1 lets the plan decide (only with a workspace),
  // 0 never splits, > 0 forces this many key tiles per tail CTA where the agent and the shape
  // allow a split (tests, tuning; then a workspace of prefill_workspace_size() is required).
  int prefill_tail_chunk = -1;
};

// ---- Prefill ------------------------------------------------------------------------------------
// q   [total_q, num_q_heads, head_dim]         k, v [total_k, num_kv_heads, head_dim]
// out [total_q, num_q_heads, head_dim]         lse  [num_q_heads, total_q] fp32, or nullptr
// cu_seqlens_q / cu_seqlens_k: device int32 [batch + 1], FlashAttention's varlen convention.
// Causal masks are bottom-right aligned (query i sees keys j <= i + len_k − len_q).
struct PrefillParams {
  DType dtype = DType::bf16;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int batch = 0;
  int total_q = 0;
  int total_k = 0;
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float softmax_scale = 0.f;  // 0 → 1/sqrt(head_dim)
  bool causal = false;
  // Optional device scratch for the tail split (prefill_plan.hpp): with it, a non-causal batch of
  // equal lengths whose last round of CTAs would run part-empty runs those tiles by key range
  // and merges them. prefill_workspace_size() gives the bytes; null runs every tile whole. The
  // result differs from the unsplit one only by fp32 rounding (tests: within the tolerance), and
  // is the same on every run on one device.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

Status prefill(const PrefillParams& p, const RunOptions& opt = {});

// The workspace prefill(p, opt) would use on the present device (0: no split for this shape).
// Sizes and flags of `p` matter, its pointers do not.
Status prefill_workspace_size(const PrefillParams& p, const RunOptions& opt, std::size_t* bytes);

// The scale a call applies to q·k: softmax_scale, or 1/sqrt(head_dim) when it is 0 (the default
// of PrefillParams and DecodeParams).
inline float effective_softmax_scale(float softmax_scale, int head_dim) {
  return softmax_scale > 0.f ? softmax_scale : 1.f / std::sqrt(static_cast<float>(head_dim));
}

// ---- Decode -------------------------------------------------------------------------------------
// q [num_seqs, num_q_heads, head_dim]; out [num_seqs, num_q_heads, head_dim];
// lse [num_seqs, num_q_heads] fp32 or nullptr; block_table [num_seqs, max_blocks_per_seq] int32;
// seq_lens [num_seqs] int32; k_cache / v_cache in `layout` (kernels/paged_kv.hpp).
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

}  // namespace muh

#include "muh/plan.hpp"
#include "muh/prefill_plan.hpp"

namespace muh {

// What prefill(p, opt) would run on the present device, and why: the dispatch target and its
// policy, the tail split (its slots assume prefill_ctas_per_sm()), and the CTAs per SM the
// runtime grants that policy's kernel, for comparison. Pointers of `p` do not matter.
struct PrefillExplain {
  int target = -1;
  PrefillPolicy policy;
  int sm_count = 0;
  int device_ctas_per_sm = 0;  // cudaOccupancyMaxActiveBlocksPerMultiprocessor
  PrefillSplit split;
};
Status explain_prefill(const PrefillParams& p, const RunOptions& opt, PrefillExplain* out);

// Decode with a plan made by plan_decode() for this shape; `workspace` (device) must hold
// plan.workspace_bytes (V2 partials), or be null when that is 0.
Status paged_decode(const DecodeParams& p, const DecodePlan& plan, void* workspace,
                    std::size_t workspace_bytes, const RunOptions& opt = {});

}  // namespace muh
