// kernels/variant.cuh — the variant hooks the kernel bodies call (muh/variant.hpp defines the
// variants). FlashInfer's AttentionVariant is the model: a type the body is templated on, with
// the hooks at fixed points of the main loop:
//   key range      which key tiles a q tile visits at all (a window skips the rest: loop bounds)
//   logits         soft-cap and ALiBi on each score, before the mask and the online softmax
//   mask           the window's edges, on the tiles that cross them (with the causal/end mask)
//   finish         the sink folded into the row's (o scale, lse), exactly once per row
// PlainVariant has no hooks: a body instantiated with it takes the branches `if constexpr
// (Var::kOn)` never, so it compiles to the code it was before variants existed (checked with
// scripts/sass_diff.sh). GeneralVariant carries VariantArgs and applies every hook, the off ones
// skipped at run time on values uniform over the CTA.
//
// Units. The prefill agents keep raw scores s = q·k (the scale folded into the exponent,
// online_softmax.hpp's ScaledUnits), so VariantHead works in raw units (the decode agents hand
// it their scores in the same units): with c = softmax scale,
//   soft-cap   s' = (cap/c) · tanh(s · c/cap)   (so that c·s' = cap · tanh(c·s / cap))
//   ALiBi      s' −= (slope/c) · |i' − j|
// tanh as 1 − 2 / (e^(2x) + 1): exp2f and one (fast, on the device) division, exact at ±inf (→ ±1), absolute error
// ~1e-7, i.e. ~3e-6 on a logit at cap 30 — what matters for the weights e^logit (a relative
// error of the weight equals the logit's absolute error). The MUFU tanh.approx (sm_75+) has a
// relative error of 2^-11: 0.015 on a capped logit of 30, 1.5 % on its weight, more than the
// bf16 tests' tolerance.
#pragma once

#include <cmath>

#include "muh/host_device.hpp"
#include "muh/variant.hpp"

namespace muh::kernels {

// The general kind's run-time parameters, normalised on the host (make_variant_args below, called
// by src/prefill.cu and src/decode.cu) so that the kernels' rule is int arithmetic on kernel
// parameters:
//   window sides: -1 (unbounded), or smaller than max_seqlen_q + max_seqlen_k — a side that
//   reaches past every key of every row is unbounded (FlashAttention's rule, with a bound that
//   holds for q longer than k too; it also keeps i' ± side inside int) — and causal folded in as
//   window_right = 0 (so the window's mask is the causal mask too);
//   soft-cap and ALiBi in raw-score units (cap_raw = cap / scale, cap_exp2 = 2·log2(e)·scale / cap,
//   slope_raw = slope · inv_scale); cap_raw 0 = off; null pointers = off.
struct VariantArgs {
  int window_left = -1;
  int window_right = -1;
  int queries_after_keys = 0;  // Variant::queries_after_keys: query i at key position len_k + i
  float cap_raw = 0.f;
  float cap_exp2 = 0.f;
  float inv_scale = 1.f;
  const float* sinks = nullptr;         // [num_q_heads] natural-log logits
  const float* alibi_slopes = nullptr;  // [num_q_heads]
};

// The general variant kind's kernel argument from a validated Variant, the
// call's softmax scale (> 0), causal flag and longest sequences: window sides that reach past
// every key of every row become unbounded (left >= max_seqlen_k: i' − left < 0 always; right >=
// max_seqlen_q + max_seqlen_k: i' + right >= sk, as i' >= −sq), causal becomes window_right = 0,
// soft-cap and the ALiBi scale in raw-score units.
inline VariantArgs make_variant_args(const Variant& v, float scale, bool causal, int max_seqlen_q,
                                              int max_seqlen_k) {
  VariantArgs a;
  // (i' <= len_k + len_q − 1 in both alignments: a left side that large reaches key 0 from every row)
  a.window_left = static_cast<long long>(v.window_left) >= static_cast<long long>(max_seqlen_q) + max_seqlen_k
                      ? -1
                      : v.window_left;
  a.queries_after_keys = v.queries_after_keys ? 1 : 0;
  a.window_right = causal ? 0
                          : (static_cast<long long>(v.window_right) >= static_cast<long long>(max_seqlen_q) + max_seqlen_k
                                 ? -1
                                 : v.window_right);
  if (v.softcap > 0.f) {
    a.cap_raw = v.softcap / scale;
    a.cap_exp2 = 2.f * 1.4426950408889634f * scale / v.softcap;
  }
  a.inv_scale = 1.f / scale;
  a.sinks = v.use_sinks ? v.sinks : nullptr;
  a.alibi_slopes = v.use_alibi ? v.alibi_slopes : nullptr;
  return a;
}

struct PlainVariant {
  static constexpr bool kOn = false;
};

struct GeneralVariant {
  static constexpr bool kOn = true;
  VariantArgs args;
};

// Keys [lo, hi) in int (the device form of muh::KeyRange).
struct KeyRange32 {
  int lo, hi;
};

// One (sequence, q head) as a body sees it: the rule of muh/variant.hpp (visible_key_range,
// the logit transform, fold_sink) on the normalised arguments, bound to the sequence's lengths.
// It holds a reference to the arguments (kernel parameters: no registers) and the head's slope.
struct VariantHead {
  const VariantArgs& v;
  int shift;  // sk − sq (sk with queries_after_keys): query i sits at key position i + shift
  int sk;
  int sq;
  int h;
  float slope_raw;  // 0: no ALiBi

