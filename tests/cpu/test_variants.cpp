// test_variants.cpp — attention variants (muh/variant.hpp) on the CPU: the reference's variants
// against relations that follow from their definitions (a window is plain attention over a key
// sub-range, a sink rescales the plain result, soft-cap and ALiBi against hand-computed
// softmaxes), the kernels' rule (kernels/variant.cuh, VariantHead on normalised arguments)
// against the reference's (visible_key_range, the logit transform, fold_sink), and bad variants
// refused with a Status naming the field before any CUDA call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "muh/attention.hpp"
#include "muh/instances.hpp"
#include "muh/kernels/variant.cuh"
#include "muh/muh.h"
#include "muh/reference.hpp"
#include "muh/variant.hpp"

namespace muh {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// One dense prefill problem (host data) for the reference.
struct Problem {
  std::vector<int> len_q, len_k;
  int hq = 4, hkv = 2, d = 16;
  bool causal = false;
  float scale = 0.3f;
  std::vector<int> cu_q{0}, cu_k{0};
  std::vector<float> q, k, v;
  explicit Problem(std::vector<int> lq, std::vector<int> lk, bool c, unsigned seed = 3)
      : len_q(std::move(lq)), len_k(std::move(lk)), causal(c) {
    for (std::size_t b = 0; b < len_q.size(); ++b) {
      cu_q.push_back(cu_q.back() + len_q[b]);
      cu_k.push_back(cu_k.back() + len_k[b]);
    }
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    auto fill = [&](std::vector<float>& x, std::size_t n) {
      x.resize(n);
      for (auto& e : x) e = u(rng);
    };
    fill(q, std::size_t(cu_q.back()) * hq * d);
    fill(k, std::size_t(cu_k.back()) * hkv * d);
    fill(v, std::size_t(cu_k.back()) * hkv * d);
  }
  int batch() const { return int(len_q.size()); }
  int total_q() const { return cu_q.back(); }
  void run(const Variant& var, std::vector<float>& out, std::vector<float>& lse) const {
    out.assign(q.size(), 0.f);
    lse.assign(std::size_t(total_q()) * hq, 0.f);
    ref::prefill(q.data(), k.data(), v.data(), cu_q.data(), cu_k.data(), batch(), hq, hkv, d, scale, causal, var,
                 out.data(), lse.data());
  }
};

TEST(VariantReference, NoVariantIsThePlainReferenceBitwise) {
  const Problem p({5, 17, 0, 3}, {9, 17, 4, 3}, true);
  std::vector<float> out, lse, out0(p.q.size()), lse0(std::size_t(p.total_q()) * p.hq);
  p.run(Variant{}, out, lse);
  ref::prefill(p.q.data(), p.k.data(), p.v.data(), p.cu_q.data(), p.cu_k.data(), p.batch(), p.hq, p.hkv, p.d, p.scale,
               p.causal, out0.data(), lse0.data());
  EXPECT_EQ(out, out0);
  EXPECT_EQ(std::memcmp(lse.data(), lse0.data(), lse.size() * 4), 0);
}

// A window is plain attention over each row's key sub-range: run every row as its own sequence
// of the keys it sees (a non-causal call over a sliced K/V) and compare.
TEST(VariantReference, WindowIsPlainAttentionOverTheRowsKeys) {
  struct W {
    int left, right;
    bool causal;
  };
  for (const W w : {W{3, 0, true}, W{0, 0, true}, W{4, -1, true}, W{2, 5, false}, W{-1, 2, false}, W{6, -1, false}}) {
    const Problem p({7, 12}, {20, 12}, w.causal, 11);
    Variant var;
    var.window_left = w.left;
    var.window_right = w.right;
    std::vector<float> out, lse;
    p.run(var, out, lse);
    for (int b = 0; b < p.batch(); ++b) {
      const int sq = p.len_q[b], sk = p.len_k[b];
      for (int i = 0; i < sq; ++i) {
        const int ip = i + sk - sq;
        int lo = w.left >= 0 ? std::max(0, ip - w.left) : 0;
        int hi = sk;
        if (w.causal) hi = std::min(hi, ip + 1);
        if (w.right >= 0) hi = std::min(hi, ip + w.right + 1);
        hi = std::max(hi, lo);
        // One query row against keys [lo, hi) of its sequence, plain and non-causal.
        const std::size_t row = std::size_t(p.hkv) * p.d;
        std::vector<float> qr(p.q.begin() + std::size_t(p.cu_q[b] + i) * p.hq * p.d,
                              p.q.begin() + std::size_t(p.cu_q[b] + i + 1) * p.hq * p.d);
        std::vector<float> kr(p.k.begin() + (p.cu_k[b] + lo) * row, p.k.begin() + (p.cu_k[b] + hi) * row);
        std::vector<float> vr(p.v.begin() + (p.cu_k[b] + lo) * row, p.v.begin() + (p.cu_k[b] + hi) * row);
        const int cq[2] = {0, 1}, ck[2] = {0, hi - lo};
        std::vector<float> o(qr.size()), l(p.hq);
        ref::prefill(qr.data(), kr.data(), vr.data(), cq, ck, 1, p.hq, p.hkv, p.d, p.scale, false, o.data(), l.data());
        for (int h = 0; h < p.hq; ++h) {
          EXPECT_EQ(l[h], lse[std::size_t(h) * p.total_q() + p.cu_q[b] + i])
              << "window (" << w.left << ", " << w.right << ") seq " << b << " row " << i;
          for (int e = 0; e < p.d; ++e)
            ASSERT_EQ(o[std::size_t(h) * p.d + e], out[(std::size_t(p.cu_q[b] + i) * p.hq + h) * p.d + e]);
        }
      }
    }
  }
}

// A sink s: out = out_plain · e^lse / (e^lse + e^s), lse = log(e^lse + e^s); a row with no key
// gets out = 0 and lse = s. Sinks far above and below the scores included.
TEST(VariantReference, SinkRescalesThePlainResult) {
  const Problem p({6, 4}, {6, 9}, true);  // row 0 of seq 0 sees 1 key; causal q < k
  std::vector<float> out0, lse0, out, lse;
  p.run(Variant{}, out0, lse0);
  const std::vector<float> sinks = {-30.f, 0.5f, 40.f, 2.f};
  Variant var;
  var.use_sinks = true;
  var.sinks = sinks.data();
  p.run(var, out, lse);
  for (int t = 0; t < p.total_q(); ++t)
    for (int h = 0; h < p.hq; ++h) {
      const double l0 = lse0[std::size_t(h) * p.total_q() + t], s = sinks[h];
      const double m = std::max(l0, s), want_lse = m + std::log(std::exp(l0 - m) + std::exp(s - m));
      const double f = std::exp(l0 - want_lse);
      EXPECT_NEAR(lse[std::size_t(h) * p.total_q() + t], want_lse, 1e-5 * (1 + std::fabs(want_lse)));
      for (int e = 0; e < p.d; ++e) {
        const std::size_t i = (std::size_t(t) * p.hq + h) * p.d + e;
        EXPECT_NEAR(out[i], out0[i] * f, 1e-6 + 1e-5 * std::fabs(out0[i]));
      }
    }
  // No key at all (a window that excludes every key of a row): out 0, lse = the sink.
  const Problem e2({3}, {1}, false);
  std::vector<float> o2, l2;
  Variant right0;
  right0.use_sinks = true;
  right0.sinks = sinks.data();
  right0.window_left = 0;
  right0.window_right = 0;  // row i sees only key i' = i + sk − sq: rows 0, 1 of (3 q, 1 k) see nothing
  e2.run(right0, o2, l2);
  for (int h = 0; h < e2.hq; ++h) {
    EXPECT_EQ(l2[std::size_t(h) * 3 + 0], sinks[h]);
    EXPECT_EQ(l2[std::size_t(h) * 3 + 1], sinks[h]);
    for (int k = 0; k < e2.d; ++k) EXPECT_EQ(o2[std::size_t(h) * e2.d + k], 0.f);
  }
}

// Soft-cap and ALiBi by hand: one query, three keys of known scores.
TEST(VariantReference, SoftcapAndAlibiMatchAHandComputedSoftmax) {
  // q = (1, 0), keys (a_j, 0): scores scale · a_j; values one-hot.
  const float scale = 1.f;
  const std::vector<float> q = {1.f, 0.f}, k = {8.f, 0.f, -3.f, 0.f, 20.f, 0.f};
  const std::vector<float> v = {1.f, 0.f, 0.f, 1.f, 0.5f, 0.5f};
  const int cq[2] = {0, 1}, ck[2] = {0, 3};
  const float slope = 0.7f, cap = 10.f;
  Variant var;
  var.softcap = cap;
  var.use_alibi = true;
  var.alibi_slopes = &slope;
  std::vector<float> out(2);
  float lse = 0;
  ref::prefill(q.data(), k.data(), v.data(), cq, ck, 1, 1, 1, 2, scale, false, var, out.data(), &lse);
  // Query at key position 2 (bottom-right): distances 2, 1, 0.
  double x[3];
  for (int j = 0; j < 3; ++j) x[j] = cap * std::tanh(k[2 * j] / cap) - slope * (2 - j);
  double den = 0, o0 = 0, o1 = 0;
  for (int j = 0; j < 3; ++j) {
    const double p = std::exp(x[j]);
    den += p;
    o0 += p * v[2 * j];
    o1 += p * v[2 * j + 1];
  }
  EXPECT_NEAR(out[0], o0 / den, 1e-6);
  EXPECT_NEAR(out[1], o1 / den, 1e-6);
  EXPECT_NEAR(lse, std::log(den), 1e-6);
}

// Queries after the keys (a chunk against its cached prefix): query i sits at key position
// len_k + i, so a window (left, -1) keeps keys >= len_k + i − left and ALiBi's distance is
// len_k + i − j — against the bottom-right alignment's len_k − len_q + i.
TEST(VariantReference, QueriesAfterKeysShiftThePositions) {
  const Problem p({4}, {10}, false, 21);
  const std::vector<float> slopes = {0.3f, 0.2f, 0.1f, 0.05f};
  Variant after;
  after.window_left = 6;
  after.use_alibi = true;
  after.alibi_slopes = slopes.data();
  after.queries_after_keys = true;
  std::vector<float> out, lse;
  p.run(after, out, lse);
  // Against an explicit double softmax over keys [10 + i − 6, 10), bias −slope · (10 + i − j).
  for (int i = 0; i < 4; ++i)
    for (int h = 0; h < p.hq; ++h) {
      const int kh = h / (p.hq / p.hkv);
      double m = -1e300, den = 0;
      std::vector<double> x(10, -1e300), o(p.d, 0.0);
      for (int j = std::max(0, 10 + i - 6); j < 10; ++j) {
        double acc = 0;
        for (int e = 0; e < p.d; ++e)
          acc += double(p.q[(std::size_t(i) * p.hq + h) * p.d + e]) * p.k[(std::size_t(j) * p.hkv + kh) * p.d + e];
        x[j] = acc * p.scale - slopes[h] * (10 + i - j);
        m = std::max(m, x[j]);
      }
      for (int j = std::max(0, 10 + i - 6); j < 10; ++j) {
        const double w = std::exp(x[j] - m);
        den += w;
        for (int e = 0; e < p.d; ++e) o[e] += w * p.v[(std::size_t(j) * p.hkv + kh) * p.d + e];
      }
      if (10 + i - 6 >= 10) {  // no key left in the window
        EXPECT_EQ(lse[std::size_t(h) * 4 + i], -kInf);
        continue;
      }
      EXPECT_NEAR(lse[std::size_t(h) * 4 + i], m + std::log(den), 1e-5);
      for (int e = 0; e < p.d; ++e) EXPECT_NEAR(out[(std::size_t(i) * p.hq + h) * p.d + e], o[e] / den, 1e-6);
    }
}

TEST(VariantRule, FoldSinkIsLogAddExpWithoutOverflow) {
  for (float lse : {-kInf, -80.f, 0.f, 3.f, 90.f})
    for (float sink : {-kInf, -100.f, -2.f, 0.f, 5.f, 100.f}) {
      float got = 0;
      const float f = fold_sink(lse, sink, &got);
      if (lse == -kInf && sink == -kInf) {
        EXPECT_EQ(got, -kInf);
        continue;
      }
      const double m = std::max<double>(lse, sink);
      const double want = m + std::log(std::exp(double(lse) - m) + std::exp(double(sink) - m));
      EXPECT_NEAR(got, want, 1e-5 * (1 + std::fabs(want))) << lse << " " << sink;
      EXPECT_NEAR(f, std::exp(double(lse) - want), 1e-6) << lse << " " << sink;
      EXPECT_TRUE(std::isfinite(f));
    }
}

// The kernels' rule (int arithmetic on normalised arguments) against the reference's rule, over
// many lengths, windows and masks: the same key range for every row, key tiles that cover
// exactly the rows' keys, and tiles said to need no mask lying inside every row's range.
TEST(VariantRule, KernelRuleMatchesTheReferenceRule) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> len(1, 300), side(-1, 80), pick(0, 3);
  for (int it = 0; it < 400; ++it) {
    int sq = len(rng), sk = len(rng);
    const bool causal = pick(rng) == 0;
    if (causal && sq > sk) std::swap(sq, sk);
    Variant v;
    v.window_left = pick(rng) == 0 ? 1000 : side(rng);  // also sides past every key
    v.window_right = pick(rng) == 0 ? 1000 : side(rng);
    v.queries_after_keys = !causal && pick(rng) == 1;  // (context_attention_fwd's prefix part)
    const kernels::VariantArgs a = kernels::make_variant_args(v, 0.125f, causal, sq, sk);
    const kernels::VariantHead vh(a, 0, sq, sk);
    for (int i = 0; i < sq; ++i) {
      const KeyRange want =
          visible_key_range(i, sq, sk, causal, v.window_left, v.window_right, v.queries_after_keys);
      const kernels::KeyRange32 got = vh.keys(i);
      if (want.lo >= want.hi) {
        EXPECT_GE(got.lo, got.hi) << "row " << i << " of " << sq << "/" << sk;
      } else {
        ASSERT_EQ(got.lo, want.lo) << "row " << i << " of " << sq << "/" << sk << " window " << v.window_left << ","
                                   << v.window_right << (causal ? " causal" : "");
        ASSERT_EQ(got.hi, want.hi) << "row " << i;
      }
    }
    constexpr int BM = 64, BN = 32;
    for (int m0 = 0; m0 < sq; m0 += BM) {
      int begin = 0, end = 0;
      vh.key_tiles<BN>(m0, BM, &begin, &end);
      long long lo = sk, hi = 0;  // the union of the tile's rows' ranges
      for (int i = m0; i < std::min(sq, m0 + BM); ++i) {
        const KeyRange r =
            visible_key_range(i, sq, sk, causal, v.window_left, v.window_right, v.queries_after_keys);
        if (r.lo < r.hi) lo = std::min(lo, r.lo), hi = std::max(hi, r.hi);
      }
      if (lo < hi) {
        EXPECT_LE(begin * BN, lo);
        EXPECT_GE(end * BN, hi);
        EXPECT_GT((begin + 1) * BN, lo) << "a leading tile wholly outside the window is visited";
        EXPECT_LT((end - 1) * BN, hi) << "a trailing tile wholly outside the window is visited";
      }
      for (int t = begin; t < end; ++t)
        if (!vh.tile_needs_mask(t * BN, BN, m0, BM))
          for (int i = m0; i < std::min(sq, m0 + BM); ++i)
            for (int j = t * BN; j < t * BN + BN; ++j) ASSERT_FALSE(vh.masked(i, j)) << "row " << i << " key " << j;
    }
  }
}

