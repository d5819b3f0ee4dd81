// attention.hpp — muh's public host API, plan/run for both families:
//   plan_prefill() → prefill(params, plan, workspace)       (flash attention over a varlen batch,
//                                                            K/V contiguous or from a paged cache)
//   plan_decode()  → paged_decode(params, plan, workspace)  (one query token per sequence, paged KV)
//   plan_mixed()   → paged_attention(params, plan, workspace) (a mixed batch over the paged cache:
//                                                            decodes, short rows and chunks)
// A plan is a host value made from a device profile (device_profile() below, or a preset); it
// names the dispatch target and policy (select.hpp), the split and the workspace. Runs take only
// what a run needs (the stream, debug checks): forcing a target or a split is a plan option.
//
// Every entry point validates its inputs first and returns a Status with one clear line; on a
// non-ok Status no kernel was launched. All pointers are device pointers unless said otherwise;
// tensors are contiguous in the shapes given (params.hpp).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "muh/config.hpp"
#include "muh/hardware.hpp"
#include "muh/input_errors.hpp"
#include "muh/mixed_plan.hpp"
#include "muh/params.hpp"
#include "muh/plan.hpp"
#include "muh/prefill_plan.hpp"
#include "muh/status.hpp"

namespace muh {

// How a call runs.
struct RunOptions {
  cudaStream_t stream = nullptr;
  bool debug_checks = false;  // extra input checks that need a device→host copy (block ids, cu_seqlens)
  // Where the kernels flag bad device-side inputs (muh/input_errors.hpp): kInputErrorWords int32
  // words the device can write (device memory, or mapped pinned host memory to read without a
  // sync: take_input_errors()). nullptr: the library's flags of the device (check_input_errors()).
  int* input_errors = nullptr;
};

// ---- Prefill ------------------------------------------------------------------------------------
// With a plan made by plan_prefill() for exactly this shape; `workspace` (device, 16-byte
// aligned) must hold plan.workspace_bytes, or be null when that is 0. The result differs from an
// unsplit plan's (PrefillPlanOptions::tail_chunk = kPrefillTailOff) only by fp32 rounding, and is
// the same on every run on one device.
// K/V from a paged cache (chunked prefill, prefix reuse; PrefillParams::kv_source, params.hpp)
// take the same entry points: set kv_source, k_cache / v_cache / block_table / seqused_k and
// page_size / num_pages / max_blocks_per_seq, leave k / v / cu_seqlens_k null and total_k 0 —
// make_paged_prefill() below does it. A non-causal paged call of equal q lengths splits its tail
// like a contiguous one (planned at max_seqlen_k: prefill_plan.hpp).
Status prefill(const PrefillParams& p, const PrefillPlan& plan, void* workspace, std::size_t workspace_bytes,
               const RunOptions& opt = {});

// The one-call form: plans on the current device's profile with every q tile whole, one CTA each
// (no workspace), then runs. A caller that repeats a shape, or wants the tail split or the sm90
// agent's persistent schedule (both need the plan's workspace), plans once.
Status prefill(const PrefillParams& p, const RunOptions& opt = {});

// The paged form of a prefill call's parameters: `shape` carries the sizes of q, the heads, dtype,
// causal and max_seqlen_q / max_seqlen_k; the rest names the cache. (A convenience: it sets the
// fields of PrefillParams listed above and nothing else.)
inline PrefillParams make_paged_prefill(PrefillParams shape, KVLayout layout, const void* k_cache, const void* v_cache,
                                        const int* block_table, const int* seqused_k, int page_size, int num_pages,
                                        int max_blocks_per_seq) {
  shape.kv_source = paged_source(layout);
  shape.k = shape.v = nullptr;
  shape.cu_seqlens_k = nullptr;
  shape.total_k = 0;
  shape.k_cache = k_cache;
  shape.v_cache = v_cache;
  shape.block_table = block_table;
  shape.seqused_k = seqused_k;
  shape.page_size = page_size;
  shape.num_pages = num_pages;
  shape.max_blocks_per_seq = max_blocks_per_seq;
  return shape;
}

// context_attention_fwd's two parts (prefill_plan.hpp, plan_context_prefill) as the fused plan
// runs them: one tail launch over both parts' pieces and their merge, into chunk.out and
// chunk.lse (the prefix part names the same out, lse, q and cu_seqlens_q). `workspace` (device,
// 16-byte aligned) holds plan.workspace_bytes. A plan that is not fused is refused (the caller
// runs the parts with prefill() and merges them: merge_states.hpp). The result equals the two
// parts merged by their LSE within fp32 rounding, and is the same on every run on one device.
Status context_prefill(const PrefillParams& prefix, const PrefillParams& chunk, const ContextPlan& plan,
                       void* workspace, std::size_t workspace_bytes, const RunOptions& opt = {});

// CTAs per SM the runtime grants the plan's kernel on the current device
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor), for comparison with the plan's estimate
// (plan.split.slots / plan.sm_count; prefill_ctas_per_sm()).
Status prefill_runtime_occupancy(const PrefillPlan& plan, int* ctas_per_sm);

// ---- Decode -------------------------------------------------------------------------------------
// With a plan made by plan_decode() for this shape; `workspace` (device) must hold
// plan.workspace_bytes (V2 partials), or be null when that is 0.
Status paged_decode(const DecodeParams& p, const DecodePlan& plan, void* workspace,
                    std::size_t workspace_bytes, const RunOptions& opt = {});

// ---- Mixed batches over the paged cache (mixed_plan.hpp) -----------------------------------------
// A paged prefill call's parameters (make_paged_prefill) run as plan_mixed() planned them: one
// paged-prefill launch, or the decode rows (a prefix of the batch) through paged_decode and the
// rest through the paged prefill, on opt.stream. `workspace` (device, 16-byte aligned) must hold
// plan.workspace_bytes, or be null when that is 0; a split plan writes no lse (p.lse must be null).
Status paged_attention(const PrefillParams& p, const MixedPlan& plan, void* workspace, std::size_t workspace_bytes,
                       const RunOptions& opt = {});

}  // namespace muh
