// merge_attn_states (kernels/merge_states.hpp, the row math the kernel runs; src/merge_states.cu,
// the host checks): the weights against fp64, vLLM's conventions on ±inf lse, the merge of two
// split partials against attention over all keys, the same bits as online_softmax.hpp's merge(),
// and every bad input refused with a Status before any CUDA call. The kernel itself runs in
// tests/gpu/test_cache_ops.cu against this same math.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "muh/kernels/merge_states.hpp"
#include "muh/kernels/online_softmax.hpp"
#include "muh/merge_states.hpp"
#include "muh/muh.h"

namespace muh {
namespace {

using kernels::merge_states::merged;
using kernels::merge_states::row_weights;

constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- The row math ----------------------------------------------------------------------------

TEST(MergeStatesMath, WeightsMatchDouble) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-30.f, 30.f);
  for (int i = 0; i < 1000; ++i) {
    const float a = u(rng), b = (i % 10 == 0) ? a : u(rng);  // equal lse too
    const MergeWeights w = row_weights(a, b);
    const double m = std::max(double(a), double(b));
    const double ea = std::exp(a - m), eb = std::exp(b - m);
    EXPECT_NEAR(w.a, ea / (ea + eb), 1e-6) << a << " " << b;
    EXPECT_NEAR(w.b, eb / (ea + eb), 1e-6) << a << " " << b;
    EXPECT_NEAR(w.lse, m + std::log(ea + eb), 1e-5 * std::max(1.0, std::fabs(m))) << a << " " << b;
  }
}

TEST(MergeStatesMath, FarApartLseGivesTheLargerPartial) {
  const MergeWeights w = row_weights(100.f, -100.f);
  EXPECT_EQ(w.a, 1.f);
  EXPECT_EQ(w.b, 0.f);
  EXPECT_EQ(w.lse, 100.f);
  EXPECT_EQ(merged(0.25f, kInf, w), 0.25f) << "a zero weight contributes 0, not 0 * inf";
}

TEST(MergeStatesMath, OneEmptyPartialIsTheOther) {
  for (float empty : {-kInf, kInf}) {  // FA3's and FA2's "no keys"
    const MergeWeights ws = row_weights(empty, 1.5f);
    EXPECT_EQ(ws.a, 0.f);
    EXPECT_EQ(ws.b, 1.f);
    EXPECT_EQ(ws.lse, 1.5f);
    EXPECT_EQ(merged(std::nanf(""), 0.75f, ws), 0.75f) << "the empty side's output is not read";
    const MergeWeights wp = row_weights(-2.f, empty);
    EXPECT_EQ(wp.a, 1.f);
    EXPECT_EQ(wp.b, 0.f);
    EXPECT_EQ(wp.lse, -2.f);
    EXPECT_EQ(merged(0.5f, std::nanf(""), wp), 0.5f);
  }
}

// vLLM (csrc/attention/merge_attn_states.cu): both empty → prefix_output copied, lse −inf.
TEST(MergeStatesMath, BothEmptyCopiesThePrefix) {
  for (float p : {-kInf, kInf})
    for (float s : {-kInf, kInf}) {
      const MergeWeights w = row_weights(p, s);
      EXPECT_EQ(w.a, 1.f);
      EXPECT_EQ(w.b, 0.f);
      EXPECT_EQ(w.lse, -kInf) << p << " " << s;
      EXPECT_EQ(merged(0.3f, std::nanf(""), w), 0.3f);
      EXPECT_EQ(merged(0.f, 1.f, w), 0.f) << "muh's empty partials are 0: the merge stays 0";
    }
}

TEST(MergeStatesMath, NanLsePropagates) {
  const MergeWeights w = row_weights(std::nanf(""), 1.f);
  EXPECT_TRUE(std::isnan(w.lse) || std::isnan(merged(1.f, 1.f, w))) << "a NaN lse must not vanish silently";
}