TEST(VariantRule, KernelLogitMatchesTheReference) {
  const float scale = 0.09f, slope = 0.25f;
  for (float cap : {0.f, 30.f, 50.f}) {
    Variant v;
    v.softcap = cap;
    v.use_alibi = true;
    v.alibi_slopes = &slope;
    const kernels::VariantArgs a = kernels::make_variant_args(v, scale, false, 40, 100);
    const kernels::VariantHead vh(a, 0, 40, 100);
    for (float s : {-4000.f, -300.f, -1.f, 0.f, 0.5f, 77.f, 900.f, 1e6f})
      for (int i : {0, 17, 39})
        for (int j : {0, 60, 99}) {
          // raw score s → natural logit scale · s, transformed, back to raw units
          double want = softcap_logit(double(s) * scale, cap) - double(slope) * double(alibi_distance(i, j, 40, 100));
          const double got = double(vh.logit(s, i, j)) * scale;
          // tanh as 1 − 2 / (e^2x + 1) in fp32: absolute error ~1e-7 near 0, times the cap
          // (kernels/variant.cuh) — 5e-6 at cap 50, a relative error of 5e-6 on the weight.
          EXPECT_NEAR(got, want, 2e-6 * (1 + std::fabs(want)) + 2e-7 * cap) << "cap " << cap << " s " << s;
        }
  }
}

