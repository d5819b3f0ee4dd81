// tuning/tuning_sm75.hpp — Turing (T4): 64 KB opt-in shared memory, fp16 tensor cores (mma
// m16n8k8), no cp.async, no bf16 tensor cores.
#pragma once

#include "muh/tuning/fit.hpp"
#include "muh/tuning/row.hpp"

namespace muh::tuning::sm75 {

inline constexpr int kSmemCap = 64 * 1024;

// Prefill: fp16 only. The sm75 agent is the tensor-core body of kernels/prefill_sm80.cuh with each
// m16n8k16 as two m16n8k8 and K/V copied global → registers → shared memory (no cp.async): ONE
// K/V buffer, the next tile waiting in registers (the seed's one stage without async copy).
// bf16 and fp32 have no row, so they run the portable rule (the same instantiation as target 0):
// Turing's tensor cores multiply fp16, not bf16, and rounding bf16 inputs to fp16 would change
// results (fp16 overflows at 65504), which a policy must not do. Decode has no rows at all: the
// T4 runs the portable agent (synchronous copies), as the issue asks.
//
// No T4 is lent here: the tiles are chosen for its per-SM resources (64 KB, 64 K registers) and
// only checked for correctness by emulation on the H200 (forced target 75), whose figures rank no
// T4 tile. hd ≤ 128: 64×64 w4 = 32 KB at hd 128, 2 CTAs per SM (246 registers); hd 256: O alone
// is 128 fp32 registers per lane, and 64×32 spills (255 registers, 148 B), so 64×16 (40 KB).
// Registers and speeds: bench/results/prefill-sm75-emulation-h200-2026-11-30.md.
inline constexpr PrefillRow kPrefill[] = {
    // dtypes, head dims, agent, block_m, block_n, warps, K/V buffers, ping-pong, cap; evidence
    {kFp16, kHd64 | kHd96 | kHd128, Agent::sm75, 64, 64, 4, 1, false, kSmemCap,
     "T4 resources, not measured on a T4: 2 CTAs/SM in 64 KB; H200 emulation correct, 212 TFLOP/s hd128 4k "
     "(prefill-sm75-emulation-h200-2026-11-30.md)"},
    {kFp16, kHd256, Agent::sm75, 64, 16, 4, 1, false, kSmemCap,
     "T4 resources, not measured on a T4: 64x32 spills (255 registers), 64x16 does not; H200 emulation correct, "
     "137 TFLOP/s hd256 4k (prefill-sm75-emulation-h200-2026-11-30.md)"},
};
static_assert(table_holds(kPrefill));

}  // namespace muh::tuning::sm75
