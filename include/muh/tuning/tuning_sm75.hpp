// tuning/tuning_sm75.hpp — Turing (T4): 64 KB opt-in shared memory, fp16 tensor cores (mma
// m16n8k8), no cp.async, no bf16 tensor cores.
#pragma once

#include "muh/tuning/tuning_portable.hpp"

namespace muh::tuning::sm75 {

inline constexpr int kSmemCap = 64 * 1024;

// Prefill. fp16 runs the sm75 agent: the tensor-core body of kernels/prefill_sm80.cuh with each
// m16n8k16 as two m16n8k8 and K/V copied global → registers → shared memory (no cp.async).
// bf16 and fp32 run the portable agent, with the portable row itself (so dispatch collapses
// them onto the portable instantiation): Turing's tensor cores multiply fp16 (and int8/int4),
// not bf16. bf16 on them would mean rounding Q, K, V and P to fp16 — which changes results
// (bf16 reaches 3.4e38, fp16 65504: large logits or values overflow), and a policy may change
// speed, never results — so bf16 stays on CUDA-core FMAs, which is the portable agent, correct
// and tested on every dtype. So the seed's deployment dtype (bf16) gets no tensor cores on a T4.
//
// The fp16 tile is chosen for the T4's per-SM resources, not measured on one (none is lent
// here): 64 KB of shared memory, 64 K registers, 32 warps per SM. 64×64, 4 warps (one m16 tile
// each), ONE K/V buffer — the seed's one stage without async copy; the next K or V tile waits in
// registers — so (64 + 64)·hd·2 = 16/24/32 KB at hd 64/96/128: at hd 128 2 CTAs per SM (246
// registers on sm_75 by -Xptxas -v: 2 × 128 threads × 248 fits 64 K). hd 256 takes 64×16
// (40 KB, 1 CTA/SM): O alone is 128 fp32 registers per lane, and at 64×32 (48 KB) the 32
// registers of the K/V stage push ptxas to 255 with 148 B (sm_75) / 136 B (sm_90) of spills;
// 64×16 has none (250 / 253 registers). If a tile did not fit the cap, block_n would halve.
// Run on the H200 by emulation (forced target 75: same kernel, same tiles, dynamic shared
// memory set to the footprint) — which checks correctness, not T4 speed: fp16, 16384 tokens per
// batch, MHA, median of 20 through the C ABI (bench/results/prefill-sm75-emulation-h200-2026-11-30.md),
// seq 1k / 1k causal / 4k / 4k causal: hd 128 × 32 heads 183/175/212/194 TFLOP/s, hd 256 × 16
// heads 128/128/137/136, against the sm80 agent's 332/269/353/348 and 298/237/321/307 in the
// same run. The H200 fits more of these CTAs per SM than a T4 and has 15× its bandwidth, so
// these figures rank no T4 tile; they show the path runs at tensor-core speed.
constexpr PrefillPolicy prefill(DType t, int head_dim) {
  if (t != DType::fp16) return portable::prefill(t, head_dim);
  PrefillPolicy p{Agent::sm75, 64, 64, 4, 1, kSmemCap,
                  "T4 resources, not measured on a T4: 64x64 w4, 1 K/V buffer + register stage, "
                  "2 CTAs/SM in 64 KB at hd 128; H200 emulation (target 75): correct, 212 TFLOP/s hd128 4k"};
  if (head_dim > 128)
    p = {Agent::sm75, 64, 16, 4, 1, kSmemCap,
         "T4 resources, not measured on a T4: 64x16 w4 (64x32 spills: 255 registers), 1 K/V buffer + "
         "register stage, 40 KB; H200 emulation (target 75): correct, 137 TFLOP/s hd256 4k"};
  while (prefill_smem_bytes(p, t, head_dim) > kSmemCap && p.block_n > 16) p.block_n /= 2;
  return p;
}

// Decode: the issue asks the T4 to run the portable agent (synchronous copies).
constexpr DecodePolicy decode(DType t, int head_dim) { return portable::decode(t, head_dim); }

}  // namespace muh::tuning::sm75