// ---- Bad variants: a Status naming the field, before any CUDA call ---------------------------
alignas(64) unsigned char g_fake[1024];

// A decode plan's shape (no buffers: the plan reads none), 2 sequences, GQA 4, pages of 16.
DecodeParams good_decode(int num_pages, int max_blocks_per_seq, int max_seq_len) {
  DecodeParams p;
  p.dtype = kCompiledInstances[0].dtype;
  p.head_dim = kCompiledInstances[0].head_dim;
  p.num_seqs = 2;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.page_size = 16;
  p.num_pages = num_pages;
  p.max_blocks_per_seq = max_blocks_per_seq;
  p.max_seq_len = max_seq_len;
  return p;
}

PrefillParams good_prefill() {
  PrefillParams p;
  p.dtype = kCompiledInstances[0].dtype;
  p.head_dim = kCompiledInstances[0].head_dim;
  p.q = g_fake;
  p.k = g_fake + 64;
  p.v = g_fake + 128;
  p.out = g_fake + 192;
  p.cu_seqlens_q = reinterpret_cast<const int*>(g_fake + 320);
  p.cu_seqlens_k = reinterpret_cast<const int*>(g_fake + 384);
  p.batch = 2;
  p.total_q = p.total_k = 8;
  p.max_seqlen_q = p.max_seqlen_k = 5;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.causal = true;
  return p;
}

