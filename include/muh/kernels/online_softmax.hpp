// kernels/online_softmax.hpp — the split-KV math, shared by the CPU reference, the tests and the
// GPU kernels (__host__ __device__).
//
// A partial result over a subset of keys is (o, lse): o = Σ exp(s_j − lse)·v_j (already
// normalised) and lse = log Σ exp(s_j). Two partials over disjoint key sets merge exactly:
//     lse = log(exp(lse_a) + exp(lse_b)),  o = o_a·exp(lse_a − lse) + o_b·exp(lse_b − lse).
// An empty key set is (o = 0, lse = −inf) and is the identity of merge(). merge() is
// associative and commutative up to rounding, so any split of a sequence, merged in any order,
// gives the unsplit result (tests/cpu/test_online_softmax.cpp).
#pragma once

#include <cmath>

#include "muh/host_device.hpp"

namespace muh {

MUH_HOST_DEVICE MUH_FORCEINLINE float neg_inf() { return -INFINITY; }

// Running (max, denominator) of an online softmax over scores seen so far. o is kept outside,
// unnormalised, and rescaled with the factor rescale() returns.
struct SoftmaxRunning {
  float m = -INFINITY;  // running max of scores
  float d = 0.f;        // Σ exp(s − m)

  // Adds one score; returns the factor by which the caller must rescale its accumulated o
  // (exp(m_old − m_new)) and sets p = exp(s − m_new), the weight of the new value.
  MUH_HOST_DEVICE MUH_FORCEINLINE float add(float s, float& p) {
    const float m_new = s > m ? s : m;
    if (m_new == -INFINITY) {  // still nothing but masked scores
      p = 0.f;
      return 1.f;
    }
    const float scale = expf(m - m_new);  // m == −inf → 0
    p = expf(s - m_new);
    d = d * scale + p;
    m = m_new;
    return scale;
  }

  // log Σ exp(s): −inf when no finite score was added.
  MUH_HOST_DEVICE MUH_FORCEINLINE float lse() const { return d > 0.f ? m + logf(d) : -INFINITY; }
  MUH_HOST_DEVICE MUH_FORCEINLINE float inv_denominator() const { return d > 0.f ? 1.f / d : 0.f; }
};

// Merges normalised partials (o_i, lse_i) one at a time: for each, weight() gives the factor for
// the accumulated o (rescale) and for the incoming o; finish() gives the merged lse.
struct LseMerger {
  float m = -INFINITY;  // max lse so far
  float s = 0.f;        // Σ exp(lse_i − m)

  // Returns the factor to rescale the accumulated (un-normalised) o by, and sets w, the factor
  // for the incoming partial o. After the last partial, divide the accumulated o by total().
  MUH_HOST_DEVICE MUH_FORCEINLINE float add(float lse, float& w) {
    if (lse == -INFINITY) {  // empty partial: identity
      w = 0.f;
      return 1.f;
    }
    const float m_new = lse > m ? lse : m;
    const float scale = expf(m - m_new);
    w = expf(lse - m_new);
    s = s * scale + w;
    m = m_new;
    return scale;
  }
  MUH_HOST_DEVICE MUH_FORCEINLINE float total() const { return s; }
  MUH_HOST_DEVICE MUH_FORCEINLINE float inv_total() const { return s > 0.f ? 1.f / s : 0.f; }
  MUH_HOST_DEVICE MUH_FORCEINLINE float lse() const { return s > 0.f ? m + logf(s) : -INFINITY; }
};

// merge() on whole partials of length n: (o_a, lse_a) ← merge((o_a, lse_a), (o_b, lse_b)).
MUH_HOST_DEVICE inline void merge(float* o_a, float& lse_a, const float* o_b, float lse_b, int n) {
  LseMerger mg;
  float wa = 0.f, wb = 0.f;
  mg.add(lse_a, wa);
  const float rescale_a = mg.add(lse_b, wb);
  const float inv = mg.inv_total();
  const float fa = wa * rescale_a * inv, fb = wb * inv;
  for (int i = 0; i < n; ++i) o_a[i] = (fa == 0.f ? 0.f : o_a[i] * fa) + (fb == 0.f ? 0.f : o_b[i] * fb);
  lse_a = mg.lse();
}

}  // namespace muh
