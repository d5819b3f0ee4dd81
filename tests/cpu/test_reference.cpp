// The CPU reference (reference.hpp) every kernel is checked against, checked itself:
//   * paged decode == dense attention over the same keys, for both KV layouts and several page
//     sizes — the paged cache is written here from the layouts' documented shapes, not with
//     paged_kv.hpp, so a wrong offset formula cannot hide behind itself;
//   * causal masks are bottom-right aligned, including q longer than k;
//   * sequence length 1, GQA head mapping, LSE, varlen batches, V2 partitions + merge.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "muh/kernels/online_softmax.hpp"
#include "muh/reference.hpp"
#include "random_inputs.hpp"

namespace muh {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

using cpu_test::random_vec;

float max_abs_diff(const float* a, const float* b, std::size_t n) {
  float m = 0.f;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// ---- Paged decode == dense --------------------------------------------------------------------

struct PagedCase {
  KVLayout layout;
  int page_size;
  int x;  // vLLM key packing (16 B / elem: 8 for 16-bit, 4 for fp32); unused for NHD
  int head_dim;
  int num_kv_heads;
  int group;  // query heads per KV head
  std::vector<int> seq_lens;
};

// Writes dense K/V [len, kv_heads, head_dim] of one sequence into its pages, with the index
// arithmetic of the documented shapes:
//   NHD:  [num_pages, page_size, num_kv_heads, head_dim]
//   vLLM: key [num_blocks, num_kv_heads, head_dim / x, block_size, x],
//         value [num_blocks, num_kv_heads, head_dim, block_size]
void write_pages(const PagedCase& c, const std::vector<float>& k, const std::vector<float>& v, int len,
                 const int* block_row, std::vector<float>& k_cache, std::vector<float>& v_cache) {
  const int P = c.page_size, H = c.num_kv_heads, D = c.head_dim, X = c.x;
  for (int t = 0; t < len; ++t)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < D; ++d) {
        const std::size_t src = (std::size_t(t) * H + h) * D + d;
        const std::size_t page = block_row[t / P], slot = t % P;
        std::size_t ki, vi;
        if (c.layout == KVLayout::nhd) {
          ki = vi = ((page * P + slot) * H + h) * D + d;
        } else {
          const std::size_t D_x = D / X;
          ki = (((page * H + h) * D_x + d / X) * P + slot) * X + d % X;
          vi = ((page * H + h) * D + d) * P + slot;
        }
        k_cache[ki] = k[src];
        v_cache[vi] = v[src];
      }
}

class PagedEqualsDense : public ::testing::TestWithParam<PagedCase> {};

TEST_P(PagedEqualsDense, SameOutAndLse) {
  const PagedCase& c = GetParam();
  const int hq = c.num_kv_heads * c.group, D = c.head_dim, H = c.num_kv_heads;
  const int num_seqs = int(c.seq_lens.size());
  int max_blocks = 1, total_pages = 0;
  for (int L : c.seq_lens) max_blocks = std::max(max_blocks, (L + c.page_size - 1) / c.page_size);
  total_pages = num_seqs * max_blocks + 3;  // a few pages nobody uses

  // Block table: a shuffled permutation of pages, so logical order != physical order.
  std::vector<int> pages(total_pages);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(7));
  std::vector<int> block_table(std::size_t(num_seqs) * max_blocks);
  for (std::size_t i = 0; i < block_table.size(); ++i) block_table[i] = pages[i];