const float g_heads[8] = {0, 0, 0, 0, 0, 0, 0, 0};

// MUH_VARIANT_NONE read as the C++ struct (field by field, as the C ABI does).
Variant capi_none() {
  const muh_variant c = MUH_VARIANT_NONE;
  Variant v;
  v.window_left = c.window_left;
  v.window_right = c.window_right;
  v.softcap = c.softcap;
  v.use_sinks = c.use_sinks != 0;
  v.sinks = c.sinks;
  v.use_alibi = c.use_alibi != 0;
  v.alibi_slopes = c.alibi_slopes;
  return v;
}

struct BadVariant {
  const char* name;
  void (*mutate)(Variant&);
  const char* says;
};
const BadVariant kBadVariants[] = {
    {"window_left_minus_2", [](Variant& v) { v.window_left = -2; }, "variant.window_left is -2"},
    {"window_right_minus_5", [](Variant& v) { v.window_right = -5; }, "variant.window_right is -5"},
    {"softcap_negative", [](Variant& v) { v.softcap = -1.f; }, "variant.softcap"},
    {"softcap_nan", [](Variant& v) { v.softcap = std::nanf(""); }, "variant.softcap"},
    {"softcap_inf", [](Variant& v) { v.softcap = kInf; }, "variant.softcap"},
    {"sinks_null", [](Variant& v) { v.use_sinks = true; }, "variant.sinks must not be null"},
    {"sinks_without_flag", [](Variant& v) { v.sinks = g_heads; }, "variant.sinks is given"},
    {"alibi_null", [](Variant& v) { v.use_alibi = true; }, "variant.alibi_slopes must not be null"},
    {"alibi_without_flag", [](Variant& v) { v.alibi_slopes = g_heads; }, "variant.alibi_slopes is given"},
    {"alibi_misaligned", [](Variant& v) { v.use_alibi = true; v.alibi_slopes = reinterpret_cast<const float*>(g_fake + 2); },
     "4-byte aligned"},
};

