// kernels/warp_tile.cuh — the portable agent's cross-lane operations, on explicit 32-lane tiles.
// Every shuffle, lane index and warp-level sync of the portable kernels (decode_portable.cuh,
// prefill_portable.cuh and the decode merge in decode_common.cuh) goes through this header;
// tests/portable/check_warp_tile.cmake fails CI if another portable-agent file spells a raw one.
//
// Why tiles and not "the warp": the BI-V100 (Iluvatar, clang-based CUDA toolchain) runs 64-lane
// warps — the seed measured warpSize = 64 with a kernel — while NVIDIA's are 32. The kernels are
// written for groups of 32 threads (num_warps in the policy rows counts these tiles; a block is
// 32 · num_warps threads), and a tile is always threads [32·t, 32·t + 32) of the block, so its
// lane is tid % 32 whatever the hardware width; nothing here reads warpSize.
//
// What a shuffle must say to be right on both widths (CUDA C++ Programming Guide, warp shuffle
// functions):
//   - width: "if width is less than warpSize then each subsection of the warp behaves as a
//     separate entity with a starting logical lane ID of 0"; srcLane / laneMask are taken within
//     the subsection. The default width is warpSize, so on a 64-lane warp an unwidthed
//     __shfl_xor_sync(m, v, 16) pairs lane 40 with lane 56 — still the same 32-lane half — but
//     an unwidthed broadcast __shfl_sync(m, v, 3) would hand lane 40 the value of lane 3, the
//     other tile's. Every shuffle here passes width = W ≤ 32, so sources stay inside the
//     caller's W-lane group, hence inside its tile, on 32- and on 64-lane hardware alike.
//   - mask: "each calling thread must have its own bit set in the mask" and every non-exited
//     thread named in it must execute the same intrinsic with the same mask, else the result is
//     undefined. On a 64-lane warp 0xffffffff names hardware lanes 0–31 only: the upper tile
//     calling with it is undefined behaviour (it may work on a lock-step machine; nothing says
//     it does). So the mask is the caller's tile — 32 ones at bit 32·(tile within the hardware
//     warp) — and the two tiles of a 64-lane warp shuffle with disjoint masks, each complete.
//     The threads of a block fill hardware warps in order of their linear thread id (the
//     Programming Guide's SIMT architecture section), so that position is (tid % hw) / 32.
// HIP on 64-lane wavefronts is the closest public analogue: its __shfl_xor / __shfl (width
// defaulting to warpSize = 64) partition the wavefront into width-lane segments exactly as
// above (rocPRIM's warp_shuffle: "each subsection of the warp behaves as a separate entity"),
// and its *_sync variants take a 64-bit lane mask. On a 64-lane build (MUH_HW_WARP_LANES = 64)
// the mask is therefore 64-bit and per tile. Not verified: how CoreX declares the mask of its
// *_sync intrinsics (no public header found). Were it 32-bit, the upper tile's mask would
// convert to 0 — check `grep -rn __shfl_xor_sync $COREX_HOME/include` before trusting a build.
// NVIDIA targets (nvcc, and clang targeting nvptx) have 32 lanes: the tile is the warp, the mask
// the constant 0xffffffff, and the code is instruction for instruction what the raw intrinsics
// it replaced gave (the sm_90 SASS of every instance object is byte-identical to main's).
#pragma once

#include <type_traits>

#include "muh/host_device.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

// The lanes of one hardware warp on the compiled target. Iluvatar's CoreX toolchain predefines
// __ILUVATAR__ and has WARP_SIZE 64 (a public Iluvatar server guide, "与英伟达 CUDA 的主要差异":
// predefined macro __NVCC__ vs __ILUVATAR__, warp size 32 vs 64, block up to 4096 threads).
// -DMUH_HW_WARP_LANES=32|64 overrides it.
#ifndef MUH_HW_WARP_LANES
#if defined(__ILUVATAR__)
#define MUH_HW_WARP_LANES 64
#else
#define MUH_HW_WARP_LANES 32
#endif
#endif

