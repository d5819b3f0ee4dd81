// variant.hpp — attention variants: what a call asks beyond plain softmax attention, as one small
// options struct (Variant, a member of PrefillParams and DecodeParams; muh_variant in the C ABI),
// and the rules that define each variant, written once, host and device: the CPU reference
// (src/reference.cpp) and every kernel body (kernels/variant.cuh) call these functions.
//
//   sliding window  FlashAttention's window_size = (left, right), -1 = unbounded: query i of a
//                   sequence with lengths (sq, sk) sits at key position i' = i + sk − sq (bottom-
//                   right aligned, like the causal mask) and sees keys i' − left <= j <= i' + right.
//                   causal caps right at 0 (FlashAttention sets window_size_right = 0 when causal).
//   soft-capping    (Gemma 2) logit = softcap · tanh(logit / softcap); 0 = off.
//   ALiBi           (BLOOM, MPT; FlashAttention's convention) logit −= slope[h] · |i' − j|, the
//                   slope per q head, applied after the soft-cap (FlashAttention's order).
//   sinks           (gpt-oss; vLLM's s_aux) a learned logit per q head that joins the softmax's
//                   denominator and has no value: out = Σ_j e^(s_j) v_j / (e^sink + Σ_j e^(s_j)),
//                   lse = log(e^sink + Σ_j e^(s_j)). A row that sees no key gets out = 0 and
//                   lse = sink. Split-KV paths add it exactly once, in the merge (fold_sink).
// "logit" is scale · q·k, natural-log units (the softmax's argument).
//
// Instantiation: two kinds (VariantKind) per kernel. plain — every hook compiles away, so the
// kernels of a call without variants are the ones of before variants existed (the same SASS:
// scripts/sass_diff.sh); general — every hook on, with its parameters read at run time (off ones
// cost a branch on a uniform value). Why not one instantiation per combination (FlashInfer's
// way, 2^4 = 16 per policy): the general kind's cost is a few instructions per score (measured:
// README / the device results), and 16× the prefill instantiations would multiply the build
// (~1 min per (dtype, head_dim) paged file on 2 cores) for that. A call takes general when any
// variant is on (variant_kind); CMake's MUH_VARIANTS prunes the general kind (a call asking for a
// variant then gets not_compiled).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include "muh/host_device.hpp"

namespace muh {

struct Variant {
  int window_left = -1;   // keys j >= i' − window_left; -1: unbounded
  int window_right = -1;  // keys j <= i' + window_right; -1: unbounded (causal: 0)
  float softcap = 0.f;    // > 0: soft-capping at this value; 0: off
  // Per q head, fp32 device pointers [num_q_heads]; use_* says the call asks for them (a null
  // pointer then, or a pointer without its flag, is an invalid argument: nothing is guessed).
  bool use_sinks = false;
  const float* sinks = nullptr;
  bool use_alibi = false;
  const float* alibi_slopes = nullptr;
  // Where the queries sit for the window and ALiBi: false (FlashAttention's, bottom-right
  // aligned): query i at key position i' = i + len_k − len_q; true: after every key, i' = len_k + i
  // — a chunk's attention to its cached prefix computed apart from its attention to itself
  // (context_attention_fwd's prefix part). Changes nothing without a window or ALiBi.
  bool queries_after_keys = false;
};

enum class VariantKind { plain = 0, general = 1 };
inline constexpr int kVariantKinds = 2;

inline const char* variant_kind_name(VariantKind k) { return k == VariantKind::plain ? "plain" : "general"; }

MUH_HOST_DEVICE inline bool has_window(const Variant& v) { return v.window_left >= 0 || v.window_right >= 0; }

// The instantiation a call takes.
MUH_HOST_DEVICE inline VariantKind variant_kind(const Variant& v) {
  return has_window(v) || v.softcap != 0.f || v.use_sinks || v.use_alibi ? VariantKind::general : VariantKind::plain;
}

// "window (4, 0), softcap 30, sinks, alibi" or "none", for messages and --explain.
inline std::string describe_variant(const Variant& v) {
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : ", ") + x; };
  if (has_window(v)) add("window (" + std::to_string(v.window_left) + ", " + std::to_string(v.window_right) + ")");
  if (v.softcap != 0.f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "softcap %g", static_cast<double>(v.softcap));
    add(buf);
  }
  if (v.use_sinks) add("sinks");
  if (v.use_alibi) add("alibi");
  if (v.queries_after_keys && (has_window(v) || v.use_alibi)) add("queries after keys");
  return s.empty() ? "none" : s;
}

// ---- The rules ---------------------------------------------------------------------------------
// The keys [lo, hi) query row i (0 <= i < sq) sees out of sk, given causal and a window (left,
// right as in Variant, -1 unbounded). Empty when lo >= hi.
struct KeyRange {
  long long lo, hi;
};
MUH_HOST_DEVICE MUH_FORCEINLINE KeyRange visible_key_range(long long i, int sq, int sk, bool causal, int left,
                                                           int right, bool queries_after_keys = false) {
  const long long ip = i + sk - (queries_after_keys ? 0 : sq);  // the query's key position
  long long lo = left >= 0 ? ip - left : 0;
  long long hi = sk;
  if (causal) hi = ip + 1 < hi ? ip + 1 : hi;
  if (right >= 0) hi = ip + right + 1 < hi ? ip + right + 1 : hi;
  if (lo < 0) lo = 0;
  return {lo, hi};
}

// Soft-capping and ALiBi on one logit x (natural units) of query i against key j.
inline double softcap_logit(double x, double softcap) {
  return softcap > 0 ? softcap * std::tanh(x / softcap) : x;
}
MUH_HOST_DEVICE MUH_FORCEINLINE long long alibi_distance(long long i, long long j, int sq, int sk,
                                                         bool queries_after_keys = false) {
  const long long d = i + sk - (queries_after_keys ? 0 : sq) - j;
  return d < 0 ? -d : d;
}

// A normalised partial (o, lse) — or a kernel's final row state given as its lse — with the sink
// folded in: lse' = log(e^lse + e^sink), o' = o · e^(lse − lse'). Returns the factor for o
// (0 when lse = −inf: a row with no key keeps o = 0 and gets lse' = sink); sets lse'. A −inf sink
// changes nothing. Computed without overflow for sinks far above or below lse.
MUH_HOST_DEVICE MUH_FORCEINLINE float fold_sink(float lse, float sink, float* lse_out) {
  if (sink == -INFINITY) {
    *lse_out = lse;
    return 1.f;
  }
  if (lse == -INFINITY) {
    *lse_out = sink;
    return 0.f;
  }
  const float m = lse > sink ? lse : sink;
  const float a = expf(lse - m), b = expf(sink - m);  // one of them is 1
  const float sum = a + b;
  *lse_out = m + logf(sum);
  return a / sum;
}

}  // namespace muh
