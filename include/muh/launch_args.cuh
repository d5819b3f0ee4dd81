// launch_args.cuh — the kernels' arguments of a validated call: the glue between the API layer
// (params.hpp, plan.hpp) and the kernels (kernels/*_common.cuh), which know nothing of the API.
// Used by src/prefill.cu and src/decode.cu, and by the benchmarks and GPU tests that launch a
// candidate policy on the arguments a call would have.
#pragma once

#include "muh/kernels/decode_common.cuh"
#include "muh/kernels/numeric.cuh"
#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/prefill_kv.cuh"
#include "muh/kernels/variant.cuh"
#include "muh/params.hpp"
#include "muh/plan.hpp"

namespace muh::detail {

// Prefill's kernel arguments; the grid is sized by launch_prefill() from its policy.
inline kernels::PrefillArgs make_prefill_args(const PrefillParams& p) {
  kernels::PrefillArgs a;
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.out = p.out;
  a.lse = p.lse;
  a.cu_seqlens_q = p.cu_seqlens_q;
  a.cu_seqlens_k = p.cu_seqlens_k;
  a.batch = p.batch;
  a.total_q = p.total_q;
  a.num_q_heads = p.num_q_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.group = p.num_q_heads / p.num_kv_heads;
  a.max_seqlen_q = p.max_seqlen_q;
  // An fp8 cache's k_scale folded in (params.hpp's qk_scale): lse comes out in the true scores' units.
  a.scale = qk_scale(p.softmax_scale, p.head_dim, p.kv);
  a.scale_log2 = a.scale * kernels::kLog2e;
  a.causal = p.causal;
  a.total_k = p.total_k;
  a.max_seqlen_k = p.max_seqlen_k;
  return a;
}

// A paged prefill's K/V (p.kv_source paged): the kernels' second argument.
inline kernels::PrefillPagedKV make_prefill_paged_kv(const PrefillParams& p) {
  kernels::PrefillPagedKV kv;
  kv.k_cache = p.k_cache;
  kv.v_cache = p.v_cache;
  kv.block_table = p.block_table;
  kv.seqused_k = p.seqused_k;
  kv.page_size = p.page_size;
  kv.max_blocks_per_seq = p.max_blocks_per_seq;
  kv.num_kv_heads = p.num_kv_heads;
  kv.num_pages = p.num_pages;
  kv.page_div = kernels::FastDiv::make(p.page_size > 0 ? p.page_size : 1);
  kv.v_scale = is_fp8(p.kv.dtype) ? p.kv.v_scale : 1.f;  // an fp8 cache's V dequantisation, at the output
  return kv;
}

// Decode's kernel arguments for `plan` (src/decode.cu); `workspace` holds the V2 partials.
kernels::decode::DecodeArgs make_decode_args(const DecodeParams& p, const DecodePlan& plan, void* workspace);

}  // namespace muh::detail
