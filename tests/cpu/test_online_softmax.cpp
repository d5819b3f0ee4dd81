// The split-KV math (kernels/online_softmax.hpp): a sequence split into any number of partitions
// — empty ones, fully masked ones, one key each — whose (o, lse) partials are merged in any order
// gives the unsplit result. The partials are computed the way a kernel computes them (the
// SoftmaxRunning loop, float), the truth in double. Then the steps the kernels take on the same
// state: tiles, two-pass merges, log2 and scaled units, views of a kernel's arrays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "muh/kernels/online_softmax.hpp"

namespace muh {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kDim = 8;

struct Partial {
  std::vector<float> o = std::vector<float>(kDim, 0.f);
  float lse = -kInf;
};

// One partition as a kernel computes it: running max/denominator, o rescaled as keys arrive.
Partial partial_over(const std::vector<float>& s, const std::vector<float>& v, int begin, int end) {
  SoftmaxRunning run;
  std::vector<float> acc(kDim, 0.f);
  for (int j = begin; j < end; ++j) {
    float p = 0.f;
    const float rescale = run.add(s[j], p);
    for (int d = 0; d < kDim; ++d) acc[d] = acc[d] * rescale + p * v[std::size_t(j) * kDim + d];
  }
  Partial out;
  const float inv = run.inv_l();
  for (int d = 0; d < kDim; ++d) out.o[d] = acc[d] * inv;
  out.lse = run.lse();
  return out;
}

// The truth over all keys, in double: o = Σ softmax(s)_j v_j, lse = log Σ exp(s_j).
Partial truth(const std::vector<float>& s, const std::vector<float>& v) {
  double m = -INFINITY;
  for (float x : s) m = std::max(m, double(x));
  Partial out;
  if (m == -INFINITY) return out;
  double den = 0;
  std::vector<double> o(kDim, 0.0);
  for (std::size_t j = 0; j < s.size(); ++j) {
    const double p = std::exp(double(s[j]) - m);
    den += p;
    for (int d = 0; d < kDim; ++d) o[d] += p * v[j * kDim + d];
  }
  for (int d = 0; d < kDim; ++d) out.o[d] = float(o[d] / den);
  out.lse = float(m + std::log(den));
  return out;
}

enum class Mask { none, every_third, first_part, all };
enum class Order { forward, reverse, shuffled, tree };

struct SplitCase {
  const char* name;
  std::vector<int> parts;  // partition lengths, in key order (0 = empty partition)
  Mask mask = Mask::none;
  Order order = Order::forward;
  float score_scale = 1.f;  // scores drawn from [-scale, scale]
};

std::vector<int> uniform_parts(int n, int size) {
  std::vector<int> p;
  for (int left = n; left > 0; left -= size) p.push_back(std::min(size, left));
  return p;
}

const SplitCase kCases[] = {
    {"one_partition", {64}},
    {"two_equal", {32, 32}},
    {"uneven", {1, 7, 100, 13}},
    {"one_key_each", std::vector<int>(64, 1)},
    {"empty_partitions_between", {0, 50, 0, 14, 0}},
    {"all_empty_but_one", {0, 0, 37, 0}},
    {"merge_reverse_order", {10, 20, 30}, Mask::none, Order::reverse},
    {"merge_shuffled_order", {5, 9, 13, 17, 21, 0, 3}, Mask::none, Order::shuffled},
    {"merge_as_tree", {16, 16, 16, 16, 16, 16, 16, 9}, Mask::none, Order::tree},
    {"masked_keys", {20, 20, 20}, Mask::every_third},
    {"fully_masked_partition", {16, 16, 16}, Mask::first_part, Order::shuffled},
    {"everything_masked", {8, 8}, Mask::all},
    {"large_scores", {40, 40, 48}, Mask::none, Order::reverse, 80.f},
    {"context_100k_in_512_partitions", uniform_parts(100000, 512), Mask::none, Order::tree},
};

class SplitMerge : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitMerge, MergedEqualsUnsplit) {
  const SplitCase& c = GetParam();
  const int n = std::accumulate(c.parts.begin(), c.parts.end(), 0);
  std::mt19937 rng(1234 + n);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> s(n), v(std::size_t(n) * kDim);
  for (auto& x : s) x = u(rng) * c.score_scale;
  for (auto& x : v) x = u(rng);
  for (int j = 0; j < n; ++j) {
    if (c.mask == Mask::all || (c.mask == Mask::every_third && j % 3 == 0) ||
        (c.mask == Mask::first_part && j < c.parts[0]))
      s[j] = -kInf;
  }

