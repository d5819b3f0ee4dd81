// kernels/decode_variant.cuh — the steps of the general variant kind (kernels/variant.cuh) that
// both decode agents take around their main loops, written once here:
//   before the loop   the window's first key moves the CTA's first token (decode_window)
//   after the loop    the head's sink joins the CTA's state of each row (fold_sinks)
// The hooks inside the loops (the logits transform and the window's mask on each score) are each
// agent's, at the place its score layout puts them (decode_portable.cuh step 2, decode_sm80.cuh
// update()).
#pragma once

#include "muh/kernels/decode_common.cuh"
#include "muh/kernels/variant.cuh"

namespace muh::kernels::decode {

// The sequence as the general kind's hooks see it.
struct DecodeWindow {
  int seq_len;  // the sequence's length, as cta_work read it (0 when it was out of range)
  int lo;       // the window's first key (0 without a window)
};

// The window's keys [lo, len) are what the CTAs of a sequence read: V1's CTA starts at lo rounded
// down to 16, and V2's partitions are cut from there (partition s: tokens base + s · P ..,
// base = lo & ~15, the last one to the end) — so a plan can size its split count to the window
// (plan.cpp) and a windowed decode reads only the window's pages, spread over its CTAs. Rounded
// down to 16: the agents load 16-aligned runs of tokens (vLLM's value pages; the sm80 agent's
// 16-token tiles, whose TMA boxes are 16 rows of one page) and mask the keys before lo in the tile
// math. A partition that cta_work left busy (split · P < len: the merge reads its partial) and
// that now starts at the end reads no page and stores an empty partial (lse −inf), which the
// merge weighs 0; idle ones stay idle. Without a window lo = 0 and nothing moves. The CTA's first
// tile holds a key of the window and every later tile starts past it, so every tile's max is
// finite (what the online softmax's tile step needs, online_softmax.hpp).
template <class Var>
__device__ __forceinline__ DecodeWindow decode_window(const DecodeArgs& a, const Var& var, CtaWork& w) {
  DecodeWindow r;
  r.seq_len = a.seq_lens[w.seq];
  if (!seq_len_in_range(a, r.seq_len)) r.seq_len = 0;  // as cta_work (which flagged it)
  r.lo = VariantHead(var.args, w.head0, 1, r.seq_len).keys(0).lo;
  const int len = r.seq_len, base = min(r.lo, len) & ~15;
  if (a.num_splits == 1) {
    w.kv_begin = min(base, w.kv_end);
  } else {
    const long long begin = base + static_cast<long long>(w.split) * a.partition_tokens;
    w.kv_begin = begin < len ? static_cast<int>(begin) : len;
    w.kv_end = w.split == a.num_splits - 1 ? len : min(len, w.kv_begin + a.partition_tokens);
  }
  return r;
}

// The sink of each of the CTA's rows joins that row's state in part 0 of the combine's scratch:
// (m, l) ← (m, l) ⊕ (sink, 1), O ← O · 2^(m − m') — combine_and_store then weighs the parts as
// it always does, and the result is the rows' softmax with the sink in the denominator. Only in
// partition 0 (V1: the only one), so the V2 merge counts each sink once; a partition before the
// window stores (o 0, lse sink) there. Not for a sequence of length 0 (padding: out 0, lse −inf,
// sink or not). m, l: [parts][kRows] (log2 units), o: [parts][kRows][D]; alpha: kRows floats of
// scratch. All threads of the CTA call it (it has barriers; the condition is uniform).
template <int D, class Var>
__device__ __forceinline__ void fold_sinks(const Var& var, const CtaWork& w, const DecodeWindow& win, float* m,
                                           float* l, float* o, float* alpha, int tid, int nthreads) {
  if (var.args.sinks == nullptr || w.split != 0 || win.seq_len <= 0) return;
  constexpr Log2Units<> kUnits;
  if (tid < w.rows) {
    const float sink = var.args.sinks[w.head0 + tid] * kLog2e;  // log2 units
    OnlineSoftmax row(m[tid], l[tid]);
    float wgt;
    alpha[tid] = row.add(sink, wgt, kUnits);  // m = −inf (no key): factor 0, l = 1
    m[tid] = row.m;
    l[tid] = row.l;
  }
  __syncthreads();
  for (int i = tid; i < w.rows * D; i += nthreads) o[i] *= alpha[i / D];
  __syncthreads();
}

}  // namespace muh::kernels::decode