  MUH_HOST_DEVICE MUH_FORCEINLINE VariantHead(const VariantArgs& args, int h_, int sq, int sk_)
      : v(args), shift(args.queries_after_keys ? sk_ : sk_ - sq), sk(sk_), sq(sq), h(h_),
        slope_raw(args.alibi_slopes != nullptr ? args.alibi_slopes[h_] * args.inv_scale : 0.f) {}

  // Keys [lo, hi) query row i sees (empty when lo >= hi).
  MUH_HOST_DEVICE MUH_FORCEINLINE KeyRange32 keys(int i) const {
    const int ip = i + shift;
    const int lo = v.window_left >= 0 && ip - v.window_left > 0 ? ip - v.window_left : 0;
    const int hi = v.window_right >= 0 && ip + v.window_right + 1 < sk ? ip + v.window_right + 1 : sk;
    return {lo, hi};
  }
  // Key tiles of BN keys that rows [m0, m0 + rows) ∩ [0, sq) visit: [begin, end). lo and hi grow
  // with the row, so the first row bounds the start and the last one the end.
  template <int BN>
  MUH_HOST_DEVICE MUH_FORCEINLINE void key_tiles(int m0, int rows, int* begin, int* end) const {
    const KeyRange32 a = keys(m0), b = keys((m0 + rows < sq ? m0 + rows : sq) - 1);
    *begin = a.lo / BN;
    *end = b.hi > a.lo ? (b.hi + BN - 1) / BN : *begin;
  }
  // Does key tile [n0, n0 + bn) need a per-element mask for rows [m0, m0 + rows)? Yes unless every
  // key of it is inside every row's range.
  MUH_HOST_DEVICE MUH_FORCEINLINE bool tile_needs_mask(int n0, int bn, int m0, int rows) const {
    const KeyRange32 a = keys(m0), b = keys((m0 + rows < sq ? m0 + rows : sq) - 1);
    return n0 < b.lo || n0 + bn > a.hi;
  }
  // The transformed raw score of query i against key j (both sequence-relative).
  MUH_HOST_DEVICE MUH_FORCEINLINE float logit(float s, int i, int j) const {
    if (v.cap_raw != 0.f) {
      const float e = exp2f(s * v.cap_exp2);  // e^(2x), x = c·s / cap
#if defined(__CUDA_ARCH__)
      s = v.cap_raw * (1.f - __fdividef(2.f, e + 1.f));  // e = inf: 2 / inf = 0, tanh = 1
#else
      s = v.cap_raw * (1.f - 2.f / (e + 1.f));
#endif
    }
    if (slope_raw != 0.f) {
      const int d = i + shift - j;
      s -= slope_raw * static_cast<float>(d < 0 ? -d : d);
    }
    return s;
  }
  MUH_HOST_DEVICE MUH_FORCEINLINE bool masked(int i, int j) const {
    const KeyRange32 r = keys(i);
    return j < r.lo || j >= r.hi;
  }
  // The row's result with the head's sink: given its lse (−inf: no key) and 1/l, the factor for
  // O and the lse to store (fold_sink).
  MUH_HOST_DEVICE MUH_FORCEINLINE void finish(float lse, float inv_l, float* inv_out, float* lse_out) const {
    if (v.sinks == nullptr) {
      *inv_out = inv_l;
      *lse_out = lse;
      return;
    }
    *inv_out = inv_l * fold_sink(lse, v.sinks[h], lse_out);
  }
};

// What a body binds for its (sequence, q head): a VariantHead for the general kind, nothing for
// the plain one (whose hooks are never called).
struct NoVariantHead {};
template <class Var>
MUH_HOST_DEVICE MUH_FORCEINLINE auto make_variant_head(const Var& var, int h, int sq, int sk) {
  if constexpr (Var::kOn)
    return VariantHead(var.args, h, sq, sk);
  else
    return NoVariantHead{};
}

}  // namespace muh::kernels
