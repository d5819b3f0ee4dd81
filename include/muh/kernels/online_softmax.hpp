// kernels/online_softmax.hpp — the softmax state and the (o, lse) merge of every kernel, the CPU
// reference and the tests: one __host__ __device__ type, OnlineSoftmax.
//
// A partial result over a subset of keys is (o, lse): o = Σ exp(s_j − lse)·v_j (already
// normalised) and lse = log Σ exp(s_j). Two partials over disjoint key sets merge exactly:
//     lse = log(exp(lse_a) + exp(lse_b)),  o = o_a·exp(lse_a − lse) + o_b·exp(lse_b − lse).
// An empty key set is (o = 0, lse = −inf) and is the identity of merge(). merge() is
// associative and commutative up to rounding, so any split of a sequence, merged in any order,
// gives the unsplit result (tests/cpu/test_online_softmax.cpp).
//
// OnlineSoftmax is a running max m and the mass l = Σ b^(x − m) of the values x folded in so
// far: the scores of a row (an attention kernel's state; o is kept outside, unnormalised) or the
// lse of partials (a merge). Its operations are the steps the kernels take, each kernel calling
// them in its own order (the order decides the rounding, so it is the kernel's to keep):
//   one value at a time   add(x, w)                        the CPU reference, the decode merge
//   one tile at a time    max_with, rescale_to (or factor  the attention kernels (the tile's
//                         and the stabiliser), weight,     max and Σ weights reduced by them)
//                         accumulate
//   two passes            fold_max over all values, then   the prefill tail merge, the decode
//                         accumulate(weight(x)) for each   agent's combine of its warps
//   finish                lse(), inv_l()
// The units say what x is and which exponential forms the weights; they are values, so that a
// kernel's scale can travel with them:
//   NaturalUnits          x natural log (lse of partials, the CPU reference): e^(x − m)
//   Log2Units<Exp2>       x = score · scale · log2(e) (the decode agents): 2^(x − m)
//   ScaledUnits<Exp2>     x a raw score, the scale folded into each exponent (the prefill
//                         agents): 2^(x·c − m·c), c = scale · log2(e)
// Exp2 is the kernel's exp2: Exp2f (exp2f, host and device) or sm80::Exp2Approx (one MUFU.EX2).
// In natural and log2 units a tile step needs a finite tile max (−inf − −inf is NaN): the decode
// agents' tiles always hold a token in range. ScaledUnits take all-masked tiles (prefill rows
// above the causal diagonal) — their stabiliser is 0 while m = −inf.
#pragma once

#include <cmath>

#include "muh/host_device.hpp"

namespace muh {

namespace kernels {
// Softmax in base 2: s2 = (q·k) · scale · log2(e), p = 2^(s2 − m); lse = ln 2 · (m + log2 l).
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
}  // namespace kernels

struct Exp2f {
  MUH_HOST_DEVICE MUH_FORCEINLINE float operator()(float x) const { return exp2f(x); }
};

// Each units type: stabiliser(m), the exponent's offset for running max m; weight(x, mu), the
// weight of value x against it; factor(m_old, mu), the same for an old max (the rescale factor);
// log_mass(m, l) = ln Σ e^(natural x) for a state with l > 0.
struct NaturalUnits {
  MUH_HOST_DEVICE MUH_FORCEINLINE float stabiliser(float m) const { return m; }
  MUH_HOST_DEVICE MUH_FORCEINLINE float weight(float x, float mu) const { return expf(x - mu); }
  MUH_HOST_DEVICE MUH_FORCEINLINE float factor(float m_old, float mu) const { return weight(m_old, mu); }
  MUH_HOST_DEVICE MUH_FORCEINLINE float log_mass(float m, float l) const { return m + logf(l); }
};

template <class Exp2 = Exp2f>
struct Log2Units {
  MUH_HOST_DEVICE MUH_FORCEINLINE float stabiliser(float m) const { return m; }
  MUH_HOST_DEVICE MUH_FORCEINLINE float weight(float x, float mu) const { return Exp2{}(x - mu); }
  MUH_HOST_DEVICE MUH_FORCEINLINE float factor(float m_old, float mu) const { return weight(m_old, mu); }
  MUH_HOST_DEVICE MUH_FORCEINLINE float log_mass(float m, float l) const { return (m + log2f(l)) * kernels::kLn2; }
};

// A row that has seen only masked scores keeps m = −inf; its stabiliser is 0, so its weights are
// 2^(−inf) = 0 rather than NaN, and a first real max rescales by 2^(−inf) = 0. The factor keeps
// the agents' own m·c − mu rather than the weights' fmaf(x, c, −mu): on the device both are one
// FFMA, but written as fmaf the compiler folded the negation into the stabiliser's select and
// the prefill kernels' SASS changed.
template <class Exp2 = Exp2f>
struct ScaledUnits {
  float c;      // scale · log2(e)
  float scale;  // the softmax scale (natural-log units, for lse)
  MUH_HOST_DEVICE MUH_FORCEINLINE float stabiliser(float m) const { return m == -INFINITY ? 0.f : m * c; }
  MUH_HOST_DEVICE MUH_FORCEINLINE float weight(float x, float mu) const { return Exp2{}(fmaf(x, c, -mu)); }
  MUH_HOST_DEVICE MUH_FORCEINLINE float factor(float m_old, float mu) const { return Exp2{}(m_old * c - mu); }
  MUH_HOST_DEVICE MUH_FORCEINLINE float log_mass(float m, float l) const { return m * scale + logf(l); }
};

// F = float: a state of its own (OnlineSoftmax below). F = float&: a view, the same operations on
// a state whose m and l live elsewhere — the MMA agents' per-row arrays m[rows], l[rows] (as an
// array of states, rows × {m, l}, their registers were numbered differently and the SASS
// changed).
template <class F>
struct BasicOnlineSoftmax {
  F m;  // running max of the values
  F l;  // Σ b^(x − m)