class VariantBadInput : public ::testing::TestWithParam<BadVariant> {};

TEST_P(VariantBadInput, PrefillPlanAndRunRefuseIt) {
  PrefillParams p = good_prefill();
  GetParam().mutate(p.variant);
  PrefillPlan plan;
  const Status s = plan_prefill(p, presets::h200, {}, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find(GetParam().says), std::string::npos) << s.message();
  const Status r = prefill(p);  // refused before the device is looked at (no_device here otherwise)
  EXPECT_EQ(r.code(), StatusCode::invalid_argument) << r.message();
  EXPECT_NE(r.message().find(GetParam().says), std::string::npos) << r.message();
}

TEST_P(VariantBadInput, DecodePlanRefusesIt) {
  DecodeParams p = good_decode(4, 2, 32);
  GetParam().mutate(p.variant);
  DecodePlan plan;
  const Status s = plan_decode(p, presets::h200, {}, &plan);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find(GetParam().says), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Variants, VariantBadInput, ::testing::ValuesIn(kBadVariants),
                         [](const ::testing::TestParamInfo<BadVariant>& i) { return std::string(i.param.name); });

// The C ABI: the same checks through muh_variant, an error code and muh_last_error() naming the
// field; MUH_VARIANT_NONE is no variant.
TEST(VariantCAbi, BadVariantIsAnInvalidArgumentNamingTheField) {
  const PrefillParams g = good_prefill();
  auto call = [&](const muh_variant* v) {
    return muh_prefill_variant(static_cast<int>(g.dtype), g.q, g.k, g.v, g.out, nullptr, g.cu_seqlens_q,
                               g.cu_seqlens_k, g.batch, g.total_q, g.total_k, g.max_seqlen_q, g.max_seqlen_k,
                               g.num_q_heads, g.num_kv_heads, g.head_dim, 0.f, 1, nullptr, 0, -1, nullptr, v);
  };
  muh_variant v = MUH_VARIANT_NONE;
  v.window_left = -3;
  EXPECT_EQ(call(&v), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("variant.window_left is -3"), std::string::npos) << muh_last_error();
  v = MUH_VARIANT_NONE;
  v.softcap = std::nanf("");
  EXPECT_EQ(call(&v), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("variant.softcap"), std::string::npos) << muh_last_error();
  v = MUH_VARIANT_NONE;
  v.use_sinks = 1;
  EXPECT_EQ(call(&v), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("variant.sinks must not be null"), std::string::npos)
      << muh_last_error();
  // A good variant (and none) gets past every input check: without a GPU the call ends at the device.
  v = MUH_VARIANT_NONE;
  v.window_left = 4;
  const int rc = call(&v);
  if (is_general_instance(g.dtype, g.head_dim)) {
    EXPECT_TRUE(rc == MUH_NO_DEVICE || rc == MUH_OK || rc == MUH_CUDA_ERROR) << muh_last_error();
    EXPECT_EQ(std::string(muh_last_error()).find("variant"), std::string::npos) << muh_last_error();
  } else {  // a build without the general kind for this instance says so
    EXPECT_EQ(rc, MUH_NOT_COMPILED) << muh_last_error();
    EXPECT_NE(std::string(muh_last_error()).find("general variant kind is not compiled"), std::string::npos);
  }
  const muh::Variant none = capi_none();
  EXPECT_EQ(variant_kind(none), VariantKind::plain);
}

