// test_prefill_schedule.cpp — the prefill agents' schedule, on the host: tile_of() must map the
// grid onto every (q tile, sequence, head) exactly once, with the longest causal tiles first; and
// the causal key-range helpers (visible_keys, tile_needs_mask) must agree with key_masked(), the
// per-element rule, by brute force. A gap or an overlap in tile_of() would leave output rows
// unwritten or written twice; a wrong key range would skip keys or read masked ones unmasked.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "muh/kernels/prefill_common.cuh"

namespace muh::kernels {
namespace {

PrefillArgs grid_args(int m_blocks, int batch, int heads, bool causal) {
  PrefillArgs a;
  a.num_m_blocks = m_blocks;
  a.batch = batch;
  a.num_q_heads = heads;
  a.causal = causal;
  return a;
}

TEST(PrefillSchedule, TileOfCoversEveryTileOnce) {
  for (int nm : {1, 2, 3, 7, 8, 9, 16, 17, 33, 64})
    for (int batch : {1, 3})
      for (int heads : {1, 4, 5})
        for (bool causal : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "m_blocks " << nm << ", batch " << batch << ", heads " << heads
                                            << (causal ? ", causal" : ""));
          const PrefillArgs a = grid_args(nm, batch, heads, causal);
          const long long n = prefill_grid_size(a);
          ASSERT_EQ(n, static_cast<long long>(nm) * batch * heads);
          std::vector<int> hits(static_cast<std::size_t>(n), 0);
          for (long long i = 0; i < n; ++i) {
            const TileCoord c = tile_of(i, a);
            ASSERT_GE(c.m_block, 0);
            ASSERT_LT(c.m_block, nm);
            ASSERT_GE(c.b, 0);
            ASSERT_LT(c.b, batch);
            ASSERT_GE(c.h, 0);
            ASSERT_LT(c.h, heads);
            ++hits[(static_cast<std::size_t>(c.b) * heads + c.h) * nm + c.m_block];
          }
          EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
        }
}

TEST(PrefillSchedule, CausalTilesGoLongestFirst) {
  // Under a causal mask tile m sees the most keys when m is largest: the grid starts with the
  // last tile, and no CTA of a later chunk (kPrefillChunk tiles per (sequence, head)) has a
  // larger tile than any CTA before it — the last wave is made of short tiles.
  for (int nm : {5, 8, 9, 20, 64})
    for (int heads : {1, 6}) {
      const PrefillArgs a = grid_args(nm, 2, heads, true);
      const long long n = prefill_grid_size(a);
      EXPECT_EQ(tile_of(0, a).m_block, nm - 1);
      const int chunk = nm > kPrefillChunk ? kPrefillChunk : nm;
      const long long per_chunk = static_cast<long long>(chunk) * 2 * heads;
      int prev_min = nm;
      for (long long start = 0; start < n; start += per_chunk) {
        int lo = nm, hi = -1;
        for (long long i = start; i < std::min(n, start + per_chunk); ++i) {
          lo = std::min(lo, tile_of(i, a).m_block);
          hi = std::max(hi, tile_of(i, a).m_block);
        }
        EXPECT_LE(hi, prev_min) << "chunk at " << start << " (m_blocks " << nm << ", heads " << heads << ")";
        prev_min = lo;
      }
    }
}

TEST(PrefillSchedule, NonCausalQTilesVaryFastest) {
  // Without a mask every tile costs the same; the q tiles of one (sequence, head) are neighbours
  // in the grid so that the CTAs running together share their K/V in L2.
  const PrefillArgs a = grid_args(12, 2, 3, false);
  for (long long i = 0; i < prefill_grid_size(a); ++i) {
    const TileCoord c = tile_of(i, a), first = tile_of(i - i % 12, a);
    EXPECT_EQ(c.b, first.b);
    EXPECT_EQ(c.h, first.h);
  }
}

TEST(PrefillSchedule, KeyRangesAgreeWithTheElementRule) {
  for (int sq : {1, 3, 16, 37})
    for (int sk : {0, 1, 5, 16, 40})
      for (bool causal : {false, true})
        for (int rows : {1, 16, 64})
          for (int m0 = 0; m0 < sq; m0 += (rows < sq ? rows : sq)) {
            // visible_keys: the largest prefix any row of [m0, m0 + rows) may see.
            int expect = 0;
            for (int i = m0; i < m0 + rows; ++i) {
              int seen = 0;
              while (seen < sk && !key_masked(i, seen, sq, sk, causal)) ++seen;
              for (int j = seen; j < sk; ++j) ASSERT_TRUE(key_masked(i, j, sq, sk, causal)) << "not a prefix";
              expect = std::max(expect, seen);
            }
            EXPECT_EQ(visible_keys(m0, rows, sq, sk, causal), expect)
                << "sq " << sq << " sk " << sk << " m0 " << m0 << " rows " << rows << (causal ? " causal" : "");
            // tile_needs_mask: true exactly when some key of the tile is masked for some row ≥ m0
            // (row m0 sees the fewest keys, so it decides).
            for (int bn : {8, 16})
              for (int n0 = 0; n0 < sk + bn; n0 += bn) {
                bool any = false;
                for (int i = m0; i < std::min(sq, m0 + rows); ++i)
                  for (int j = n0; j < n0 + bn; ++j) any = any || key_masked(i, j, sq, sk, causal);
                EXPECT_EQ(tile_needs_mask(n0, bn, m0, sq, sk, causal), any)
                    << "sq " << sq << " sk " << sk << " m0 " << m0 << " n0 " << n0 << " bn " << bn
                    << (causal ? " causal" : "");
              }
          }
}

}  // namespace
}  // namespace muh::kernels