  // Adds one value; returns the factor by which the caller must rescale what it accumulated
  // (b^(m_old − m_new)) and sets w = b^(x − m_new), the weight of the new one. A −inf value
  // (masked score, empty partial) is the identity: w = 0, factor 1.
  template <class U = NaturalUnits>
  MUH_HOST_DEVICE MUH_FORCEINLINE float add(float x, float& w, const U& u = U{}) {
    if (x == -INFINITY) {
      w = 0.f;
      return 1.f;
    }
    const float m_new = x > m ? x : m;
    const float mu = u.stabiliser(m_new);
    const float factor = u.factor(m, mu);  // m == −inf → 0
    w = u.weight(x, mu);
    l = l * factor + w;
    m = m_new;
    return factor;
  }

  // The running max after values up to x.
  MUH_HOST_DEVICE MUH_FORCEINLINE float max_with(float x) const { return fmaxf(m, x); }
  MUH_HOST_DEVICE MUH_FORCEINLINE void fold_max(float x) { m = max_with(x); }
  // b^(m − m_new) for mu = u.stabiliser(m_new), m_new ≥ m: the factor by which l (accumulate) and
  // the caller's o are rescaled when the max moves to m_new.
  template <class U>
  MUH_HOST_DEVICE MUH_FORCEINLINE float factor(float mu, const U& u) const { return u.factor(m, mu); }
  // Moves the max to m_new and returns that factor.
  template <class U>
  MUH_HOST_DEVICE MUH_FORCEINLINE float rescale_to(float m_new, const U& u) {
    const float f = factor(u.stabiliser(m_new), u);
    m = m_new;
    return f;
  }
  // b^(x − m): the weight of x at the present max.
  template <class U>
  MUH_HOST_DEVICE MUH_FORCEINLINE float weight(float x, const U& u) const { return u.weight(x, u.stabiliser(m)); }
  MUH_HOST_DEVICE MUH_FORCEINLINE void accumulate(float factor, float mass) { l = l * factor + mass; }
  MUH_HOST_DEVICE MUH_FORCEINLINE void accumulate(float mass) { l += mass; }

  // ln Σ e^x (natural log): −inf when nothing of weight was added.
  template <class U = NaturalUnits>
  MUH_HOST_DEVICE MUH_FORCEINLINE float lse(const U& u = U{}) const { return l > 0.f ? u.log_mass(m, l) : -INFINITY; }
  MUH_HOST_DEVICE MUH_FORCEINLINE float inv_l() const { return l > 0.f ? 1.f / l : 0.f; }
};

// A state of its own, empty to begin with (m = −inf, l = 0: nothing folded in).
struct OnlineSoftmax : BasicOnlineSoftmax<float> {
  MUH_HOST_DEVICE MUH_FORCEINLINE OnlineSoftmax(float m0 = -INFINITY, float l0 = 0.f)
      : BasicOnlineSoftmax<float>{m0, l0} {}
};
using OnlineSoftmaxView = BasicOnlineSoftmax<float&>;

// The CPU reference's names: a row's running softmax over scores, and the fold of partials' lse.
using SoftmaxRunning = OnlineSoftmax;
using LseMerger = OnlineSoftmax;

// The weights of one merge of two partials: o = a·o_a + b·o_b, lse = log(e^lse_a + e^lse_b) —
// the same two add()s and the same factors as merge() below, for a kernel that reads o_a, o_b in
// its own storage type (kernels/merge_states.cuh). Both partials empty (lse −inf): a = b = 0 and
// lse = −inf. (merge() is kept as it is, not rewritten on top of this, so that the kernels that
// inline it compile to what they did.)
struct MergeWeights {
  float a;    // weight of o_a
  float b;    // weight of o_b
  float lse;  // the merged lse
};
MUH_HOST_DEVICE inline MergeWeights merge_weights(float lse_a, float lse_b) {
  OnlineSoftmax mg;
  float wa = 0.f, wb = 0.f;
  mg.add(lse_a, wa);
  const float rescale_a = mg.add(lse_b, wb);
  const float inv = mg.inv_l();
  return {wa * rescale_a * inv, wb * inv, mg.lse()};
}

// merge() on whole partials of length n: (o_a, lse_a) ← merge((o_a, lse_a), (o_b, lse_b)).
MUH_HOST_DEVICE inline void merge(float* o_a, float& lse_a, const float* o_b, float lse_b, int n) {
  OnlineSoftmax mg;
  float wa = 0.f, wb = 0.f;
  mg.add(lse_a, wa);
  const float rescale_a = mg.add(lse_b, wb);
  const float inv = mg.inv_l();
  const float fa = wa * rescale_a * inv, fb = wb * inv;
  for (int i = 0; i < n; ++i) o_a[i] = (fa == 0.f ? 0.f : o_a[i] * fa) + (fb == 0.f ? 0.f : o_b[i] * fb);
  lse_a = mg.lse();
}

}  // namespace muh