// The decode plan with a variant: the row of the same call without one (both decode agents have
// the hooks), and with a window the split count of a call of the window's length — the
// partitions are cut from the window's first key (kernels/decode_variant.cuh), so a 4k window at
// a 128k context is planned as a 4k decode.
TEST(VariantDecodePlan, TakesThePlainRowAndPlansTheWindowsLength) {
  DecodeParams p;
  p.num_seqs = 1;
  p.num_q_heads = 32;
  p.num_kv_heads = 8;
  p.page_size = 16;
  p.num_pages = 8192;
  p.max_blocks_per_seq = 8192;
  p.max_seq_len = 131072;
  bool any = false;
  for (const auto& [t, d] : kCompiledInstances) {
    if (!is_general_instance(t, d)) continue;
    any = true;
    p.dtype = t;
    p.head_dim = d;
    for (const HardwareCapability* hw : {&presets::h200, &presets::a100, &presets::t4}) {
      p.variant = Variant{};
      p.max_seq_len = 131072;
      DecodePlan plain, capped, windowed, short_plain;
      ASSERT_TRUE(plan_decode(p, *hw, {}, &plain).ok());
      p.variant.softcap = 30.f;
      ASSERT_TRUE(plan_decode(p, *hw, {}, &capped).ok());
      EXPECT_EQ(capped.variant, VariantKind::general);
      EXPECT_EQ(capped.target, plain.target) << hw->name;
      EXPECT_EQ(capped.policy.agent, plain.policy.agent) << hw->name;
      EXPECT_EQ(capped.num_splits, plain.num_splits) << hw->name;
      p.variant = Variant{};
      p.variant.window_left = 4095;
      ASSERT_TRUE(plan_decode(p, *hw, {}, &windowed).ok());
      p.variant = Variant{};
      p.max_seq_len = 4096 + 15;
      ASSERT_TRUE(plan_decode(p, *hw, {}, &short_plain).ok());
      EXPECT_EQ(windowed.num_splits, short_plain.num_splits) << hw->name;
      EXPECT_EQ(windowed.partition_tokens, short_plain.partition_tokens) << hw->name;
      EXPECT_LE(windowed.partition_tokens * 8, plain.partition_tokens) << hw->name;  // (the context's are ≥ 8× longer)
      EXPECT_GE(static_cast<long long>(windowed.num_splits) * windowed.partition_tokens, 4096 + 15) << hw->name;
    }
  }
  if (!any) {  // a build without the general kind refuses the call instead
    p.dtype = kCompiledInstances[0].dtype;
    p.head_dim = kCompiledInstances[0].head_dim;
    p.variant.window_left = 4095;
    DecodePlan plan;
    EXPECT_EQ(plan_decode(p, presets::h200, {}, &plan).code(), StatusCode::not_compiled);
  }
}

