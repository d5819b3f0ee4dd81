// prefill_plan.hpp — the tail split of a prefill launch: host-only and GPU-free, so it is tested
// on the CPU (tests/cpu/test_prefill_plan.cpp) and computed the same way by prefill() and
// prefill_workspace_size().
//
// Why: every q tile of a non-causal batch of equal lengths costs the same, so the CTAs of a
// launch finish in lock-step rounds of `slots` (resident CTAs) and the last, partly filled round
// costs a whole round. Measured on the H200 (bench/results/prefill-h200-2026-11-30-waves.md):
// muh's TFLOP/s follows tiles ÷ slots ÷ ceil(tiles ÷ slots) within 1 % — hd256 308 / 317 / 329 at
// 15.03 / 15.52 / 16.00 rounds — which left the 4k cells (15.5 rounds) at parity with
// FlashAttention-2. The split runs the last tiles (tiles mod slots of them) by key range instead,
// spread evenly over every slot, and merges the pieces (kernels/prefill_merge.cuh).
#pragma once

#include <cstddef>

#include "muh/dtype.hpp"
#include "muh/hardware.hpp"
#include "muh/tuning/policy.hpp"

namespace muh {

struct PrefillParams;

// RunOptions::prefill_tail_chunk values besides a forced chunk (> 0).
inline constexpr int kPrefillTailAuto = -1;  // the plan decides (needs a workspace)
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
// epilogue), no causal mask and every sequence of max length (total = batch · max, for q and
// for k) — so every q tile sees the same key tiles — and at least one key.
bool prefill_split_applies(const PrefillParams& p, const PrefillPolicy& policy);

// The split for `p` run by `policy` on `hw`. tail_chunk: kPrefillTailAuto (the cost model
// chooses, and may choose none), kPrefillTailOff, or a forced chunk of key tiles per tail CTA
// (clamped to [1, key_tiles]; the tail is then tiles mod slots, or the last round when that is 0).
PrefillSplit plan_prefill_split(const PrefillParams& p, const PrefillPolicy& policy, const HardwareCapability& hw,
                                int tail_chunk);

}  // namespace muh