namespace muh::kernels::tile32 {

inline constexpr int kLanes = 32;                 // lanes of one tile: what the kernels are written for
inline constexpr int kHwLanes = MUH_HW_WARP_LANES;    // lanes of one hardware warp (compile-time)
static_assert(kHwLanes == 32 || kHwLanes == 64, "hardware warps of 32 or 64 lanes");
inline constexpr int kTilesPerHwWarp = kHwLanes / kLanes;

// The hardware lanes of the tile that holds the block's linear thread `tid`, on hardware warps of
// hw_lanes (32 or 64) lanes: the low or the high 32 bits of the hardware warp's lanes. Host and
// device (tests/cpu/test_warp_tile.cpp checks the shuffle preconditions above with it).
MUH_HOST_DEVICE constexpr unsigned long long tile_mask_bits(unsigned tid, int hw_lanes) {
  return 0xffffffffull << (kLanes * ((tid % static_cast<unsigned>(hw_lanes)) / kLanes));
}

// W: lanes of one group inside the tile, a power of two ≤ 32; a group is lanes [W·g, W·g + W).
template <int W>
inline constexpr bool kGroupWidth = W >= 1 && W <= kLanes && (W & (W - 1)) == 0;

#if defined(__CUDACC__)

// The shuffles' mask type: one bit per hardware lane.
using LaneMask = std::conditional_t<kHwLanes == 64, unsigned long long, unsigned>;

// Tile index and lane within the tile of the block's thread `tid` (1-D blocks: tid = threadIdx.x).
__device__ __forceinline__ int index(int tid) { return tid / kLanes; }
__device__ __forceinline__ int lane(int tid) { return tid % kLanes; }

// The caller's tile, as the shuffles' mask: the constant 0xffffffff on a 32-lane warp.
__device__ __forceinline__ LaneMask mask() {
  if constexpr (kTilesPerHwWarp == 1) {
    return 0xffffffffu;
  } else {
    const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    return static_cast<LaneMask>(tile_mask_bits(tid, kHwLanes));
  }
}

// The value of the lane whose group lane is (this one's) ^ off, 0 < off < W.
template <int W = kLanes>
__device__ __forceinline__ float shfl_xor(float v, int off) {
  static_assert(kGroupWidth<W>, "a group: a power of two of at most 32 lanes");
  return __shfl_xor_sync(mask(), v, off, W);
}

// The value of group lane src (0 ≤ src < W) of the caller's group, to every lane of the group.
template <int W = kLanes>
__device__ __forceinline__ float broadcast(float v, int src) {
  static_assert(kGroupWidth<W>, "a group: a power of two of at most 32 lanes");
  return __shfl_sync(mask(), v, src, W);
}

// Butterfly reduction over the caller's W-lane group: every lane ends with op folded over the
// group's values, combined as op(own, partner) at strides W/2, …, 1 (the order of the loops the
// kernels had, so a non-commutative op such as the lse fold gives the same bits).
template <int W = kLanes, class Op>
__device__ __forceinline__ float reduce(float v, Op op) {
#pragma unroll
  for (int off = W / 2; off > 0; off /= 2) v = op(v, shfl_xor<W>(v, off));
  return v;
}
template <int W = kLanes>
__device__ __forceinline__ float reduce_max(float v) {
  return reduce<W>(v, [](float a, float b) { return fmaxf(a, b); });
}
template <int W = kLanes>
__device__ __forceinline__ float reduce_sum(float v) {
  return reduce<W>(v, [](float a, float b) { return a + b; });
}

// The caller's tile waits for all its lanes (memory ordering among them, as __syncwarp).
__device__ __forceinline__ void sync() { __syncwarp(mask()); }

#endif  // __CUDACC__

}  // namespace muh::kernels::tile32