TEST(VariantCAbi, DecodeBadVariantIsAnInvalidArgumentNamingTheField) {
  muh_variant v = MUH_VARIANT_NONE;
  v.use_alibi = 1;  // no slopes
  const int rc = muh_paged_decode_variant(static_cast<int>(kCompiledInstances[0].dtype), MUH_KV_NHD, g_fake, g_fake,
                                          g_fake, g_fake + 64, nullptr, reinterpret_cast<const int*>(g_fake + 128),
                                          reinterpret_cast<const int*>(g_fake + 192), 2, 8, 2,
                                          kCompiledInstances[0].head_dim, 16, 4, 2, 32, 0.f, nullptr, 0, -1, 0, 0,
                                          nullptr, &v);
  EXPECT_EQ(rc, MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("variant.alibi_slopes must not be null"), std::string::npos)
      << muh_last_error();
}

// ---- The plan: which kind, and no tail split for the general kind -----------------------------
TEST(VariantPlan, PlanRecordsTheKindAndTheGeneralKindIsNeverSplit) {
  PrefillParams p = good_prefill();
  p.causal = false;
  p.batch = 1;
  p.total_q = p.total_k = p.max_seqlen_q = p.max_seqlen_k = 4096;
  PrefillPlan plain, general;
  // sm_90's row (the sm80-class agent splits; sm_90a's Hopper agent runs whole tiles only)
  ASSERT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{90, 3}, &plain).ok());
  EXPECT_EQ(plain.variant, VariantKind::plain);
  EXPECT_TRUE(plain.split.split()) << "the forced tail split applies to the plain kind";
  p.variant.softcap = 30.f;
  ASSERT_TRUE(plan_prefill(p, presets::h200, PrefillPlanOptions{90, 3}, &general).ok());
  EXPECT_EQ(general.variant, VariantKind::general);
  EXPECT_FALSE(general.split.split());
  EXPECT_EQ(general.workspace_bytes, 0u);
}

