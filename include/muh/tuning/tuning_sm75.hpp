// tuning/tuning_sm75.hpp — Turing (T4): 64 KB opt-in shared memory, fp16 tensor cores, no
// cp.async, no bf16 tensor cores.
#pragma once

#include "muh/tuning/tuning_portable.hpp"

namespace muh::tuning::sm75 {

inline constexpr int kSmemCap = 64 * 1024;

// Prefill: no sm75 tensor-core agent yet, so Turing runs the portable agent with the portable
// rows (its 48 KB fit is inside the T4's 64 KB). Returning the portable row itself lets
// dispatch collapse sm_75 onto the portable instantiation.
constexpr PrefillPolicy prefill(DType t, int head_dim) { return portable::prefill(t, head_dim); }

// Decode: the issue asks the T4 to run the portable agent (synchronous copies).
constexpr DecodePolicy decode(DType t, int head_dim) { return portable::decode(t, head_dim); }

}  // namespace muh::tuning::sm75