// The kernel's weights are merge()'s: the same bits on every element.
TEST(MergeStatesMath, SameBitsAsOnlineSoftmaxMerge) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-8.f, 8.f);
  for (int i = 0; i < 200; ++i) {
    float lse_a = u(rng);
    const float lse_b = (i % 7 == 0) ? -kInf : u(rng);
    std::vector<float> oa(16), ob(16);
    for (auto& x : oa) x = u(rng);
    for (auto& x : ob) x = u(rng);
    const MergeWeights w = row_weights(lse_a, lse_b);
    std::vector<float> mine(16);
    for (int d = 0; d < 16; ++d) mine[d] = merged(oa[d], ob[d], w);
    merge(oa.data(), lse_a, ob.data(), lse_b, 16);
    EXPECT_EQ(std::memcmp(mine.data(), oa.data(), sizeof(float) * 16), 0) << i;
    EXPECT_EQ(std::memcmp(&w.lse, &lse_a, sizeof(float)), 0) << i;
  }
}

// Attention over keys [0, n) split at k: merging the prefix [0, k) and suffix [k, n) partials
// gives attention over all keys (fp64 truth, fp32 partials).
TEST(MergeStatesMath, SplitAttentionMergesToTheWhole) {
  constexpr int kD = 8;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (int n : {1, 2, 7, 33}) {
    for (int k = 0; k <= n; ++k) {
      std::vector<float> s(n), v(std::size_t(n) * kD);
      for (auto& x : s) x = u(rng);
      for (auto& x : v) x = u(rng);
      auto partial = [&](int b, int e, std::vector<float>& o) {
        double m = -INFINITY, den = 0;
        for (int j = b; j < e; ++j) m = std::max(m, double(s[j]));
        std::vector<double> acc(kD, 0.0);
        for (int j = b; j < e; ++j) {
          const double p = std::exp(s[j] - m);
          den += p;
          for (int d = 0; d < kD; ++d) acc[d] += p * v[std::size_t(j) * kD + d];
        }
        o.assign(kD, 0.f);
        if (den == 0) return -kInf;
        for (int d = 0; d < kD; ++d) o[d] = float(acc[d] / den);
        return float(m + std::log(den));
      };
      std::vector<float> op, os, ow;
      const float lp = partial(0, k, op), ls = partial(k, n, os), lw = partial(0, n, ow);
      const MergeWeights w = row_weights(lp, ls);
      EXPECT_NEAR(w.lse, lw, 1e-5) << n << " " << k;
      for (int d = 0; d < kD; ++d) EXPECT_NEAR(merged(op[d], os[d], w), ow[d], 2e-6) << n << " " << k << " " << d;
    }
  }
}

// ---- Bad input: a Status naming the problem, before any CUDA call ---------------------------

alignas(256) unsigned char g_fake[1 << 16];

// 3 tokens × 4 heads × 64 dims of fp16 (1536 B each), packed.
MergeStatesParams good() {
  MergeStatesParams p;
  p.dtype = DType::fp16;
  p.num_tokens = 3;
  p.num_heads = 4;
  p.head_dim = 64;
  p.output = g_fake;
  p.prefix_output = g_fake + 4096;
  p.suffix_output = g_fake + 8192;
  p.prefix_lse = reinterpret_cast<const float*>(g_fake + 12288);
  p.suffix_lse = reinterpret_cast<const float*>(g_fake + 12544);
  p.output_lse = reinterpret_cast<float*>(g_fake + 12800);
  return p;
}

struct BadMerge {
  const char* name;
  void (*mutate)(MergeStatesParams&);
  const char* says;
};

