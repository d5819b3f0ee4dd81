// Decode context parallelism (python/muh/distributed.py), the combine's math on the CPU: a paged
// cache sharded over W simulated ranks with vLLM's interleaved token-to-rank assignment
// (cp_kv_cache_interleave_size I: global token t lives on rank (t / I) % W, at local position
// (t / (I·W))·I + t % I), each shard's decode (out, lse) from the CPU reference, the partials
// folded in rank order 0, 1, …, W−1 with merge_attn_states' row math (kernels/merge_states.hpp,
// which is online_softmax.hpp's merge_weights(): the same functions the merge kernel runs on the
// GPU, where muh.distributed's combine calls it once per rank), and the result compared with the
// unsharded reference decode. Shards that are empty for short sequences (length 0, 1, < W·I)
// are in every case: their partial is (0, −inf), the identity of the merge.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "muh/kernels/merge_states.hpp"
#include "muh/reference.hpp"
#include "random_inputs.hpp"

namespace muh {
namespace {

using kernels::merge_states::merged;
using kernels::merge_states::row_weights;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- vLLM's interleaved assignment (vllm/v1/attention/backends/utils.py get_dcp_local_seq_lens) --

int owner_rank(int t, int world, int interleave) { return (t / interleave) % world; }
int local_position(int t, int world, int interleave) { return (t / (interleave * world)) * interleave + t % interleave; }
// Rank r's share of a sequence of length L: I tokens per full round of W·I, plus what of the last
// round falls in its slot [r·I, (r+1)·I).
int local_len(int len, int world, int rank, int interleave) {
  const int full_rounds = len / (interleave * world);
  const int rest = len - full_rounds * interleave * world;
  return full_rounds * interleave + std::clamp(rest - rank * interleave, 0, interleave);
}

TEST(ContextParallelSharding, LocalLengthsCountTheOwnedTokens) {
  for (int world : {1, 2, 3, 4, 8})
    for (int interleave : {1, 2, 16})
      for (int len = 0; len <= 3 * world * interleave + 5; ++len) {
        std::vector<int> count(world, 0);
        for (int t = 0; t < len; ++t) {
          const int r = owner_rank(t, world, interleave);
          EXPECT_EQ(local_position(t, world, interleave), count[r]) << "tokens of a rank are stored in order";
          ++count[r];
        }
        for (int r = 0; r < world; ++r)
          EXPECT_EQ(local_len(len, world, r, interleave), count[r])
              << "len " << len << " world " << world << " rank " << r << " interleave " << interleave;
      }
}

// ---- A paged cache, its shards, the decode of each -------------------------------------------

using cpu_test::random_vec;

// An NHD paged cache [num_pages, page_size, kv_heads, head_dim]; pages nobody owns hold NaN, so a
// read past a sequence's (or a shard's) length shows as NaN in the output.
struct PagedCache {
  PagedKVShape kv;
  int max_blocks = 1;
  std::vector<int> block_table;  // [num_seqs, max_blocks]
  std::vector<int> seq_lens;
  std::vector<float> k, v;

