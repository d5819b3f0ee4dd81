// tuning/tuning_sm80.hpp — Ampere and Ada (sm_80, sm_86, sm_89): the sm80 agent (mma.sync
// m16n8k16, ldmatrix, cp.async). An A100 grants 163 KB per block, sm_86 / sm_89 (L40S) 99 KB: one
// table for each cap. None of these parts is lent here: every row is an H200 row
// (tuning_sm90.hpp) made to fit the part's cap, and its figures are the H200's running the same
// kernel and tiles. fp32 has no rows (no fp32 tensor-core path): it runs the portable rule.
// The sweeps behind the rows: bench/results/tuning-history.md.
#pragma once

#include "muh/tuning/fit.hpp"
#include "muh/tuning/row.hpp"

namespace muh::tuning::sm80 {

inline constexpr int kSmemCapA100 = 166912;  // 163 KB
inline constexpr int kSmemCap99K = 101376;   // 99 KB (sm_86, sm_89)

// Prefill. hd ≤ 128: the H200's 128×64 w4 ×4 (96 KB at hd 128, so it fits 99 KB too). hd 256: the
// H200's warp-pair tile, 128×64 w8, with FA2's 2 K/V buffers and no ping-pong (which needs 4
// buffers, 209 KB) = 145 KB; 3 buffers (177 KB) do not fit 163 KB either, and were no faster on
// the H200. On 99 KB parts it does not fit at all, so they take 64×64 w4 ×2 (96 KB, no pairs:
// their exchange would push it past 99 KB), the best swept row that fits.
inline constexpr PrefillRow kPrefillA100[] = {
    // dtypes, head dims, agent, block_m, block_n, warps, K/V buffers, ping-pong, cap; evidence
    {k16Bit, kHd64 | kHd96 | kHd128, Agent::sm80, 128, 64, 4, 4, false, kSmemCapA100,
     "the H200's row (no A100 lent): prefill-h200-2026-11-30.md sweep 344/276/344/331 TFLOP/s at hd128; hd64/96 "
     "h200-2026-11-30-1d417b9.md"},
    {k16Bit, kHd256, Agent::sm80, 128, 64, 8, 2, false, kSmemCapA100,
     "the H200's warp-pair tile with 2 buffers (no A100 lent): 330/303/337/329 TFLOP/s on the H200 "
     "(h200-2026-11-30-c80d7a6.md); 3 buffers 2 % slower there and over 163 KB"},
};
static_assert(table_holds(kPrefillA100));

inline constexpr PrefillRow kPrefill99K[] = {
    // dtypes, head dims, agent, block_m, block_n, warps, K/V buffers, ping-pong, cap; evidence
    {k16Bit, kHd64 | kHd96 | kHd128, Agent::sm80, 128, 64, 4, 4, false, kSmemCap99K,
     "the H200's row, 96 KB at hd128 (no sm_86/89 lent): prefill-h200-2026-11-30.md sweep 344/276/344/331 "
     "TFLOP/s at hd128; hd64/96 h200-2026-11-30-1d417b9.md"},
    {k16Bit, kHd256, Agent::sm80, 64, 64, 4, 2, false, kSmemCap99K,
     "exists because 128x64 w8 (145 KB) exceeds 99 KB: best swept row that fits, 256/256/288/293 TFLOP/s on "
     "the H200 (prefill-h200-2026-11-30.md), 303/299/312/305 (prefill-h200-2026-11-30-perf.md)"},
};
static_assert(table_holds(kPrefill99K));

// Decode (kernels/decode_sm80.cuh, cp.async: TMA is sm_90's). Each row is the H200 row of its
// head dim (tuning_sm90.hpp) fitted to the part's cap by fit.hpp's rule — stages first, then one
// CTA per SM, then warps — and measured nowhere at that cap.
inline constexpr DecodeRow kDecodeA100[] = {
    // dtypes, head dims, agent, warps, tokens per stage, stages, CTAs/SM, partition, TMA, cap; evidence
    {k16Bit, kHd64, Agent::sm80, 4, 64, 4, 2, 128, false, kSmemCapA100,
     "not measured (no A100 lent): the H200 row (4 warps x 2 CTAs/SM, decode-h200-2026-11-30.md) fitted to "
     "163 KB, fits as it is"},
    {k16Bit, kHd96 | kHd128, Agent::sm80, 4, 64, 2, 2, 128, false, kSmemCapA100,
     "not measured (no A100 lent): the H200 row (decode-h200-2026-11-30-7c8baeb.log at hd128) fitted to 163 KB: "
     "2 stages keep 2 CTAs/SM"},
    {k16Bit, kHd256, Agent::sm80, 4, 64, 2, 1, 128, false, kSmemCapA100,
     "not measured (no A100 lent): the H200 row (decode-h200-2026-11-30-7c8baeb.log) fitted to 163 KB, fits as "
     "it is (140 KB)"},
};
static_assert(table_holds(kDecodeA100));

inline constexpr DecodeRow kDecode99K[] = {
    // dtypes, head dims, agent, warps, tokens per stage, stages, CTAs/SM, partition, TMA, cap; evidence
    {k16Bit, kHd64, Agent::sm80, 4, 64, 2, 2, 128, false, kSmemCap99K,
     "not measured (no sm_86/89 lent): the H200 row (4 warps x 2 CTAs/SM, decode-h200-2026-11-30.md) fitted to "
     "99 KB: 2 stages keep 2 CTAs/SM"},
    {k16Bit, kHd96, Agent::sm80, 4, 64, 3, 1, 128, false, kSmemCap99K,
     "exists because 2 CTAs/SM do not fit 99 KB at hd96: the H200 row (4 warps x 2 CTAs/SM, "
     "decode-h200-2026-11-30.md) fitted: 1 CTA with 3 stages; not measured"},
    {k16Bit, kHd128, Agent::sm80, 4, 64, 2, 1, 128, false, kSmemCap99K,
     "exists because 2 CTAs/SM do not fit 99 KB at hd128: the H200 row (decode-h200-2026-11-30-7c8baeb.log) "
     "fitted, 1 CTA with 2 stages; not measured"},
    {k16Bit, kHd256, Agent::sm80, 2, 32, 2, 1, 128, false, kSmemCap99K,
     "exists because 4 warps x 2 stages (140 KB) exceed 99 KB at hd256: the H200 row "
     "(decode-h200-2026-11-30-7c8baeb.log) fitted to 2 warps; not measured"},
};
static_assert(table_holds(kDecode99K));

}  // namespace muh::tuning::sm80
