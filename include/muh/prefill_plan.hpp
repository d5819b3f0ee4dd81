// prefill_plan.hpp — the prefill plan: which dispatch target and policy run (select.hpp), the
// tail split of the launch, and the workspace it needs. Host-only and GPU-free, so it is tested
// on the CPU (tests/cpu/test_prefill_plan.cpp), mirroring plan_decode() (FlashInfer's plan/run
// split): plan_prefill() once per shape, prefill(params, plan, workspace) per call.
//
// The tail split exists because every q tile of a non-causal batch of equal lengths costs the
// same, so the CTAs of a launch finish in lock-step rounds of `slots` (resident CTAs) and the
// last, partly filled round costs a whole round. Measured on the H200 (bench/results/prefill-h200-2026-11-30-waves.md):
// muh's TFLOP/s follows tiles ÷ slots ÷ ceil(tiles ÷ slots) within 1 % — hd256 308 / 317 / 329 at
// 15.03 / 15.52 / 16.00 rounds — which left the 4k cells (15.5 rounds) at parity with
// FlashAttention-2. The split runs the last tiles (tiles mod slots of them) by key range instead,
// spread evenly over every slot, and merges the pieces (kernels/prefill_merge.cuh).
#pragma once

#include <cstddef>

#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/params.hpp"
#include "muh/select.hpp"
#include "muh/status.hpp"
#include "muh/tuning/policy.hpp"