  std::size_t token_at(int seq, int t) const {  // element offset of (seq, token t, head 0, dim 0)
    const std::int64_t page = block_table[std::size_t(seq) * max_blocks + t / kv.page_size];
    return std::size_t(kv.k_offset(page, t % kv.page_size, 0, 0));
  }
};

PagedCache empty_cache(const std::vector<int>& lens, int page_size, int kv_heads, int head_dim, unsigned seed) {
  PagedCache c;
  c.kv.page_size = page_size;
  c.kv.num_kv_heads = kv_heads;
  c.kv.head_dim = head_dim;
  c.seq_lens = lens;
  for (int L : lens) c.max_blocks = std::max(c.max_blocks, (L + page_size - 1) / page_size);
  const int pages = int(lens.size()) * c.max_blocks + 2;
  std::vector<int> perm(pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));  // logical order != physical order
  c.block_table.assign(perm.begin(), perm.begin() + std::ptrdiff_t(lens.size()) * c.max_blocks);
  c.k.assign(std::size_t(pages) * c.kv.page_elems(), kNaN);
  c.v = c.k;
  return c;
}

PagedCache random_cache(const std::vector<int>& lens, int page_size, int kv_heads, int head_dim, unsigned seed) {
  PagedCache c = empty_cache(lens, page_size, kv_heads, head_dim, seed);
  const std::size_t row = std::size_t(kv_heads) * head_dim;  // one token's K (or V), all heads
  for (std::size_t s = 0; s < lens.size(); ++s) {
    const auto k = random_vec(lens[s] * row, seed * 31 + 2 * unsigned(s)), v = random_vec(lens[s] * row, seed * 31 + 2 * unsigned(s) + 1);
    for (int t = 0; t < lens[s]; ++t) {
      std::copy_n(k.begin() + std::ptrdiff_t(t * row), row, c.k.begin() + std::ptrdiff_t(c.token_at(int(s), t)));
      std::copy_n(v.begin() + std::ptrdiff_t(t * row), row, c.v.begin() + std::ptrdiff_t(c.token_at(int(s), t)));
    }
  }
  return c;
}

// Rank `rank`'s shard: the tokens it owns, in order, in a cache of its own (its own page order).
PagedCache shard(const PagedCache& full, int world, int rank, int interleave) {
  std::vector<int> lens;
  for (int L : full.seq_lens) lens.push_back(local_len(L, world, rank, interleave));
  PagedCache s = empty_cache(lens, full.kv.page_size, full.kv.num_kv_heads, full.kv.head_dim, 1000u + unsigned(rank));
  const std::size_t row = std::size_t(full.kv.num_kv_heads) * full.kv.head_dim;
  for (std::size_t b = 0; b < lens.size(); ++b)
    for (int t = 0; t < full.seq_lens[b]; ++t) {
      if (owner_rank(t, world, interleave) != rank) continue;
      const int j = local_position(t, world, interleave);
      std::copy_n(full.k.begin() + std::ptrdiff_t(full.token_at(int(b), t)), row, s.k.begin() + std::ptrdiff_t(s.token_at(int(b), j)));
      std::copy_n(full.v.begin() + std::ptrdiff_t(full.token_at(int(b), t)), row, s.v.begin() + std::ptrdiff_t(s.token_at(int(b), j)));
    }
  return s;
}

struct Partial {
  std::vector<float> out;  // [num_seqs, num_q_heads, head_dim]
  std::vector<float> lse;  // [num_seqs, num_q_heads]
};

Partial decode(const PagedCache& c, const std::vector<float>& q, int num_q_heads, float scale) {
  const int n = int(c.seq_lens.size());
  Partial p{std::vector<float>(q.size(), kNaN), std::vector<float>(std::size_t(n) * num_q_heads, kNaN)};
  ref::paged_decode(q.data(), c.k.data(), c.v.data(), c.kv, c.block_table.data(), c.max_blocks, c.seq_lens.data(), n,
                    num_q_heads, scale, p.out.data(), p.lse.data());
  return p;
}

// muh.distributed's combine on the CPU: every (seq, head) row folded over the ranks in rank order,
// in fp32, with the merge kernel's row functions (the GPU side calls merge_attn_states with
// output = prefix = the running result, suffix = rank r's partial).
Partial combine(const std::vector<Partial>& parts, int head_dim) {
  Partial acc = parts[0];
  const std::size_t rows = acc.lse.size();
  for (std::size_t r = 1; r < parts.size(); ++r)
    for (std::size_t row = 0; row < rows; ++row) {
      const MergeWeights w = row_weights(acc.lse[row], parts[r].lse[row]);
      for (int d = 0; d < head_dim; ++d) {
        float& o = acc.out[row * head_dim + d];
        o = merged(o, parts[r].out[row * head_dim + d], w);
      }
      acc.lse[row] = w.lse;
    }
  return acc;
}

// ---- Sharded + combined == unsharded ------------------------------------------------------------

// (world, interleave, kv heads, q heads per kv head)
using CpCase = std::tuple<int, int, int, int>;

class ContextParallelCombine : public testing::TestWithParam<CpCase> {};

// Tolerance: the reference accumulates in double and rounds each partial to float once; the fold
// adds, per rank, three fp32 roundings per element (two products, one sum) of relative 2^-24, on
// outputs |o| <= 1 (v is uniform in [-1, 1]): W = 8 gives < 8 · 3 · 6e-8 ≈ 1.4e-6 at worst, hence
// 2e-6 (the V2-partition merge test's bound in test_reference.cpp; measured: at most 1.2e-7 over
// these cases). A wrong weight, a lost or doubled token is off by far more (1/L of a value, ≥ 1e-3
// at these lengths; folding all ranks but the last fails every case). lse: 1e-5 (|lse| ≤ ~8).
constexpr float kOutTol = 2e-6f, kLseTol = 1e-5f;

TEST_P(ContextParallelCombine, EqualsTheUnshardedDecode) {
  const auto [world, interleave, kv_heads, group] = GetParam();
  const int head_dim = 32, hq = kv_heads * group, page = 16;
  // 0: empty everywhere; 1 and 2 (< W for W > 2): ranks without a token; 17, 33: odd, not a
  // multiple of the page; 300 and 1027: several rounds of W·I with a partial last one.
  const std::vector<int> lens = {0, 1, 2, 17, 33, 300, 1027};
  const PagedCache full = random_cache(lens, page, kv_heads, head_dim, 7u + unsigned(world * 100 + interleave));
  const auto q = random_vec(lens.size() * hq * head_dim, 99);
  const float scale = 1.f / std::sqrt(float(head_dim));

  const Partial want = decode(full, q, hq, scale);
  std::vector<Partial> parts;
  int empty_shards = 0;
  for (int r = 0; r < world; ++r) {
    const PagedCache s = shard(full, world, r, interleave);
    for (int L : s.seq_lens) empty_shards += (L == 0);
    parts.push_back(decode(s, q, hq, scale));
  }
  ASSERT_GT(empty_shards, 0) << "the case must have empty shards";
  const Partial got = combine(parts, head_dim);

  for (std::size_t b = 0; b < lens.size(); ++b)
    for (int h = 0; h < hq; ++h) {
      const std::size_t row = b * hq + h;
      const std::string where = "seq " + std::to_string(b) + " (len " + std::to_string(lens[b]) + ") head " + std::to_string(h);
      if (lens[b] == 0) {
        EXPECT_EQ(got.lse[row], -kInf) << where;
        for (int d = 0; d < head_dim; ++d) EXPECT_EQ(got.out[row * head_dim + d], 0.f) << where;
        continue;
      }
      EXPECT_NEAR(got.lse[row], want.lse[row], kLseTol) << where;
      float err = 0.f;
      for (int d = 0; d < head_dim; ++d) {
        const float g = got.out[row * head_dim + d];
        ASSERT_TRUE(std::isfinite(g)) << where << " dim " << d;
        err = std::max(err, std::fabs(g - want.out[row * head_dim + d]));
      }
      EXPECT_LE(err, kOutTol) << where;
      if (lens[b] <= interleave) {
        // Only rank 0 holds tokens: the empty partials have weight 0 and the result is rank 0's
        // partial, bit for bit — the same keys in the same order as the unsharded decode.
        for (int d = 0; d < head_dim; ++d) EXPECT_EQ(got.out[row * head_dim + d], want.out[row * head_dim + d]) << where;
        EXPECT_EQ(got.lse[row], want.lse[row]) << where;
      }
    }
}

// The fold is one fixed order; merging in another order gives the same result up to rounding
// (the merge is associative and commutative), but every rank folds 0..W−1, so all agree bitwise.
TEST(ContextParallelCombineOrder, ReverseOrderAgreesWithinRounding) {
  const int world = 4, interleave = 1, head_dim = 32, hq = 4;
  const PagedCache full = random_cache({513, 3}, 16, 1, head_dim, 5);
  const auto q = random_vec(2 * hq * head_dim, 6);
  std::vector<Partial> parts;
  for (int r = 0; r < world; ++r) parts.push_back(decode(shard(full, world, r, interleave), q, hq, 0.2f));
  const Partial fwd = combine(parts, head_dim);
  std::reverse(parts.begin(), parts.end());
  const Partial rev = combine(parts, head_dim);
  for (std::size_t i = 0; i < fwd.out.size(); ++i) EXPECT_NEAR(fwd.out[i], rev.out[i], kOutTol) << i;
  for (std::size_t i = 0; i < fwd.lse.size(); ++i) EXPECT_NEAR(fwd.lse[i], rev.lse[i], kLseTol) << i;
}

std::string cp_name(const testing::TestParamInfo<CpCase>& info) {
  const auto [world, interleave, kv_heads, group] = info.param;
  return "w" + std::to_string(world) + "_i" + std::to_string(interleave) + "_kv" + std::to_string(kv_heads) + "_g" +
         std::to_string(group);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ContextParallelCombine,
                         testing::Combine(testing::Values(2, 3, 4, 8), testing::Values(1, 16),
                                          testing::Values(1, 2), testing::Values(4)),
                         cp_name);

}  // namespace
}  // namespace muh
