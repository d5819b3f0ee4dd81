// tests/cpu/test_warp_tile.cpp — kernels/warp_tile.cuh's tile masks meet the preconditions of a
// CUDA *_sync shuffle on 32- and on 64-lane hardware warps, for blocks of 1–32 tiles (the last
// 64-lane warp half empty when the count is odd), and the width-W shuffles the portable kernels
// make with them read only lanes of the caller's own tile. A model of the documented semantics
// (CUDA C++ Programming Guide, warp shuffle functions; PTX shfl.sync's segment clamp), not of
// any hardware: "each calling thread must have its own bit set in the mask", every thread the
// mask names must call with the same mask, and a source lane must be named in it.
#include <gtest/gtest.h>

#include <string>

#include "muh/kernels/warp_tile.cuh"

namespace {

using muh::kernels::tile32::kLanes;
using muh::kernels::tile32::tile_mask_bits;

// The hardware lane a shuffle of width w (a power of two) reads for `lane`: its own w-lane
// segment, the partner lane ^ off (own value past the segment), or segment lane src.
int xor_source(int lane, int off, int w) {
  const int j = lane ^ off;
  return (j & ~(w - 1)) == (lane & ~(w - 1)) ? j : lane;
}
int idx_source(int lane, int src, int w) { return (lane & ~(w - 1)) | (src & (w - 1)); }

bool names(unsigned long long mask, int lane) { return (mask >> lane) & 1ull; }

// Every precondition for every thread of a block of `threads` threads on `hw`-lane warps, with
// the mask `mask_of(tid)`; returns the first violation, or "".
template <class MaskOf>
std::string first_violation(int hw, int threads, MaskOf mask_of) {
  for (int tid = 0; tid < threads; ++tid) {
    const int lane = tid % hw, base = tid - lane, present = std::min(hw, threads - base);
    const unsigned long long m = mask_of(tid) & (hw == 64 ? ~0ull : 0xffffffffull);
    const std::string at = "hw " + std::to_string(hw) + ", " + std::to_string(threads) + " threads, tid " +
                           std::to_string(tid) + ": ";
    if (!names(m, lane)) return at + "the caller is not in its mask";
    for (int l = 0; l < hw; ++l) {
      if (!names(m, l)) continue;
      if (l >= present) return at + "the mask names lane " + std::to_string(l) + ", which has no thread";
      if (mask_of(base + l) != mask_of(tid)) return at + "lane " + std::to_string(l) + " calls with another mask";
    }
    for (int w = 1; w <= kLanes; w *= 2) {
      for (int k = 0; k < w; ++k) {
        for (const int src : {xor_source(lane, k, w), idx_source(lane, k, w)}) {
          if (!names(m, src)) return at + "width " + std::to_string(w) + " reads lane " + std::to_string(src) + ", not in the mask";
          if ((base + src) / kLanes != tid / kLanes) return at + "width " + std::to_string(w) + " reads another tile";
        }
      }
    }
  }
  return "";
}

TEST(WarpTile, MasksMeetTheShufflePreconditionsOn32LaneWarps) {
  for (int tiles = 1; tiles <= 32; ++tiles)
    EXPECT_EQ(first_violation(32, tiles * kLanes, [](int tid) { return tile_mask_bits(tid, 32); }), "");
}

TEST(WarpTile, MasksMeetTheShufflePreconditionsOn64LaneWarps) {
  for (int tiles = 1; tiles <= 32; ++tiles)
    EXPECT_EQ(first_violation(64, tiles * kLanes, [](int tid) { return tile_mask_bits(tid, 64); }), "");
}

TEST(WarpTile, MasksAreTheLowAndHighHalvesOfA64LaneWarp) {
  EXPECT_EQ(tile_mask_bits(0, 64), 0x00000000ffffffffull);
  EXPECT_EQ(tile_mask_bits(31, 64), 0x00000000ffffffffull);
  EXPECT_EQ(tile_mask_bits(32, 64), 0xffffffff00000000ull);
  EXPECT_EQ(tile_mask_bits(127, 64), 0xffffffff00000000ull);
  EXPECT_EQ(tile_mask_bits(96, 32), 0xffffffffull);  // one tile per 32-lane warp: the constant
}

// What the kernels did before warp_tile.cuh: 0xffffffff from every thread. Right on 32 lanes,
// undefined on 64 — the upper tile's threads call with a mask that does not name them.
TEST(WarpTile, TheFullWarpMaskIsWrongOn64LaneWarps) {
  const auto full = [](int) { return 0xffffffffull; };
  EXPECT_EQ(first_violation(32, 128, full), "");
  EXPECT_EQ(first_violation(64, 128, full), "hw 64, 128 threads, tid 32: the caller is not in its mask");
}

}  // namespace