  PagedKVShape kv;
  kv.layout = c.layout;
  kv.page_size = c.page_size;
  kv.num_kv_heads = H;
  kv.head_dim = D;
  kv.x = c.x;
  const std::size_t cache_elems = std::size_t(total_pages) * c.page_size * H * D;
  std::vector<float> k_cache(cache_elems, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> v_cache(cache_elems, std::numeric_limits<float>::quiet_NaN());
  std::vector<std::vector<float>> ks, vs;
  for (int s = 0; s < num_seqs; ++s) {
    const int L = c.seq_lens[s];
    ks.push_back(random_vec(std::size_t(L) * H * D, 100 + s));
    vs.push_back(random_vec(std::size_t(L) * H * D, 200 + s));
    write_pages(c, ks[s], vs[s], L, block_table.data() + std::size_t(s) * max_blocks, k_cache, v_cache);
  }
  const std::vector<float> q = random_vec(std::size_t(num_seqs) * hq * D, 300);
  const float scale = 1.f / std::sqrt(float(D));

  std::vector<float> out(q.size()), lse(std::size_t(num_seqs) * hq);
  ref::paged_decode(q.data(), k_cache.data(), v_cache.data(), kv, block_table.data(), max_blocks,
                    c.seq_lens.data(), num_seqs, hq, scale, out.data(), lse.data());

  for (int s = 0; s < num_seqs; ++s) {
    const int L = c.seq_lens[s];
    // Dense prefill of one query token over the same keys (causal bottom-right: it sees all).
    const int cu_q[2] = {0, 1}, cu_k[2] = {0, L};
    std::vector<float> d_out(std::size_t(hq) * D), d_lse(hq);
    ref::prefill(q.data() + std::size_t(s) * hq * D, ks[s].data(), vs[s].data(), cu_q, cu_k, 1, hq, H, D, scale,
                 /*causal=*/true, d_out.data(), d_lse.data());
    EXPECT_LE(max_abs_diff(out.data() + std::size_t(s) * hq * D, d_out.data(), d_out.size()), 1e-6f) << "seq " << s;
    for (int h = 0; h < hq; ++h) EXPECT_NEAR(lse[std::size_t(s) * hq + h], d_lse[h], 1e-5f) << "seq " << s << " head " << h;

    // gather_kv() returns exactly the dense K/V written.
    std::vector<float> gk(std::size_t(L) * H * D), gv(gk.size());
    ref::gather_kv(k_cache.data(), v_cache.data(), kv, block_table.data() + std::size_t(s) * max_blocks, L,
                   gk.data(), gv.data());
    EXPECT_EQ(gk, ks[s]) << "seq " << s;
    EXPECT_EQ(gv, vs[s]) << "seq " << s;
  }
}

const PagedCase kPagedCases[] = {
    {KVLayout::nhd, 16, 8, 128, 4, 4, {1, 17, 64, 300}},
    {KVLayout::nhd, 1, 8, 64, 2, 1, {1, 5, 33}},
    {KVLayout::nhd, 8, 8, 96, 1, 8, {8, 9, 250}},
    {KVLayout::nhd, 32, 8, 256, 4, 4, {31, 32, 33, 513}},
    {KVLayout::vllm, 16, 8, 128, 4, 4, {1, 17, 64, 300}},
    {KVLayout::vllm, 1, 8, 64, 2, 1, {1, 5, 33}},
    {KVLayout::vllm, 8, 4, 96, 1, 8, {8, 9, 250}},  // x = 4: fp32 packing
    {KVLayout::vllm, 32, 8, 256, 4, 4, {31, 32, 33, 513}},
    {KVLayout::vllm, 16, 4, 128, 8, 2, {100, 1, 2}},
};

INSTANTIATE_TEST_SUITE_P(Layouts, PagedEqualsDense, ::testing::ValuesIn(kPagedCases), [](const auto& info) {
  const PagedCase& c = info.param;
  return std::string(c.layout == KVLayout::nhd ? "nhd" : "vllm") + "_page" + std::to_string(c.page_size) + "_x" +
         std::to_string(c.x) + "_hd" + std::to_string(c.head_dim) + "_kv" + std::to_string(c.num_kv_heads) + "_g" +
         std::to_string(c.group);
});

// ---- Causal masks are bottom-right aligned ------------------------------------------------------

struct CausalCase {
  const char* name;
  int sq, sk;
};

class CausalBottomRight : public ::testing::TestWithParam<CausalCase> {};

// Query i of (sq, sk) sees keys j <= i + sk − sq: its row equals a non-causal attention over the
// first i + sk − sq + 1 keys; a query that sees none gets out = 0 and lse = −inf.
TEST_P(CausalBottomRight, RowsSeeTheirPrefix) {
  const CausalCase c = GetParam();
  const int H = 2, D = 16;
  const auto q = random_vec(std::size_t(c.sq) * H * D, 11), k = random_vec(std::size_t(c.sk) * H * D, 12),
             v = random_vec(std::size_t(c.sk) * H * D, 13);
  const int cu_q[2] = {0, c.sq}, cu_k[2] = {0, c.sk};
  std::vector<float> out(q.size()), lse(std::size_t(H) * c.sq);
  ref::prefill(q.data(), k.data(), v.data(), cu_q, cu_k, 1, H, H, D, 0.25f, true, out.data(), lse.data());
  for (int i = 0; i < c.sq; ++i) {
    const int visible = std::clamp(i + c.sk - c.sq + 1, 0, c.sk);
    std::vector<float> o1(std::size_t(H) * D), l1(H);
    const int cq[2] = {0, 1}, ck[2] = {0, visible};
    ref::prefill(q.data() + std::size_t(i) * H * D, k.data(), v.data(), cq, ck, 1, H, H, D, 0.25f, false, o1.data(),
                 l1.data());
    EXPECT_LE(max_abs_diff(out.data() + std::size_t(i) * H * D, o1.data(), o1.size()), 1e-6f) << "row " << i;
    for (int h = 0; h < H; ++h) {
      const float got = lse[std::size_t(h) * c.sq + i];
      if (visible == 0) {
        EXPECT_EQ(got, -kInf) << "row " << i;
        for (int d = 0; d < D; ++d) EXPECT_EQ(out[(std::size_t(i) * H + h) * D + d], 0.f);
      } else {
        EXPECT_NEAR(got, l1[h], 1e-5f) << "row " << i;
      }
    }
  }
}

const CausalCase kCausalCases[] = {
    {"square", 7, 7},
    {"q_shorter_than_k", 3, 10},
    {"q_longer_than_k", 10, 3},
    {"single_query", 1, 9},
    {"single_key", 5, 1},
    {"one_by_one", 1, 1},
};

INSTANTIATE_TEST_SUITE_P(Shapes, CausalBottomRight, ::testing::ValuesIn(kCausalCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CausalBottomRight, LastQueryRowSeesEveryKey) {
  // Bottom-right alignment: the last query of any (sq, sk) sees all sk keys, as in decode.
  const int sq = 4, sk = 9, D = 8;
  const auto q = random_vec(sq * D, 1), k = random_vec(sk * D, 2), v = random_vec(sk * D, 3);
  const int cu_q[2] = {0, sq}, cu_k[2] = {0, sk};
  std::vector<float> causal(q.size()), full(q.size());
  ref::prefill(q.data(), k.data(), v.data(), cu_q, cu_k, 1, 1, 1, D, 0.3f, true, causal.data(), nullptr);
  ref::prefill(q.data(), k.data(), v.data(), cu_q, cu_k, 1, 1, 1, D, 0.3f, false, full.data(), nullptr);
  EXPECT_EQ(max_abs_diff(causal.data() + (sq - 1) * D, full.data() + (sq - 1) * D, D), 0.f);
  EXPECT_GT(max_abs_diff(causal.data(), full.data(), D), 0.f);  // the first row does not
}

// ---- Small cases with known answers ---------------------------------------------------------------

TEST(Reference, SeqLenOneReturnsItsValue) {
  // softmax over one key is 1: out = v, lse = scale·q·k.
  const int D = 64;
  const auto q = random_vec(D, 21), k = random_vec(D, 22), v = random_vec(D, 23);
  const int cu[2] = {0, 1};
  std::vector<float> out(D);
  float lse = 0.f;
  ref::prefill(q.data(), k.data(), v.data(), cu, cu, 1, 1, 1, D, 0.125f, true, out.data(), &lse);
  double dot = 0;
  for (int d = 0; d < D; ++d) dot += double(q[d]) * k[d];
  EXPECT_NEAR(lse, 0.125 * dot, 1e-6);
  for (int d = 0; d < D; ++d) EXPECT_FLOAT_EQ(out[d], v[d]);
}

TEST(Reference, PagedSeqLenOneAndZero) {
  const int D = 64, P = 16;
  PagedKVShape kv;
  kv.page_size = P;
  kv.num_kv_heads = 1;
  kv.head_dim = D;
  const auto k_cache = random_vec(2 * P * D, 31), v_cache = random_vec(2 * P * D, 32), q = random_vec(2 * D, 33);
  const int block_table[2] = {1, 0};  // seq 0 → page 1, seq 1 → page 0
  const int seq_lens[2] = {1, 0};
  std::vector<float> out(2 * D, 9.f), lse(2, 9.f);
  ref::paged_decode(q.data(), k_cache.data(), v_cache.data(), kv, block_table, 1, seq_lens, 2, 1, 0.5f, out.data(),
                    lse.data());
  for (int d = 0; d < D; ++d) EXPECT_FLOAT_EQ(out[d], v_cache[P * D + d]);  // page 1, slot 0
  for (int d = 0; d < D; ++d) EXPECT_EQ(out[D + d], 0.f);                   // empty sequence
  EXPECT_EQ(lse[1], -kInf);
}

TEST(Reference, GqaQueryHeadReadsKvHeadOverGroup) {
  // V of KV head h is the constant h + 1, so query head i must output i / group + 1 exactly.
  const int hq = 8, hkv = 2, D = 16, L = 5, group = hq / hkv;
  std::vector<float> k = random_vec(std::size_t(L) * hkv * D, 41), v(std::size_t(L) * hkv * D);
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < hkv; ++h)
      for (int d = 0; d < D; ++d) v[(std::size_t(t) * hkv + h) * D + d] = float(h + 1);
  const auto q = random_vec(std::size_t(hq) * D, 42);
  const int cu_q[2] = {0, 1}, cu_k[2] = {0, L};
  std::vector<float> out(q.size());
  ref::prefill(q.data(), k.data(), v.data(), cu_q, cu_k, 1, hq, hkv, D, 0.25f, false, out.data(), nullptr);
  for (int h = 0; h < hq; ++h)
    for (int d = 0; d < D; ++d) EXPECT_NEAR(out[std::size_t(h) * D + d], float(h / group + 1), 1e-6) << "head " << h;
}

TEST(Reference, LseIsLogSumExpOfScaledScores) {
  const int D = 32, L = 40;
  const auto q = random_vec(D, 51), k = random_vec(std::size_t(L) * D, 52), v = random_vec(std::size_t(L) * D, 53);
  const int cu_q[2] = {0, 1}, cu_k[2] = {0, L};
  std::vector<float> out(D);
  float lse = 0.f;
  const float scale = 0.7f;
  ref::prefill(q.data(), k.data(), v.data(), cu_q, cu_k, 1, 1, 1, D, scale, false, out.data(), &lse);
  double sum = 0;
  for (int j = 0; j < L; ++j) {
    double dot = 0;
    for (int d = 0; d < D; ++d) dot += double(q[d]) * k[std::size_t(j) * D + d];
    sum += std::exp(scale * dot);
  }
  EXPECT_NEAR(lse, std::log(sum), 1e-5);
}

TEST(Reference, VarlenBatchEqualsSeparateSequences) {
  const int H = 2, D = 16;
  const int lq[3] = {3, 1, 6}, lk[3] = {5, 1, 6};
  const int cu_q[4] = {0, 3, 4, 10}, cu_k[4] = {0, 5, 6, 12};
  const auto q = random_vec(std::size_t(10) * H * D, 61), k = random_vec(std::size_t(12) * H * D, 62),
             v = random_vec(std::size_t(12) * H * D, 63);
  std::vector<float> out(q.size()), lse(std::size_t(H) * 10);
  ref::prefill(q.data(), k.data(), v.data(), cu_q, cu_k, 3, H, H, D, 0.25f, true, out.data(), lse.data());
  for (int b = 0; b < 3; ++b) {
    const int cq[2] = {0, lq[b]}, ck[2] = {0, lk[b]};
    std::vector<float> o1(std::size_t(lq[b]) * H * D), l1(std::size_t(H) * lq[b]);
    ref::prefill(q.data() + std::size_t(cu_q[b]) * H * D, k.data() + std::size_t(cu_k[b]) * H * D,
                 v.data() + std::size_t(cu_k[b]) * H * D, cq, ck, 1, H, H, D, 0.25f, true, o1.data(), l1.data());
    EXPECT_EQ(max_abs_diff(out.data() + std::size_t(cu_q[b]) * H * D, o1.data(), o1.size()), 0.f) << "seq " << b;
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < lq[b]; ++i)
        EXPECT_EQ(lse[std::size_t(h) * 10 + cu_q[b] + i], l1[std::size_t(h) * lq[b] + i]) << "seq " << b;
  }
}