// The Hopper agent (sm_90a) has no variant hooks: a call with a variant walks on to sm_90's row,
// the trace saying why; forced onto sm_90a it has no row.
TEST(VariantPlan, TheHopperAgentPassesVariantsToSm90) {
  ASSERT_TRUE(is_compiled_target(kTargetSm90a) && is_compiled_target(90)) << "needs targets 90, 90a";
  PrefillParams p = good_prefill();
  p.variant.softcap = 30.f;
  PrefillPlan plan;
  ASSERT_TRUE(plan_prefill(p, presets::h200, {}, &plan).ok());
  EXPECT_EQ(plan.target, 90);
  EXPECT_EQ(plan.policy.agent, Agent::sm80);
  if (prefill_policy(kTargetSm90a, p.dtype, p.head_dim).agent == Agent::sm90) {
    ASSERT_GE(plan.selection.passed_count, 1);
    EXPECT_EQ(plan.selection.passed[0].target, kTargetSm90a);
    EXPECT_EQ(plan.selection.passed[0].why, Pass::variant);
    EXPECT_EQ(plan_prefill(p, presets::h200, PrefillPlanOptions{kTargetSm90a}, &plan).code(), StatusCode::unsupported);
  }
}

// Decode: a call with a variant takes the row of the same call without one (both agents have the
// hooks), forced targets included. (A plan check: it needs no GPU.)
TEST(DecodeVariantPlan, GeneralKindTakesThePlainKindsRow) {
  DecodeParams p = good_decode(8, 4, 64);
  for (int target : {-1, 0, 90}) {
    if (target > 0 && !is_compiled_target(target)) continue;
    DecodePlan plain, general;
    p.variant = Variant{};
    ASSERT_TRUE(plan_decode(p, presets::h200, PlanOptions{target}, &plain).ok()) << target;
    p.variant.softcap = 30.f;
    ASSERT_TRUE(plan_decode(p, presets::h200, PlanOptions{target}, &general).ok()) << target;
    EXPECT_EQ(plain.variant, VariantKind::plain);
    EXPECT_EQ(general.variant, VariantKind::general);
    EXPECT_EQ(general.target, plain.target) << target;
    EXPECT_EQ(general.policy.agent, plain.policy.agent) << target;
    EXPECT_EQ(general.num_splits, plain.num_splits) << target;
  }
}

TEST(VariantPlan, ARunRefusesAPlanOfTheOtherKind) {
  PrefillParams p = good_prefill();
  PrefillPlan plan;
  ASSERT_TRUE(plan_prefill(p, presets::h200, {}, &plan).ok());
  p.variant.window_left = 3;
  const Status s = prefill(p, plan, nullptr, 0);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("re-plan"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("plain"), std::string::npos) << s.message();
}

TEST(VariantKindOf, AnyVariantOnIsGeneral) {
  Variant v;
  EXPECT_EQ(variant_kind(v), VariantKind::plain);
  EXPECT_EQ(describe_variant(v), "none");
  v.window_left = 0;
  EXPECT_EQ(variant_kind(v), VariantKind::general);
  v = Variant{};
  v.window_right = 0;
  EXPECT_EQ(variant_kind(v), VariantKind::general);
  v = Variant{};
  v.softcap = 1.f;
  EXPECT_EQ(variant_kind(v), VariantKind::general);
  v = Variant{};
  v.use_sinks = true;
  EXPECT_EQ(variant_kind(v), VariantKind::general);
  v = Variant{};
  v.use_alibi = true;
  EXPECT_EQ(variant_kind(v), VariantKind::general);
}

}  // namespace
}  // namespace muh
