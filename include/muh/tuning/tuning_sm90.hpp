// tuning/tuning_sm90.hpp — Hopper (H100, H200): 227 KB per block, cp.async, TMA, wgmma.
// Until the Hopper-specific agent exists, Hopper runs the sm80 agent with Hopper's cap.
#pragma once

#include "muh/tuning/tuning_sm80.hpp"

namespace muh::tuning::sm90 {

inline constexpr int kSmemCap = 232448;  // 227 KB

// Prefill: the sm80 agent with the rows of tuning_sm80.hpp, which were measured on the H200
// itself (their evidence strings carry the figures). Hopper's cap changes one thing: the
// warp-pair row (hd 256: 128×64, 8 warps, one CTA per SM) takes the ping-pong schedule
// (policy.hpp, PrefillPolicy::ping_pong) with 4 K/V buffers, 209 KB — the two halves of the CTA
// need the ring one buffer pair deeper than FA2's 2, since the half that runs behind still reads
// the tile the other is done with. Measured on the H200 against the 2-buffer row without it (A/B
// in one process, 3 rounds, output bitwise the same; bench/results/h200-2026-11-30-355e4c7.md):
// 4k / 4k causal / 16k / 16k causal, medians, 327/297/330/319 → 348/317/351/341
// TFLOP/s (+6.2–6.9 % in every round), FA2 327/296/327/303. (4 buffers without ping-pong were
// not timed; 3 buffers without it were 2 % slower than 2.)
constexpr PrefillPolicy prefill(DType t, int head_dim) {
  if (t == DType::fp32) return portable::prefill(t, head_dim);
  PrefillPolicy p = sm80::prefill(t, head_dim, 80);
  p.smem_cap_bytes = kSmemCap;
  if (prefill_sm80_warp_pairs(p, head_dim)) {
    p.num_stages = 4;
    p.ping_pong = true;
    p.evidence = "H200: the sm80 hd256 row (128x64 w8, warp pairs) with ping-pong halves and 4 K/V buffers: A/B "
                 "+6.2-6.9 % over 2 buffers without it (348/317/351/341 vs 327/297/330/319 TFLOP/s, FA2 327/296/327/303)";
  }
  return p;
}

// Decode: the sm80 tensor-core agent fitted to Hopper's 227 KB (hd ≤ 128: 4 warps × 3 stages,
// 2 CTAs/SM; hd 256: 4 warps × 2 stages, 1 CTA/SM — see the last paragraph). Measured on the
// H200 (muh bench decode, bench/results/decode-h200-2026-11-30.md; bf16, cold L2, streaming-read
// ceiling 4.55 TB/s; the 3-stage hd256 row then):
// hd128 batch 256 × 32k 4.20 TB/s, batch 64 × 32k 4.12; hd256 4.11 / 4.11. Candidates timed in
// the same run on four cells (b64×8k, b256×2k, b1×32k, b16×8k), time relative to the row:
// hd128 8w×3s×1 within ±1 %, 4w×6s×1 +1 to +4 %, 2w×6s×2 +2 % on the V1 cells and +26/+35 %
// on the V2 cells, 1w×12s×2 1.6–2.7×; hd256 2w×3s×2 −5 % to +1 %, 2w×6s×1 −3 % to +5 %,
// 1w×6s×2 and 1w×12s×1 up to 1.9×. No shape won clearly, so the rows kept the fitted 4 × 3.
// Re-swept with 2-stage hd256 shapes after the two-accumulator S (decode-h200-2026-11-30-
// experiments.md, section 6), timed under this row's plan: 6w×2s×1 1–3 % faster on all four
// cells, 4w×2s×1, 3w×2s×2 and 2w×3s×2 on some — within the grid's run-to-run spread then (with
// cp.async); with TMA, 4w×2s×1 wins on every cell (the last paragraph) and is the hd256 row.
//
// K/V by TMA (DecodePolicy::tma) where head_dim is a multiple of 64: with 16-byte cp.asyncs the
// L2 looks up 1.5× the sectors the tiles hold (partial-line requests) and runs at 93–96 % of its
// peak on the large cells, the unit at its limit; one tensor-map box per page and 64 dims makes
// every request a whole line (ncu, hd128 batch 64 × 8k: 16.8 M L2 requests for 67.2 M sectors,
// against 44.1 M for 100.7 M). A/B on the H200, same build, same run (decode-h200-2026-11-30-
// experiments.md, section 8): 1–5 % faster on 11 of 12 cells (hd128 batch 256 × 2k 522 → 498 µs,
// hd256 batch 256 × 2k 525 → 500), hd256 batch 16 × 8k +0.5 %; the grid with it reads 4.41–4.52
// TB/s on the large cells against a 4.66 ceiling (97 % at batch 256 × 32k).
// With TMA the policy sweep (bench/results/h200-2026-11-30-7c8baeb.md; candidates with TMA, same
// run, µs at b64×8k / b256×2k / b1×32k / b16×8k) puts hd256 4 warps × 2 stages ahead of the 3-stage
// row on all four cells — 500.3 / 498.7 / 48.9 / 144.3 against 512.9 / 500.7 / 50.7 / 152.5 —
// where with cp.async it was mixed (518 / 527 / 53.7 / 147 against 527 / 525 / 53.6 / 150; why
// TMA needs less lead was not profiled). The plan's split counts are the same for both rows.
// hd128's best candidate (6 × 2 × 2) is within 0.1–2 % of its row: not a clear win, the row
// stays.
constexpr DecodePolicy decode(DType t, int head_dim) {
  if (t == DType::fp32) return portable::decode(t, head_dim);
  DecodePolicy p = sm80::fit_decode(t, head_dim, kSmemCap,
                                    "H200 muh bench decode 2026-11-30: 4w x 3 stages x 2 CTAs/SM to hd128, 4w x 2 "
                                    "stages x 1 at hd256, K/V by TMA; --policy-sweep (TMA candidates, 7c8baeb): hd256 "
                                    "4x2x1 0.4-5.4 % faster than 4x3x1 on all four cells, hd128 best candidate within "
                                    "2 % of the row; TMA 1-5 % faster than cp.async");
  p.tma = head_dim % 64 == 0;
  if (head_dim > 128) p.num_stages = 2;
  return p;
}

}  // namespace muh::tuning::sm90