TEST(Reference, V2PartitionsMergedEqualV1) {
  // paged_decode over [begin, end) ranges gives the V2 partials; merge() of them is the V1 answer.
  const int D = 64, P = 16, L = 1000, part = 256, hq = 4, H = 1;
  PagedKVShape kv;
  kv.page_size = P;
  kv.num_kv_heads = H;
  kv.head_dim = D;
  const int pages = (L + P - 1) / P;
  const auto k_cache = random_vec(std::size_t(pages) * P * D, 71), v_cache = random_vec(std::size_t(pages) * P * D, 72),
             q = random_vec(std::size_t(hq) * D, 73);
  std::vector<int> table(pages);
  std::iota(table.begin(), table.end(), 0);
  std::reverse(table.begin(), table.end());
  const int len = L;
  std::vector<float> v1(std::size_t(hq) * D), v1_lse(hq);
  ref::paged_decode(q.data(), k_cache.data(), v_cache.data(), kv, table.data(), pages, &len, 1, hq, 0.125f, v1.data(),
                    v1_lse.data());
  std::vector<float> acc(std::size_t(hq) * D, 0.f), acc_lse(hq, -kInf);
  for (int b = 0; b < L + part; b += part) {  // the last range is past the end: empty
    std::vector<float> o(std::size_t(hq) * D), l(hq);
    ref::paged_decode(q.data(), k_cache.data(), v_cache.data(), kv, table.data(), pages, &len, 1, hq, 0.125f, o.data(),
                      l.data(), b, b + part);
    for (int h = 0; h < hq; ++h) merge(acc.data() + std::size_t(h) * D, acc_lse[h], o.data() + std::size_t(h) * D, l[h], D);
  }
  EXPECT_LE(max_abs_diff(acc.data(), v1.data(), acc.size()), 2e-6f);
  for (int h = 0; h < hq; ++h) EXPECT_NEAR(acc_lse[h], v1_lse[h], 1e-5f);
}