  std::vector<Partial> partials;
  for (std::size_t p = 0, begin = 0; p < c.parts.size(); begin += c.parts[p], ++p)
    partials.push_back(partial_over(s, v, int(begin), int(begin) + c.parts[p]));

  std::vector<std::size_t> idx(partials.size());
  std::iota(idx.begin(), idx.end(), 0);
  if (c.order == Order::reverse) std::reverse(idx.begin(), idx.end());
  if (c.order == Order::shuffled) std::shuffle(idx.begin(), idx.end(), rng);

  Partial merged;
  if (c.order == Order::tree) {
    // Pairwise rounds, as a parallel merge kernel would: (0,1) (2,3) ... then again.
    std::vector<Partial> level = partials;
    while (level.size() > 1) {
      std::vector<Partial> next;
      for (std::size_t i = 0; i + 1 < level.size(); i += 2) {
        Partial a = level[i];
        merge(a.o.data(), a.lse, level[i + 1].o.data(), level[i + 1].lse, kDim);
        next.push_back(a);
      }
      if (level.size() % 2) next.push_back(level.back());
      level.swap(next);
    }
    merged = level[0];
  } else {
    for (std::size_t i : idx) merge(merged.o.data(), merged.lse, partials[i].o.data(), partials[i].lse, kDim);
  }

  const Partial want = truth(s, v);
  if (c.mask == Mask::all) {
    EXPECT_EQ(merged.lse, -kInf);
    for (int d = 0; d < kDim; ++d) EXPECT_EQ(merged.o[d], 0.f) << "d " << d;
    return;
  }
  // Float partials of ≤ 100 000 keys: ~1e-6 relative per step, a few hundred merge steps.
  for (int d = 0; d < kDim; ++d) EXPECT_NEAR(merged.o[d], want.o[d], 2e-5) << "d " << d;
  EXPECT_NEAR(merged.lse, want.lse, 2e-5 * std::max(1.f, std::fabs(want.lse)));
  EXPECT_TRUE(std::isfinite(merged.lse));
  // The unsplit float computation agrees too (the kernels' V1 path).
  const Partial whole = partial_over(s, v, 0, n);
  for (int d = 0; d < kDim; ++d) EXPECT_NEAR(merged.o[d], whole.o[d], 2e-5) << "d " << d;
}

