// tuning/tuning_sm75.hpp — Turing (T4): 64 KB opt-in shared memory, fp16 tensor cores, no
// cp.async, no bf16 tensor cores.
#pragma once

#include "muh/tuning/tuning_portable.hpp"

namespace muh::tuning::sm75 {

inline constexpr int kSmemCap = 64 * 1024;

// Prefill: Turing runs the portable agent with the portable rows (its 48 KB fit is inside the
// T4's 64 KB). Returning the portable row itself lets dispatch collapse sm_75 onto the portable
// instantiation. Why no m16n8k8 fp16 agent (yet): bf16 has no tensor cores on sm_75, so bf16 —
// the dtype the seed's deployment serves — needs the portable agent there in any case; an fp16
// m16n8k8 path would help fp16 only, could be checked on the H200 only by emulation (no T4 is
// lent here), and issue 4's device budget went to the sm_80-class agent that the H200 targets
// are set for. The portable agent is correct and tested on every dtype (tests/gpu/test_prefill.cu,
// target 75), so this row is the honest choice until an sm75 agent is written and measured.
constexpr PrefillPolicy prefill(DType t, int head_dim) { return portable::prefill(t, head_dim); }

// Decode: the issue asks the T4 to run the portable agent (synchronous copies).
constexpr DecodePolicy decode(DType t, int head_dim) { return portable::decode(t, head_dim); }

}  // namespace muh::tuning::sm75
