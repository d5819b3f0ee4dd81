// tuning/tuning_sm90.hpp — Hopper (H100, H200): 227 KB per block, cp.async, TMA. Every newer
// target (sm_100, sm_120) reads these rows too, having no table of its own. Until a
// Hopper-specific agent exists, the rows run the sm80 agent (kernels/prefill_sm80.cuh,
// kernels/decode_sm80.cuh). Every figure is the H200's (no H100 is lent here). fp32 has no rows:
// it runs the portable rule. The sweeps and A/B runs behind each row:
// bench/results/tuning-history.md.
#pragma once

#include "muh/tuning/fit.hpp"
#include "muh/tuning/row.hpp"

namespace muh::tuning::sm90 {

inline constexpr int kSmemCap = 232448;  // 227 KB

// Prefill (TFLOP/s at seq 4k / 4k causal / 16k / 16k causal, bf16, 16384 tokens per batch).
//   hd ≤ 128: 128×64, 4 warps (2 m16 tiles each), 4 K/V buffers = 96 KB at hd 128: 2 CTAs/SM. The
//            sweep's best at hd 128 (4 buffers led 4k by 9 %; the causal cells were noise-bound),
//            and within ~2 % of the best of six tilings at hd 64 and 96 — FA2's tile up to hd 128.
//   hd 256:  128×64, 8 warps in 4 warp pairs (policy.hpp), 1 CTA/SM, with ping-pong halves: the
//            two halves of the CTA take turns at the tensor cores, one's MMAs overlapping the
//            other's softmax. They need 4 K/V buffers (209 KB, so sm_90 only): the half that runs
//            behind still reads the tile the other is done with. The same tile on the A100 has
//            2 buffers and no ping-pong (tuning_sm80.hpp).
inline constexpr PrefillRow kPrefill[] = {
    // dtypes, head dims, agent, block_m, block_n, warps, K/V buffers, ping-pong, cap; evidence
    {k16Bit, kHd64 | kHd96, Agent::sm80, 128, 64, 4, 4, false, kSmemCap,
     "h200-2026-11-30-1d417b9.md sweep: hd64 300/283/309/304, hd96 334/305/338/324 TFLOP/s, within ~2 % of the "
     "best of 6 tilings"},
    {k16Bit, kHd128, Agent::sm80, 128, 64, 4, 4, false, kSmemCap,
     "prefill-h200-2026-11-30.md sweep: 344/276/344/331 TFLOP/s, best of 7 at 4k non-causal; 380/353/387/372 in "
     "h200-2026-11-30-c80d7a6.md"},
    {k16Bit, kHd256, Agent::sm80, 128, 64, 8, 4, true, kSmemCap,
     "h200-2026-11-30-355e4c7.md A/B: ping-pong, 4 buffers 348/317/351/341 TFLOP/s vs 327/297/330/319 with 2 "
     "buffers without (+6.2-6.9 %)"},
};
static_assert(table_holds(kPrefill));

// Prefill on sm_90a (target kTargetSm90a, targets.hpp): the Hopper agent (kernels/prefill_sm90.cuh)
// — TMA, wgmma, a producer warp group and two or three consumer groups of 64 q rows. Head dims that are
// whole 64-dim panels; hd 96 and fp32 have no row here and take sm_90's (the walk, select.hpp).
//   hd 64:    192×128, three consumer groups (16 warps, 152 registers a consumer thread, no
//            overlap: it needs S and P of two tiles in registers), 88 KB: against two groups
//            of 64 rows with the overlap, +17 % (1k), +24–27 % (4k), +19–23 % (16k) non-causal
//            and causal alike except 1k causal (+2 %) on the H100 (call 9, two runs each way).
//   hd 128:   2 (K, V) stages with the intra-warp-group overlap (QKᵀ of tile i beside PV of tile
//            i − 1): +3–8 % on every hd-128 cell of the grid on the H200 (A/B in one call, two
//            runs each way). 128×128: 160 KB at hd 128. Not taken: 128×176 (FA3's non-causal
//            hd-128 tile; measured with an m64n176k16 form since removed): in one call's A/B +2–6 % at 4k/16k but
//            −7…+2 % at 1k (call 7); compare_torch.py in the next call read 1k −10 %, GQA 4k −3 %,
//            16k non-causal +6 % (call 8, H100) — no clear win.
//   hd 256:   128×64, 2 stages: 193 KB; O alone is 128 fp32 registers a consumer thread. The
//            overlap was within ±4 % (noise) there, so the simpler schedule.
//   Ping-pong of the two consumer groups (named barriers) was within ±4 % on the H100 with the
//   overlap on at both head dims: not taken.
//   The grid against the peers: bench/results/h100-2026-12-06-sm90-prefill/README.md; with the
//   persistent schedule (prefill_plan.hpp), h100-2026-12-06-sm90-persistent/README.md — the rows
//   unchanged, 1.12–1.24x the one-CTA-per-tile launch at 1k (hd 64/128; 1.01–1.06x at hd 256),
//   1.00–1.08x at 4k–16k.
inline constexpr PrefillRow kPrefillSm90a[] = {
    // dtypes, head dims, agent, block_m, block_n, warps, (K, V) stages, ping-pong, cap; evidence; overlap
    {k16Bit, kHd64, Agent::sm90, 192, 128, 16, 2, false, kSmemCap,
     "h100-2026-12-06-sm90-prefill call 9 (H100): 3 consumer groups vs 2 (128x128 with the overlap), "
     "298/227/481/404/486/458 vs 253/222/378/332/408/368 TFLOP/s (+2-27 %)",
     false},
    {k16Bit, kHd128, Agent::sm90, 128, 128, 12, 2, false, kSmemCap,
     "h100-2026-12-06-sm90-prefill call 4 (H200): 493/347/601/529/618/595 TFLOP/s, 1.25-1.74x sm_90's row; "
     "overlap +3-8 %",
     true},
    {k16Bit, kHd256, Agent::sm90, 128, 64, 12, 2, false, kSmemCap,
     "h100-2026-12-06-sm90-prefill call 4 (H200): 548/419/625/577/638/626 TFLOP/s, 1.66-1.92x sm_90's row",
     false},
};
static_assert(table_holds(kPrefillSm90a));

// Decode (`muh bench decode --policy-sweep`: µs at batch 64 × 8k / 256 × 2k / 1 × 32k / 16 × 8k,
// bf16, cold L2). Each warp streams its own 16-token K and V tiles (tile_tokens = 16 · warps per
// CTA stage), the GQA query-head group on the MMA rows; V2 partitions are multiples of 128 tokens
// (two rounds of 4 warps: fine enough to fill 132 SMs at batch 1, coarse enough that a
// partition's ~1 µs pipeline fill stays small). K/V come by TMA where a tile is whole boxes of
// one page (decode_sm80_tma: NHD with 64-dim boxes, vLLM at page 16): every L2 request a whole
// line (with 16-byte cp.asyncs the L2 looked up 1.5× the sectors and ran at its limit), 1–5 %
// faster on 11 of 12 NHD cells.
//   hd ≤ 128: 4 warps, 2 CTAs/SM, the most stages that fit: 4 at hd 64/96 (not measured there),
//            3 at hd 128. No candidate beat the row clearly: more bytes in flight (4 × 6 × 1)
//            was 1–4 % slower, fewer warps with more stages slower still (one warp needs ~1650
//            cycles per 16-token hd128 tile, so an SM needs several busy warps).
//   hd 256:  4 warps, 1 CTA/SM (128 fp32 accumulators per lane), 3 stages: the third holds the
//            tile whose QKᵀ runs beside the previous tile's softmax and PV (Sm80Traits::kOverlap;
//            h200-2026-12-06-tile-pipeline.md: the seed's 16-SM cells at ≥ 32k 1.07–1.16× faster
//            than 4 × 2 without it, 0.50–0.53 → 0.54–0.61 of the floor; 132-SM cells 0.98–1.01×;
//            the default grid's NHD cells +0.6…+1.5 %). Without the overlap 2 stages were ahead of
//            3 on every cell (TMA). 12 warps × 1 stage is the wide row below, by shape: as this
//            row (h200-2026-12-02-vllm-tma.md) it was 2.2× faster on the seed's vLLM cells on a
//            16-SM partition (0.56–0.76 of the read floor against 0.32–0.35; more warps per SM
//            help, more stages per warp do not) and within ±3 % on 132 SMs above 8k, but 9–11 %
//            slower on NHD cells of the default grid (batch 1 × 8k/32k, 16 × 512) and spilling at
//            groups > 8. Why more warps helped (ncu, h200-2026-12-02-qk-chains/): one warp per scheduler
//            stalled on its own tile's dependency chains; with HeadsOnN's QKᵀ in 4 accumulator
//            sets (8635335) 4 × 2 read at 0.50–0.53 of the floor there, and 6 × 2 at 0.48–0.63
//            (not re-measured on the NHD cells); with this row's tile math 12 × 1 reads at
//            0.60–0.81 there but is 2–10 % slower on 132 SMs (h200-2026-12-06-tile-pipeline.md).
inline constexpr DecodeRow kDecode[] = {
    // dtypes, head dims, agent, warps, tokens per stage, stages, CTAs/SM, partition, TMA, cap; evidence
    {k16Bit, kHd64, Agent::sm80, 4, 64, 4, 2, 128, true, kSmemCap,
     "not measured at hd 64: the hd-128 row's 4 warps x 2 CTAs/SM (decode-h200-2026-11-30.md) with the 4 "
     "stages that fit (fit.hpp)"},
    {k16Bit, kHd96, Agent::sm80, 4, 64, 4, 2, 128, false, kSmemCap,
     "not measured at hd 96: the hd-128 row's 4 warps x 2 CTAs/SM (decode-h200-2026-11-30.md) with the 4 "
     "stages that fit (fit.hpp); no TMA: 96 dims are not whole 64-dim boxes"},
    {k16Bit, kHd128, Agent::sm80, 4, 64, 3, 2, 128, true, kSmemCap,
     "decode-h200-2026-11-30-7c8baeb.log policy sweep: 507.3/497.6/49.0/144.0 us; the best candidate "
     "(6w x 2s x 2) within 2 %, not a clear win"},
    {k16Bit, kHd256, Agent::sm80, 4, 64, 3, 1, 128, true, kSmemCap,
     "h200-2026-12-06-tile-pipeline.md call 3: 3 stages for the one-tile overlap; seed grid 16 SMs b2 4q 256k "
     "424.6 -> 365.9 us, >= 32k 1.07-1.16x; 132 SMs 0.98-1.01x"},
};
static_assert(table_holds(kDecode));

// Decode, the wide rows: where a call's few CTAs must each stream a long range at what one SM can
// pull (a green partition of a few SMs; the seed's batch of 1–2 sequences × 1 KV head), more warps
// a SM, not more stages a warp, is what reads faster — one warp a scheduler is latency-bound on
// its own tile (kDecode's hd-256 note). 12 warps × 1 stage (192 KB of boxes in flight, as 4 × 3),
// by TMA with the heads on N only (decode_sm80_wide_reads: the plan takes it for no other call).
// H200, the seed's cells beside the 4 × 3 row at the same split counts
// (h200-2026-12-06-tile-pipeline.md, call 3, W against T): 16 SMs at ≥ 32k 0.75–0.94× the time
// (batch 2 × 256k 273.4 against 365.9 µs: 0.81 of the read floor against 0.61); partitions of ≤ 1024
// tokens 1.03–1.21× (a 12-warp CTA's fill and combine), and on 132 SMs, where the best counts give
// 64–128 CTAs of ≤ 4096 tokens, 1.02–1.12× at the best count. So the plan takes it only for
// partitions of ≥ kDecodeWideMinTokens (policy.hpp) where its cost model sees the row's faster
// CTA win (plan.cpp: kLatencyWideSeconds). As the plan's choice, beside the row off in one run
// (H100, 2026-12-07-decode-wide): 16 SMs at ≥ 32k 1.07–1.28× faster, 0.65–0.90 of the floor
// (0.60–0.70 before); 8k and every 132-SM cell unchanged (the plan keeps 4 × 3 there).
inline constexpr DecodeRow kDecodeWide[] = {
    // dtypes, head dims, agent, warps, tokens per stage, stages, CTAs/SM, partition, TMA, cap; evidence
    {k16Bit, kHd256, Agent::sm80, 12, 192, 1, 1, 192, true, kSmemCap,
     "h200-2026-12-06-tile-pipeline.md call 3 (W): seed grid 16 SMs >= 32k 0.60-0.81 of the floor against 4 x 3's "
     "0.54-0.61; 132 SMs 1.02-1.12x at the best count. 2026-12-07-decode-wide (H100), the plan's choice: 16 SMs "
     ">= 32k 1.07-1.28x, 0.65-0.90 of the floor"},
};
static_assert(table_holds(kDecodeWide));

}  // namespace muh::tuning::sm90
