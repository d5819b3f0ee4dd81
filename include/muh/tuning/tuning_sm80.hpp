// tuning/tuning_sm80.hpp — Ampere and Ada (sm_80, sm_86, sm_89): mma.sync m16n8k16, ldmatrix,
// cp.async. A100 grants 163 KB per block, sm_86/sm_89 (L40S) 99 KB.
#pragma once

#include "muh/tuning/tuning_portable.hpp"

namespace muh::tuning::sm80 {

inline constexpr int kSmemCapA100 = 166912;  // 163 KB
inline constexpr int kSmemCap99K = 101376;   // 99 KB (sm_86, sm_89)

constexpr int smem_cap(int cc) { return cc == 80 ? kSmemCapA100 : kSmemCap99K; }

// Prefill rows (kernels/prefill_sm80.cuh), chosen from `muh bench prefill --sweep` on the H200
// (bf16, 16384 tokens per batch, MHA; TFLOP/s at seq 4k non-causal / 4k causal / 16k non-causal /
// 16k causal, median of 25; bench/results/prefill-h200-2026-11-30.md). num_stages counts the K/V
// ring's tile buffers (policy.hpp). The H200 runs these rows by emulation for sm_80/86/89 (same
// kernel, same tiles); the caps decide which rows fit. Run-to-run noise at 4k causal was up to
// ~15 % (the same kernel read 262 and 307 in one run), so only clear gaps decided.
//   hd 128: 128×64, 4 warps (2 m16 tiles each), 4 buffers = 96 KB: 2 CTAs/SM at 255 registers.
//           Final sweep (run 3): 344/276/344/331 — vs 3 buffers 316/295/342/341, 2 buffers
//           297/277/312/316, 128×32 ×6 273/280/306/308, 128×128 w8 ×4 266/248/277/281,
//           128×64 w8 ×4 245/233/251/253, 64×64 w4 ×4 240/247/264/271. 4 buffers led at 4k
//           non-causal (+9 % in runs 2 and 3); 3 buffers led the causal cells in the sweeps
//           (+7–11 % at 4k, +3 % at 16k), but the table row itself (4 buffers) read 307 and 312 at
//           4k causal in the same runs, above 3 buffers' 290/295: that cell is noise-bound; 4 kept.
//   hd 64, 96: the hd-128 tile (FA2's choice up to hd 128). Swept on the H200 (2026-11-30,
//           muh bench prefill --sweep, 64 heads at hd 64, 32 at hd 96;
//           bench/results/h200-2026-11-30-1d417b9.md): the row read hd64 300/283/309/304, hd96
//           334/305/338/324; the best of ×2, ×3, 128×128 w8 ×2, 128×32 ×4 and 64×64 ×4 was within
//           ~2 % of it on every cell (hd64 16k: ×2 312 vs 307; 4k causal: 64×64 280 vs 275) and
//           128×128 / 128×32 / 64×64 were 5–30 % slower at hd 96 — kept.
//   hd 256: 128×64, 8 warps in 4 warp pairs (policy.hpp: 32 rows per pair), 2 buffers = 128 KB
//           + 17 KB pair exchange: 1 CTA/SM, one K/V tile shared by 8 warps. Final sweep: 284/279/
//           298/304 — vs 64×64 w4 ×2 (96 KB, FA2's H100 layout, 2 CTAs/SM) 256/256/288/293,
//           128×64 w8 ×3 272/259/277/283, 64×64 w4 ×3/×4 200–217, 64×32 ×3/×4 235–258.
//           Re-swept after warp pairs, the q-tile-fastest grid and the skipped O rescale
//           (2026-11-30, 20 launches): this row 300/285/309/313; ×3 (177 KB: over the A100's
//           163 KB) 304/289/313/317, within ~1.5 %; 64×64 w4 ×2 290/279/293/285; 64×32 w4 ×2–4
//           247–267.
//           It needs 145 KB: on 99 KB parts (sm_86/sm_89) the row is 64×64 w4 ×2 (96 KB, no pairs),
//           the best measured row that fits there.
// Re-measured after the predicate-free whole-tile copies and the rescale slack
// (prefill_sm80.cuh; 2026-11-30, kernels launched directly in one process with torch's FA2, FA2
// timed before and after each cell; TFLOP/s at 4k / 4k causal / 16k / 16k causal):
//   hd 128: this row 359/336/366/357 (FA2 343/317/341/327); ×3 343–351/316–324/343–358/345–346,
//           ×2 345/315/352/344 (spills 44 bytes) — 4 buffers kept.
//   hd 256: this row 314/304/326/327 (FA2 313/297/308/300); ×3 (sm_90 only) 310–319/290–295/
//           321–331/313–322, within noise or below; ×3 with the next K issued before the softmax
//           312/291/322/314; 64×64 w4 with warp pairs (2 CTAs/SM, 105 KB) 318/301/318/306, ahead
//           only at seq 1k (316 vs 295 at 1k non-causal); 64×64 w4 ×2 303/299/312/305 — kept.
//   compare_torch.py, 4 runs of the final code: muh/FA2 hd128 0.97–1.02 / 1.05–1.07 / 1.01–1.03
//   / 1.06–1.10, hd256 0.98–1.00 / 1.00–1.01 / 1.01–1.03 / 1.08–1.09 (muh's own figures vary
//   ≤ 2 % between runs, FA2's up to 5 %); bench/results/prefill-h200-2026-11-30-perf.md.
// With Q Kᵀ's fragments loaded a step ahead (prefill_sm80.cuh; compare_torch.py on c80d7a6,
// bench/results/h200-2026-11-30-c80d7a6.md): hd 128 380/353/387/372 (FA2 348/322/338/338), hd 256
// 330/303/337/329 (FA2 329/304/324/311); 3 buffers at hd 256 (sm_90) were 2 % slower on all four
// cells there — the rows stand. On sm_90 the hd-256 row then takes ping-pong halves with 4
// buffers (tuning_sm90.hpp): 346/316/349/339 in 355e4c7's run.
// fp32 stays on the portable agent (no fp32 tensor-core path).
constexpr PrefillPolicy prefill(DType t, int head_dim, int cc) {
  if (t == DType::fp32) return portable::prefill(t, head_dim);
  const int cap = smem_cap(cc);
  PrefillPolicy p{Agent::sm80, 128, 64, 4, 4, cap,
                  head_dim == 128 ? "H200 sweep: 128x64 w4, 4 K/V buffers (344/276/344/331 TFLOP/s; 351/337/354/353 after the copy and rescale changes; 380/353/387/372 with Q K^T's fragments ahead)"
                                  : "hd128's tile (128x64 w4, 4 K/V buffers); H200 sweep at hd64/96: within 2 % of the best of 6 candidates (hd64 300/283/309/304, hd96 334/305/338/324 TFLOP/s)"};
  if (head_dim > 128) {
    p = {Agent::sm80, 128, 64, 8, 2, cap, "H200 sweep: 128x64 w8 (warp pairs), 2 K/V buffers (300/285/309/313 TFLOP/s; 316/298/324/327 after the copy and rescale changes; 330/303/337/329 with Q K^T's fragments ahead)"};
    if (prefill_smem_bytes(p, t, head_dim) > cap)
      p = {Agent::sm80, 64, 64, 4, 2, cap, "H200 sweep: 64x64 w4, 2 K/V buffers (290/279/293/285 TFLOP/s), fits 99 KB"};
  }
  // A smaller part: shrink block_n, then buffers (not below 2: keep loads overlapping), to fit.
  while (prefill_smem_bytes(p, t, head_dim) > cap && p.block_n > 32) p.block_n /= 2;
  while (prefill_smem_bytes(p, t, head_dim) > cap && p.num_stages > 2) --p.num_stages;
  return p;
}

// Decode (kernels/decode_sm80.cuh): the tensor-core agent. Each warp streams its own 16-token
// K/V tiles through a num_stages-deep cp.async pipeline (tile_tokens = 16 · num_warps per CTA
// stage) with the GQA query-head group on the MMA rows. fit_decode() takes 4 warps and 4 stages,
// 2 CTAs/SM up to head_dim 128 (1 at 256: 128 fp32 accumulators per lane), and drops stages,
// then CTAs/SM, then warps until the footprint fits cap / ctas_per_sm − 1 KB (the per-CTA
// reservation). Bytes in flight per SM stay ≥ 64 KB on every row (e.g. H200 hd128: 2 CTAs ×
// 4 warps × 2 tiles ahead × 8 KB). On the H200 more in flight did not pay: the policy sweep of
// `muh bench decode --policy-sweep` (bench/results/decode-h200-2026-11-30.md) timed 4 warps ×
// 6 stages × 1 CTA/SM (≈ 1.5× the bytes in flight) 1–4 % slower, and fewer warps with more
// stages (2 × 6, 1 × 12) slower still — one warp alone needs ~1650 cycles per 16-token hd128
// tile, so an SM needs several busy warps. Partitions of V2 are multiples of 128 tokens (two rounds of 4
// warps): fine enough for the plan to fill 132 SMs at batch 1, coarse enough that a
// partition's pipeline fill (~1 µs) stays small against its stream.
constexpr DecodePolicy fit_decode(DType t, int head_dim, int cap, const char* evidence) {
  DecodePolicy p{Agent::sm80, 4, 64, 4, 128, head_dim <= 128 ? 2 : 1, cap, evidence};
  auto fits = [&p, t, head_dim, cap] {
    return decode_smem_bytes(p, t, head_dim) <= cap / p.ctas_per_sm - 1024;
  };
  while (!fits() && p.num_stages > 2) --p.num_stages;
  if (!fits() && p.ctas_per_sm > 1) {
    p.ctas_per_sm = 1;
    p.num_stages = 4;
    while (!fits() && p.num_stages > 2) --p.num_stages;
  }
  while (!fits() && p.num_warps > 1) {
    p.num_warps /= 2;
    p.tile_tokens = 16 * p.num_warps;
  }
  return p;
}

constexpr DecodePolicy decode(DType t, int head_dim, int cc) {
  if (t == DType::fp32) return portable::decode(t, head_dim);
  return fit_decode(t, head_dim, smem_cap(cc),
                    "tensor-core GQA decode fitted to the cap (sm_80/86/89 rows are H200 "
                    "emulations: same tiles, same cap; no measurement on those parts)");
}

}  // namespace muh::tuning::sm80
