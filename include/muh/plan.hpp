// plan.hpp — the decode plan: V1 or V2, split count, workspace. Host-only and GPU-free, so it is
// tested on the CPU and reused unchanged across CUDA-graph replays (FlashInfer's plan/run split).
#pragma once

#include <cstddef>

#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/params.hpp"
#include "muh/select.hpp"
#include "muh/status.hpp"
#include "muh/tuning/policy.hpp"

namespace muh {

struct PlanOptions {
  // -1: the selection walks the compiled targets (select.hpp); 0 (portable), 75, 80, ...: that
  // target's row exactly (tests, emulation of another profile). A policy only changes speed.
  int force_target = -1;
  int force_splits = 0;       // > 0: exactly this many partitions per sequence (tests, tuning),
                              // capped at ceil(max_seq_len / 16)
  bool cuda_graph = false;    // fixed for graph capture: see DecodePlan::cuda_graph
  int l2_evict_first = -1;    // -1: the plan chooses; 0 / 1: DecodePlan::l2_evict_first forced (tuning)
  // The target's wide row (DecodePlan::wide): -1 the plan chooses; 0 never; 1 always (tests,
  // tuning) — an error where the target has none or the call cannot take it.
  int wide_row = -1;
};

// What plan_decode() decided. A plan depends only on host-known values (shapes, max_seq_len,
// the hardware), never on the device-side seq_lens, so replaying it is always valid.
struct DecodePlan {
  int target = -1;             // dispatch target the kernels run (-1: no plan)
  DecodePolicy policy;         // its decode policy: the target's row, or its wide row
  // The policy is the target's wide row (tuning_sm90.hpp's kDecodeWide: 12 warps × 1 stage), taken
  // where each of the call's few CTAs streams a long range (plan.cpp); a speed choice only.
  bool wide = false;
  DecodeSelection selection;   // how target and policy were chosen (describe() words it)
  bool use_v2 = false;
  int num_splits = 1;          // partitions per sequence (1 for V1)
  int partition_tokens = 0;    // tokens per partition (a multiple of 16); max_seq_len for V1
  int head_chunks = 1;         // CTAs per KV head: ceil(group / 16)
  int ctas = 0;                // CTAs of the attention kernel (num_seqs · kv heads · chunks · splits)
  int ctas_per_sm = 0;         // resident CTAs a SM the split count was planned for: the policy's,
                               // or decode_sm80_codes_ctas_per_sm for an fp8 cache's codes kernel
  double est_seconds = 0;      // the plan's cost model for this choice (plan.cpp)
  DType dtype = DType::bf16;
  int num_seqs = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_seq_len = 0;         // the seq_len bound the plan was made for
  // false: paged_decode() takes this plan only for exactly its num_seqs and max_seq_len.
  // true:  the plan is a capacity — paged_decode() takes it for any num_seqs <= num_seqs and
  //        max_seq_len <= max_seq_len (a padded batch captured once and replayed), and the
  //        workspace is sized for the capacity.
  bool cuda_graph = false;
  // The sm80 agent's K/V copies carry an L2 evict-first policy (the cache is read once) when the
  // call reads little K/V for the L2 (plan.cpp: kEvictFirstL2Multiple); a speed choice only.
  bool l2_evict_first = true;
  std::size_t workspace_bytes = 0;  // V2 partials: o fp32 [num_seqs, splits, q heads, head_dim]
                                    // then lse fp32 [num_seqs, splits, q heads]
  // The attention-variant kind (muh/variant.hpp) of the calls it serves: variant_kind(p.variant).
  // Both decode agents have the hooks: a call of the general kind takes the row the selection
  // picks.
  VariantKind variant = VariantKind::plain;
  // The KV cache's element type (muh/kv_quant.hpp) of the calls it serves: fp8 caches run
  // kernels of their own (on either decode agent's rows).
  KVDType kv_dtype = KVDType::same;
};

// Chooses the plan for `p` on hardware `hw` (the present device, or a preset for tests).
Status plan_decode(const DecodeParams& p, const HardwareCapability& hw, const PlanOptions& opt,
                   DecodePlan* plan);

}  // namespace muh