const BadMerge kBadMerge[] = {
    {"dtype_9", [](MergeStatesParams& p) { p.dtype = static_cast<DType>(9); }, "dtype"},
    {"num_tokens_negative", [](MergeStatesParams& p) { p.num_tokens = -1; }, "num_tokens"},
    {"num_heads_0", [](MergeStatesParams& p) { p.num_heads = 0; }, "num_heads"},
    {"head_dim_0", [](MergeStatesParams& p) { p.head_dim = 0; }, "head_dim"},
    {"output_stride_short", [](MergeStatesParams& p) { p.output_token_stride = 255; }, "output_token_stride"},
    {"prefix_stride_negative", [](MergeStatesParams& p) { p.prefix_token_stride = -256; }, "prefix_token_stride"},
    {"output_null", [](MergeStatesParams& p) { p.output = nullptr; }, "output is null"},
    {"prefix_output_null", [](MergeStatesParams& p) { p.prefix_output = nullptr; }, "prefix_output is null"},
    {"suffix_output_null", [](MergeStatesParams& p) { p.suffix_output = nullptr; }, "suffix_output is null"},
    {"prefix_lse_null", [](MergeStatesParams& p) { p.prefix_lse = nullptr; }, "prefix_lse is null"},
    {"suffix_lse_null", [](MergeStatesParams& p) { p.suffix_lse = nullptr; }, "suffix_lse is null"},
    {"output_misaligned", [](MergeStatesParams& p) { p.output = g_fake + 1; }, "aligned"},
    {"lse_misaligned", [](MergeStatesParams& p) { p.prefix_lse = reinterpret_cast<const float*>(g_fake + 12290); }, "aligned"},
    {"output_lse_misaligned", [](MergeStatesParams& p) { p.output_lse = reinterpret_cast<float*>(g_fake + 12802); }, "aligned"},
    {"output_overlaps_prefix", [](MergeStatesParams& p) { p.output = g_fake + 4096 + 128; }, "overlaps prefix_output"},
    {"output_in_place_other_stride",
     [](MergeStatesParams& p) {
       p.output = const_cast<void*>(p.suffix_output);
       p.output_token_stride = 512;  // suffix_output's is 256: not in place
     },
     "overlaps suffix_output"},
    {"output_lse_is_prefix_lse", [](MergeStatesParams& p) { p.output_lse = const_cast<float*>(p.prefix_lse); }, "output_lse overlaps"},
    {"output_lse_inside_suffix_lse",
     [](MergeStatesParams& p) { p.output_lse = const_cast<float*>(p.suffix_lse) + 4; }, "output_lse overlaps"},
};

void PrintTo(const BadMerge& c, std::ostream* os) { *os << c.name; }

class MergeStatesBadInput : public ::testing::TestWithParam<BadMerge> {};

TEST_P(MergeStatesBadInput, RefusedWithAClearStatus) {
  const BadMerge& c = GetParam();
  MergeStatesParams p = good();
  c.mutate(p);
  for (const Status& s : {check_merge_states(p), merge_attn_states(p)}) {
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << c.name << ": " << s.message();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.name << ": '" << s.message() << "' lacks '" << c.says << "'";
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
  }
}

INSTANTIATE_TEST_SUITE_P(Merge, MergeStatesBadInput, ::testing::ValuesIn(kBadMerge),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(MergeStatesInput, GoodParamsPassTheHostChecks) {
  EXPECT_TRUE(check_merge_states(good()).ok()) << check_merge_states(good()).message();
  MergeStatesParams p = good();
  p.output = const_cast<void*>(p.prefix_output);  // in place
  p.output_lse = nullptr;
  p.prefix_token_stride = p.output_token_stride = 512;  // strided rows, 3 tokens in 3 KB
  p.suffix_output = g_fake + 16384;
  EXPECT_TRUE(check_merge_states(p).ok()) << check_merge_states(p).message();
}

TEST(MergeStatesInput, ZeroTokensIsANoOpWithoutPointers) {
  MergeStatesParams p;
  p.dtype = DType::bf16;
  p.num_heads = 8;
  p.head_dim = 128;
  const Status s = merge_attn_states(p);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(MergeStatesCApi, DtypeOutOfRangeDoesNotWrap) {
  const MergeStatesParams p = good();
  EXPECT_EQ(muh_merge_attn_states(256, p.output, p.output_lse, p.prefix_output, p.prefix_lse, p.suffix_output,
                                  p.suffix_lse, p.num_tokens, p.num_heads, p.head_dim, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("dtype"), std::string::npos) << muh_last_error();
}

TEST(MergeStatesCApi, ShapeAndPointerErrors) {
  const MergeStatesParams p = good();
  EXPECT_EQ(muh_merge_attn_states(MUH_FP16, p.output, p.output_lse, p.prefix_output, p.prefix_lse, p.suffix_output,
                                  p.suffix_lse, p.num_tokens, 0, p.head_dim, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("num_heads"), std::string::npos) << muh_last_error();
  EXPECT_EQ(muh_merge_attn_states(MUH_FP16, p.output, p.output_lse, p.prefix_output, nullptr, p.suffix_output,
                                  p.suffix_lse, p.num_tokens, p.num_heads, p.head_dim, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("prefix_lse is null"), std::string::npos) << muh_last_error();
}

}  // namespace
}  // namespace muh