namespace muh {

// PrefillPlanOptions::tail_chunk values besides a forced chunk (> 0).
inline constexpr int kPrefillTailAuto = -1;  // the plan decides (then prefill() needs the workspace it sizes)
inline constexpr int kPrefillTailOff = 0;    // never split

struct PrefillSplit {
  int tiles = 0;        // q tiles of the launch: ceil(max_seqlen_q / block_m) · batch · q heads
  int slots = 0;        // CTAs resident at once: SMs · prefill_ctas_per_sm()
  int key_tiles = 0;    // key tiles of every q tile: ceil(max_seqlen_k / block_n)
  int tail_tiles = 0;   // the last tiles, run by key range (0: no split)
  int tail_chunk = 0;   // key tiles per tail CTA
  int tail_ctas = 0;    // ceil(tail_tiles · key_tiles / tail_chunk)
  int ws_slots = 0;     // partials: tail_ctas + tail_tiles − 1
  double est_rounds = 0;           // the cost model's time in whole-tile rounds (prefill_plan.cpp)
  // The workspace: o fp32 [ws_slots][block_m][head_dim], then lse fp32 [ws_slots][block_m], which
  // starts ws_lse_offset floats in. Laid out here only; prefill() and the kernels follow it.
  std::size_t ws_lse_offset = 0;
  std::size_t workspace_bytes = 0;
  bool split() const { return tail_tiles > 0; }
};

// CTAs of `policy` one SM holds, from its shared memory footprint (plus the 1 KB the runtime
// reserves per CTA) against the SM's, its threads, and 255 registers per thread (the tensor-core
// rows are built with __launch_bounds__(threads) only and use them). The GPU test
// PrefillSplit.PlannedSlotsMatchTheRuntimeOccupancy checks it against
// cudaOccupancyMaxActiveBlocksPerMultiprocessor: equal on the H200 for every compiled instance at
// its own target (eb12bcc). Other GPUs and the emulated targets are not checked.
int prefill_ctas_per_sm(const PrefillPolicy& policy, DType dtype, int head_dim, const HardwareCapability& hw);

// Whether `p` can be split at all: a tensor-core agent (the portable one has no partial
// epilogue), every sequence of max length (total = batch · max, for q and for k) — so every q
// tile sees the same key tiles — at least one key, and no variant (the general kind has no tail
// kernel: a window gives the q tiles different key ranges, and the sink would have to be folded
// in the merge). A causal call only where every q tile sees at least 3/4 of the keys (a short
// chunk over a long prefix; prefill_plan.cpp says why). Paged K/V: the q lengths as above, the
// keys planned at max_seqlen_k (seqused_k lives on the device).
bool prefill_split_applies(const PrefillParams& p, const PrefillPolicy& policy);

// The split for `p` run by `policy` on `hw`. tail_chunk: kPrefillTailAuto (the cost model
// chooses, and may choose none), kPrefillTailOff, or a forced chunk of key tiles per tail CTA
// (clamped to [1, key_tiles]; the tail is then tiles mod slots, or the last round when that is 0).
PrefillSplit plan_prefill_split(const PrefillParams& p, const PrefillPolicy& policy, const HardwareCapability& hw,
                                int tail_chunk);

struct PrefillPlanOptions {
  // -1: the selection walks the compiled targets (select.hpp); 0 (portable), 75, 80, ...: that
  // target's row exactly (tests, emulation of another profile). A policy only changes speed.
  int force_target = -1;
  // The tail split: kPrefillTailAuto (the cost model decides), kPrefillTailOff (every q tile
  // whole, one CTA each, no workspace), or > 0: this many key tiles per tail CTA where the agent
  // and the shape allow a split (tests, tuning). The persistent schedule needs a workspace too:
  // a plan with kPrefillTailOff has none.
  int tail_chunk = kPrefillTailAuto;
};

// The persistent schedule: the sm90 agent (contiguous or paged NHD K/V), where a call has more q tiles than
// CTAs fit on the SMs at once (split.tiles > split.slots) and the plan may ask for a workspace
// (tail_chunk is not kPrefillTailOff). One CTA per slot computes q tile after q tile, each taking
// the next from a counter in the workspace, so that a tile's Q and first K/V tiles load during the
// epilogue of the one before (kernels/prefill_sm90.cuh). Measured: bench/results/
// h100-2026-12-06-sm90-persistent/.
struct PrefillPersistent {
  int ctas = 0;                   // CTAs of the launch (0: none, one CTA per q tile)
  std::size_t counter_offset = 0;  // bytes into the workspace: one int, zeroed by prefill() on the stream
  bool on() const { return ctas > 0; }
};

// What plan_prefill() decided. It depends only on host-known values — the shape (sizes, heads,
// dtype, causal), never the pointers or the device-side cu_seqlens — so one plan serves every
// call of that shape.
struct PrefillPlan {
  int target = -1;             // dispatch target the kernels run (-1: no plan)
  PrefillPolicy policy;        // its prefill policy
  PrefillSelection selection;  // how target and policy were chosen (describe() words it)
  int device_cc = 0;           // the profile's compute capability (0: own arch)
  int sm_count = 0;            // the profile's SMs: the split's slots are counted on them
  PrefillSplit split;
  PrefillPersistent persistent;
  // prefill() needs this much scratch: split.workspace_bytes, then with the persistent schedule
  // its counter (16 bytes at counter_offset).
  std::size_t workspace_bytes = 0;
  PrefillShape shape;          // what it was made for: prefill() takes it for exactly this shape
  // The attention-variant kind the plan's kernels are instantiated for (muh/variant.hpp):
  // variant_kind(p.variant) of the call it was made for; prefill() takes it only for calls of
  // that kind.
  VariantKind variant = VariantKind::plain;
  // The paged cache's element type (PrefillParams::kv.dtype of the call it was made for): an fp8
  // cache takes the sm80 or the portable agent's row (prefill_agent_reads_kv), so prefill()
  // takes the plan only for calls over a cache of the same type. (The scales are the call's, not
  // the plan's.)
  KVDType kv_dtype = KVDType::same;
};

// Chooses the plan for `p` (its sizes and flags; pointers do not matter) on `hw` (the present
// device's profile, device_profile(), or a preset for tests). Every shape error is reported here.
Status plan_prefill(const PrefillParams& p, const HardwareCapability& hw, const PrefillPlanOptions& opt,
                    PrefillPlan* plan);

// ---- context_attention_fwd in one launch --------------------------------------------------------
// vLLM 0.6.3's context_attention_fwd is two attentions of one chunk's queries, merged by their
// LSE: over the sequence's cached prefix (`prefix`: paged, not causal — every new token sees all
// of it) and over the chunk's own k/v (`chunk`: contiguous, causal, cu_seqlens_k = cu_seqlens_q).
// Where the prefix part is the sm80 agent's key split of every q tile (few q tiles over a long
// prefix: the seed's 512-token chunks at 4–6 q heads), the plan fuses them: one tail launch whose
// CTAs take the pieces of both parts — the chunk's causal tiles spread over the SMs beside the
// prefix's pieces instead of waiting for them — and one merge of each tile's pieces of both
// parts. Elsewhere (fused = false, `why` says why) the caller runs the parts and merges them.
// Measured (H100, bench/results/2026-12-07-context-fused, call42): no faster than the two parts
// at the seed's 512-token chunks (8k: 99.1–99.7 µs against 97.5–98.7; 32k equal within noise), so
// the torch op takes it only with MUH_CONTEXT_FUSE=1. Untimed: the chunk's q tiles one a CTA
// (that README's ctx2-plan.diff).
struct ContextPlan {
  bool fused = false;
  const char* why = "";         // fused = false: the reason (a fixed string)
  PrefillPlan prefix;           // the prefix part's plan (plan_prefill; empty when the layout, the
                                // cache type or a variant alone ruled the fusion out)
  // fused: the pieces of both parts over the same tail tiles (every q tile). One chunk c of key
  // tiles for both, c = ceil(tiles · (prefix key tiles + chunk key tiles) / slots), so that the
  // CTAs of both parts fit one round and the busiest does c key tiles (the prefix pieces clamp c
  // to their key tiles; the chunk's may span several q tiles, each a piece of its own).
  PrefillSplit prefix_split;    // workspace from 0
  PrefillSplit chunk_split;     // workspace from chunk_ws_offset
  std::size_t chunk_ws_offset = 0;  // bytes, 16-aligned
  std::size_t workspace_bytes = 0;  // fused: both parts' partials
  PrefillShape chunk_shape;     // what it was made for
};

// Plans context_attention_fwd's parts (shapes as above; the chunk part names the same q, out,
// cu_seqlens_q, heads and dtype as the prefix part, and max_seqlen_k = max_seqlen_q). opt goes to
// the prefix part's plan_prefill; a forced tail_chunk (> 0) is the fused launch's c. Fused when
// the prefix plan is the sm80 agent's split of every q tile, both parts are of the plain variant
// kind, the cache holds q's dtype in vLLM's layout, and the grid has at most kPrefillChunk
// m-blocks (kernels/prefill_common.cuh: then the causal and the plain tile orders agree).
Status plan_context_prefill(const PrefillParams& prefix, const PrefillParams& chunk, const HardwareCapability& hw,
                            const PrefillPlanOptions& opt, ContextPlan* plan);

}  // namespace muh
