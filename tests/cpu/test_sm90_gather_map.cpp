// tests/cpu/test_sm90_gather_map.cpp — kernels/sm90_gather_map.hpp on the CPU: the 128 threads of
// the sm90 agent's gathering producer, over all their passes and chunks, write every 16-byte
// chunk of a key tile exactly once, each where the TMA's 128-byte swizzle puts it (what wgmma's
// descriptors read), a thread's offsets are its first plus whole pass and chunk steps (the
// kernel's arithmetic), and a warp's copies of one pass read whole 128-byte lines of global
// memory (rows of D · 2 bytes, a chunk's line = (row, chunk / 8)). At every (head_dim, block_n)
// of the sm_90a rows (64/128, 128/128, 256/64) and the others the map admits.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "muh/kernels/sm90_gather_map.hpp"

namespace {

using muh::kernels::Sm90GatherMap;
using muh::kernels::sm90_swizzled_chunk;

template <int D, int BN>
void check_map() {
  using M = Sm90GatherMap<D, BN>;
  SCOPED_TRACE("head_dim " + std::to_string(D) + ", block_n " + std::to_string(BN));
  const int chunks = BN * D / 8;
  std::vector<int> writes(static_cast<std::size_t>(chunks), 0);
  for (int tid = 0; tid < M::kThreads; ++tid)
    for (int pass = 0; pass < M::kPasses; ++pass)
      for (int c = 0; c < M::kChunksPerThread; ++c) {
        const int r = M::row(tid, pass), ch = M::chunk(tid, c);
        ASSERT_LT(r, BN);
        ASSERT_LT(ch, D / 8);
        const std::uint32_t off = M::offset(tid, pass, c);
        EXPECT_EQ(off, sm90_swizzled_chunk<BN>(r, ch)) << "thread " << tid << " pass " << pass << " chunk " << c;
        ASSERT_EQ(off % 16, 0u);
        ASSERT_LT(off / 16, static_cast<std::uint32_t>(chunks));
        ++writes[off / 16];
      }
  for (int i = 0; i < chunks; ++i) EXPECT_EQ(writes[static_cast<std::size_t>(i)], 1) << "tile chunk " << i;
  // One warp, one pass, one of its chunks: the global 128-byte lines it reads, each read whole.
  for (int warp = 0; warp < M::kThreads / 32; ++warp)
    for (int c = 0; c < M::kChunksPerThread; ++c) {
      std::set<std::pair<int, int>> lines;
      for (int lane = 0; lane < 32; ++lane) {
        const int tid = 32 * warp + lane;
        lines.insert({M::row(tid, 0), M::chunk(tid, c) / 8});
      }
      EXPECT_EQ(static_cast<int>(lines.size()) * 8, 32) << "warp " << warp << ": 32 chunks on whole lines";
    }
}

TEST(Sm90GatherMap, EveryChunkOnceWhereTheTmaPutsIt) {
  check_map<64, 128>();   // sm_90a hd 64 row (192 x 128)
  check_map<128, 128>();  // hd 128 (128 x 128)
  check_map<256, 64>();   // hd 256 (128 x 64)
  check_map<64, 64>();
  check_map<128, 64>();
  check_map<256, 128>();
}

TEST(Sm90GatherMap, SwizzleIsTheTmaPattern) {
  // Row 0 unswizzled, row r's chunk k at k ^ (r % 8), the pattern repeating every 8 rows (1024 B),
  // panel p of a 128-row tile 16 KB on.
  EXPECT_EQ(sm90_swizzled_chunk<128>(0, 3), 48u);
  EXPECT_EQ(sm90_swizzled_chunk<128>(5, 3), 5u * 128 + (3 ^ 5) * 16);
  EXPECT_EQ(sm90_swizzled_chunk<128>(13, 3), 13u * 128 + (3 ^ 5) * 16);
  EXPECT_EQ(sm90_swizzled_chunk<128>(2, 9), 128u * 128 + 2 * 128 + (1 ^ 2) * 16);
  EXPECT_EQ(sm90_swizzled_chunk<64>(2, 17), 2u * 64 * 128 + 2 * 128 + (1 ^ 2) * 16);
}

}  // namespace