// ---- Storage conversions ---------------------------------------------------------------------------

TEST(Reference, Bf16RoundsToNearestEven) {
  EXPECT_EQ(ref::float_to_bf16_bits(1.f), 0x3f80);
  EXPECT_EQ(ref::bf16_bits_to_float(0x3f80), 1.f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(ref::float_to_bf16_bits(1.f + 1.f / 256), 0x3f80);
  EXPECT_EQ(ref::float_to_bf16_bits(1.f + 3.f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(ref::bf16_bits_to_float(ref::float_to_bf16_bits(std::nanf("")))));
}

TEST(Reference, Fp16RoundTripsAndSaturates) {
  EXPECT_EQ(ref::float_to_fp16_bits(1.f), 0x3c00);
  EXPECT_EQ(ref::fp16_bits_to_float(0x3c00), 1.f);
  EXPECT_EQ(ref::float_to_fp16_bits(65504.f), 0x7bff);
  EXPECT_EQ(ref::float_to_fp16_bits(1e6f), 0x7c00);      // overflow → inf
  EXPECT_EQ(ref::float_to_fp16_bits(-2.f), 0xc000);
  EXPECT_EQ(ref::fp16_bits_to_float(0x0001), std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_EQ(ref::float_to_fp16_bits(std::ldexp(1.f, -24)), 0x0001);
  float x[3] = {0.1f, -3.3f, 1000.7f};
  ref::round_to_fp16(x, 3);
  EXPECT_EQ(x[0], ref::fp16_bits_to_float(ref::float_to_fp16_bits(0.1f)));
  EXPECT_NEAR(x[2], 1000.5f, 0.26f);
}

}  // namespace
}  // namespace muh
