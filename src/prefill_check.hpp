// prefill_check.hpp — input checks shared by plan_prefill() (prefill_plan.cpp) and prefill()
// (prefill.cu). Internal, not installed. Nothing here looks at device memory or calls CUDA, so
// every failure is reported on a machine without a GPU.
#pragma once

#include <cstddef>
#include <string>

#include "muh/attention.hpp"
#include "muh/params.hpp"
#include "muh/prefill_plan.hpp"
#include "muh/status.hpp"

namespace muh::detail {

// dtype, head_dim (supported), heads (>= 1, q a multiple of kv), sizes (>= 0, max lengths
// consistent with the totals), softmax_scale (finite, >= 0), the grid bound. Whether the
// (dtype, head_dim) instance is compiled, and the pointers, are prefill()'s business (a plan is a
// host value, made for any supported shape).
Status check_prefill_shape(const PrefillParams& p, const char* where);

// The paged part of check_prefill_shape() (kv_source paged): layout, total_k 0, page_size (> 0, a
// multiple of 16 bytes of elements), num_pages and max_blocks_per_seq >= 1, max_seqlen_k covered
// by the block table, max_seqlen_q <= max_seqlen_k.
Status check_paged_prefill_shape(const PrefillParams& p, const std::string& where);

// The cache's element type and scales (PrefillParams::kv): a known type; an fp8 cache paged, with
// fp16 / bf16 q, no variant, finite scales > 0, and vLLM pages of a multiple of 16 slots.
Status check_prefill_kv_quant(const PrefillParams& p, const std::string& where);

// The debug_checks of a paged call on host copies of its device tables: cu_seqlens_q [batch + 1]
// (0 .. total_q, non-decreasing, lengths <= max_seqlen_q), seqused_k [batch] (in [0,
// max_seqlen_k], >= the sequence's q length) and block_table [batch, max_blocks_per_seq] (the
// ids of the blocks a sequence uses in [0, num_pages)). prefill() copies them (a stream sync).
Status check_paged_tables_host(const PrefillParams& p, const int* cu_seqlens_q, const int* seqused_k,
                               const int* block_table);

// The (dtype, head_dim) instance is compiled into this build (MUH_DTYPES × MUH_HEAD_DIMS).
Status check_prefill_compiled(const PrefillParams& p);

// Non-null where something is read or written, 16-byte aligned tensors, 4-byte aligned lse and
// cu_seqlens. Only for a call with work (batch > 0 and total_q > 0).
Status check_prefill_pointers(const PrefillParams& p);

// Everything about a call's inputs that needs no device: the shape and, where there is work, the
// instance (compiled) and the pointers — in that order. The entry points that run (prefill(), its
// one-call form, muh_prefill()) call it once, before any CUDA call.
Status check_prefill_call(const PrefillParams& p);

// plan_prefill() after its check_prefill_shape(), and prefill() after its check_prefill_call(),
// for a caller that ran them (the C ABI and the one-call form: each input checked once per call).
Status plan_prefill_unchecked(const PrefillParams& p, const HardwareCapability& hw, const PrefillPlanOptions& opt,
                              PrefillPlan* plan);
Status prefill_unchecked(const PrefillParams& p, const PrefillPlan& plan, void* workspace, std::size_t workspace_bytes,
                         const RunOptions& opt);

}  // namespace muh::detail