INSTANTIATE_TEST_SUITE_P(Partitions, SplitMerge, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- merge() identities -----------------------------------------------------------------------

Partial some_partial(float lse, float base) {
  Partial p;
  for (int d = 0; d < kDim; ++d) p.o[d] = base + 0.1f * d;
  p.lse = lse;
  return p;
}

TEST(Merge, EmptyIsRightIdentity) {
  Partial a = some_partial(1.5f, 0.3f);
  const Partial a0 = a, empty;
  merge(a.o.data(), a.lse, empty.o.data(), empty.lse, kDim);
  EXPECT_FLOAT_EQ(a.lse, a0.lse);
  for (int d = 0; d < kDim; ++d) EXPECT_FLOAT_EQ(a.o[d], a0.o[d]);
}

TEST(Merge, EmptyIsLeftIdentityEvenWithGarbageO) {
  // An empty partial's o is never read: a kernel may leave it unwritten (NaN here).
  Partial acc;
  for (auto& x : acc.o) x = std::numeric_limits<float>::quiet_NaN();
  const Partial b = some_partial(-3.f, -0.7f);
  merge(acc.o.data(), acc.lse, b.o.data(), b.lse, kDim);
  EXPECT_FLOAT_EQ(acc.lse, b.lse);
  for (int d = 0; d < kDim; ++d) EXPECT_FLOAT_EQ(acc.o[d], b.o[d]);
}

TEST(Merge, TwoEmptiesStayEmpty) {
  Partial a, b;
  merge(a.o.data(), a.lse, b.o.data(), b.lse, kDim);
  EXPECT_EQ(a.lse, -kInf);
  for (int d = 0; d < kDim; ++d) EXPECT_EQ(a.o[d], 0.f);
}

TEST(Merge, Commutative) {
  Partial ab = some_partial(2.f, 0.5f), ba = some_partial(-1.f, -0.25f);
  const Partial a = ab, b = ba;
  merge(ab.o.data(), ab.lse, b.o.data(), b.lse, kDim);
  merge(ba.o.data(), ba.lse, a.o.data(), a.lse, kDim);
  EXPECT_NEAR(ab.lse, ba.lse, 1e-6);
  for (int d = 0; d < kDim; ++d) EXPECT_NEAR(ab.o[d], ba.o[d], 1e-6);
}

TEST(Merge, EqualLseAverages) {
  // Two halves with the same mass: o is their mean, lse grows by log 2.
  Partial a = some_partial(0.75f, 1.f);
  const Partial b = some_partial(0.75f, -1.f);
  merge(a.o.data(), a.lse, b.o.data(), b.lse, kDim);
  EXPECT_NEAR(a.lse, 0.75f + std::log(2.f), 1e-6);
  for (int d = 0; d < kDim; ++d) EXPECT_NEAR(a.o[d], 0.1f * d, 1e-6);
}

TEST(Merge, FarApartLseDoesNotOverflow) {
  // exp(200) overflows float: the merge must work relative to the larger lse.
  Partial a = some_partial(200.f, 1.f);
  const Partial b = some_partial(-200.f, -5.f);
  merge(a.o.data(), a.lse, b.o.data(), b.lse, kDim);
  EXPECT_FLOAT_EQ(a.lse, 200.f);
  for (int d = 0; d < kDim; ++d) EXPECT_FLOAT_EQ(a.o[d], 1.f + 0.1f * d);
}

TEST(SoftmaxRunning, MaskedScoresFirstThenFinite) {
  SoftmaxRunning r;
  float p = 1.f;
  EXPECT_EQ(r.add(-kInf, p), 1.f);
  EXPECT_EQ(p, 0.f);
  EXPECT_EQ(r.lse(), -kInf);
  EXPECT_EQ(r.inv_l(), 0.f);
  const float rescale = r.add(2.f, p);
  EXPECT_EQ(rescale, 0.f);  // exp(−inf − 2): nothing accumulated so far survives
  EXPECT_EQ(p, 1.f);
  EXPECT_FLOAT_EQ(r.lse(), 2.f);
}

TEST(LseMerger, IgnoresEmptyPartials) {
  LseMerger m;
  float w = 1.f;
  EXPECT_EQ(m.add(-kInf, w), 1.f);
  EXPECT_EQ(w, 0.f);
  EXPECT_EQ(m.lse(), -kInf);
  EXPECT_EQ(m.inv_l(), 0.f);
  m.add(1.f, w);
  m.add(-kInf, w);
  EXPECT_FLOAT_EQ(m.lse(), 1.f);
}

// ---- The kernels' steps: tiles, two passes, other units ----------------------------------------

// A row's scores in tiles of `tile`, as the attention kernels fold them: the tile's max, the
// state moved to it, the tile's weights summed. o_out = Σ softmax · v (one value per score).
template <class U>
float tiled_row(const std::vector<float>& x, const std::vector<float>& v, int tile, const U& u, float* o_out) {
  OnlineSoftmax st;
  float o = 0.f;
  for (std::size_t t0 = 0; t0 < x.size(); t0 += tile) {
    const std::size_t t1 = std::min(x.size(), t0 + tile);
    float mx = -kInf;
    for (std::size_t j = t0; j < t1; ++j) mx = std::max(mx, x[j]);
    const float m_new = st.max_with(mx);
    const float mu = u.stabiliser(m_new);
    const float f = st.factor(mu, u);
    st.m = m_new;
    float sum = 0.f, pv = 0.f;
    for (std::size_t j = t0; j < t1; ++j) {
      const float p = u.weight(x[j], mu);
      sum += p;
      pv += p * v[j];
    }
    st.accumulate(f, sum);
    o = o * f + pv;
  }
  *o_out = o * st.inv_l();
  return st.lse(u);
}

std::vector<float> uniform(int n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(n);
  for (auto& e : x) e = u(rng);
  return x;
}

TEST(OnlineSoftmax, TilesEqualOneValueAtATime) {
  std::vector<float> s = uniform(300, -6.f, 6.f, 7), v = uniform(300, -1.f, 1.f, 8);
  for (int j = 0; j < 300; j += 7) s[j] = -kInf;  // masked scores
  SoftmaxRunning run;
  float o = 0.f;
  for (int j = 0; j < 300; ++j) {
    float p = 0.f;
    const float f = run.add(s[j], p);
    o = o * f + p * v[j];
  }
  for (int tile : {2, 16, 64, 300}) {  // every tile holds a finite score (see NaturalUnits)
    float o_tiled = 0.f;
    const float lse = tiled_row(s, v, tile, NaturalUnits{}, &o_tiled);
    EXPECT_NEAR(lse, run.lse(), 1e-5) << "tile " << tile;
    EXPECT_NEAR(o_tiled, o * run.inv_l(), 1e-5) << "tile " << tile;
  }
}

TEST(OnlineSoftmax, Log2AndScaledUnitsGiveTheNaturalLse) {
  // The decode agents fold x = s·scale·log2(e) (Log2Units), the prefill agents raw s with the
  // scale folded into each exponent (ScaledUnits): both report the natural-log lse of s·scale.
  const float scale = 0.088f;  // 1/sqrt(128)
  const std::vector<float> s = uniform(200, -40.f, 40.f, 9), v = uniform(200, -1.f, 1.f, 10);
  std::vector<float> nat(s.size()), log2x(s.size());
  for (std::size_t j = 0; j < s.size(); ++j) {
    nat[j] = s[j] * scale;
    log2x[j] = s[j] * scale * kernels::kLog2e;
  }
  float o_nat = 0.f, o_log2 = 0.f, o_scaled = 0.f;
  const float lse_nat = tiled_row(nat, v, 16, NaturalUnits{}, &o_nat);
  const float lse_log2 = tiled_row(log2x, v, 16, Log2Units<>{}, &o_log2);
  const float lse_scaled = tiled_row(s, v, 16, ScaledUnits<>{scale * kernels::kLog2e, scale}, &o_scaled);
  EXPECT_NEAR(lse_log2, lse_nat, 1e-5);
  EXPECT_NEAR(lse_scaled, lse_nat, 1e-5);
  EXPECT_NEAR(o_log2, o_nat, 1e-5);
  EXPECT_NEAR(o_scaled, o_nat, 1e-5);
}

TEST(OnlineSoftmax, ScaledUnitsKeepAMaskedRowEmptyNotNan) {
  // A prefill row whose first tiles are all masked: m stays −inf, the stabiliser is 0, the
  // weights and the rescale factor 2^−inf = 0; the first real tile then rescales nothing.
  const ScaledUnits<> u{0.1f, 0.0693f};
  OnlineSoftmax st;
  const float m_new = st.max_with(-kInf);
  EXPECT_EQ(m_new, -kInf);
  const float mu = u.stabiliser(m_new);
  EXPECT_EQ(mu, 0.f);
  EXPECT_EQ(u.weight(-kInf, mu), 0.f);
  EXPECT_EQ(st.factor(mu, u), 0.f);
  st.accumulate(st.factor(mu, u), 0.f);
  EXPECT_EQ(st.l, 0.f);
  EXPECT_EQ(st.lse(u), -kInf);
  EXPECT_EQ(st.inv_l(), 0.f);
  const float f = st.rescale_to(st.max_with(3.f), u);
  EXPECT_EQ(f, 0.f);
  st.accumulate(f, u.weight(3.f, u.stabiliser(st.m)));
  EXPECT_FLOAT_EQ(st.l, 1.f);
  EXPECT_FLOAT_EQ(st.lse(u), 3.f * 0.0693f);
}

TEST(OnlineSoftmax, TwoPassMergeEqualsOneAtATime) {
  // The prefill tail merge and the decode agent's combine fold all maxima first, then the
  // weights; the decode merge folds one partial at a time: the same lse.
  std::vector<float> lse = uniform(40, -30.f, 30.f, 11);
  lse[3] = lse[17] = -kInf;  // empty partials
  OnlineSoftmax online, two_pass;
  float w = 0.f;
  for (float x : lse) online.add(x, w);
  for (float x : lse) two_pass.fold_max(x);
  for (float x : lse) two_pass.accumulate(two_pass.weight(x, NaturalUnits{}));
  EXPECT_FLOAT_EQ(two_pass.m, online.m);
  EXPECT_NEAR(two_pass.lse(), online.lse(), 1e-5);
  OnlineSoftmax empty;
  empty.fold_max(-kInf);
  EXPECT_EQ(empty.m, -kInf);
  EXPECT_EQ(empty.lse(), -kInf);
  EXPECT_EQ(empty.inv_l(), 0.f);
}

TEST(OnlineSoftmaxView, UpdatesTheArraysItViews) {
  // The MMA agents keep their rows' maxima and sums in arrays; a view applies the same steps.
  float m[2] = {-kInf, 1.f}, l[2] = {0.f, 2.f};
  OnlineSoftmaxView row{m[1], l[1]};
  const float f = row.rescale_to(row.max_with(3.f), Log2Units<>{});
  EXPECT_FLOAT_EQ(f, 0.25f);  // 2^(1 − 3)
  row.accumulate(f, 1.f);
  EXPECT_EQ(m[1], 3.f);
  EXPECT_FLOAT_EQ(l[1], 1.5f);
  EXPECT_EQ(m[0], -kInf);
  EXPECT_EQ(l[0], 0.f);
  EXPECT_FLOAT_EQ(row.lse(Log2Units<>{}), (3.f + std::log2(1.5f)) * kernels::kLn2);
}

}  // namespace
}  // namespace muh
