// kernels/sm90_gather_map.hpp — which 16-byte chunks of a key tile each thread of the sm90
// agent's gathering producer copies, and where in shared memory they go (prefill_sm90.cuh's
// Sm90KvGather: paged NHD K/V by cp.async instead of TMA boxes). The tile's layout is the TMA's
// (CU_TENSOR_MAP_SWIZZLE_128B): 64-dim panels of block_n rows of 128 bytes, 16-byte chunk k of
// row r of a panel at chunk position k ^ (r % 8), as wgmma's descriptors read it.
//
// kThreadsPerRow threads cover a row: 16 at head_dim ≥ 128 (256 contiguous bytes, two whole
// 128-byte lines, so a warp's pass reads 2 rows' whole lines), all D/8 chunks at hd 64. A thread's
// rows are kRowsPerPass (8 or 16) apart, so its swizzle is the same on every row: its chunk's
// offset is first(tid) + pass · kPassBytes + c · kChunkStepBytes. Host and device code: the CPU
// test (tests/cpu/test_sm90_gather_map.cpp) checks that 128 threads write every chunk of a tile
// once, each where the TMA would.
#pragma once

#include <cstdint>

#include "muh/host_device.hpp"

namespace muh::kernels {

// Byte offset of chunk ch (0 .. D/8 − 1) of row r in a key tile of BN rows, as the TMA writes it.
template <int BN>
MUH_HOST_DEVICE constexpr std::uint32_t sm90_swizzled_chunk(int r, int ch) {
  return static_cast<std::uint32_t>((ch / 8) * BN * 128 + r * 128 + (((ch % 8) ^ (r % 8)) * 16));
}

template <int D, int BN>
struct Sm90GatherMap {
  static constexpr int kThreads = 128;                               // the producer warp group
  static constexpr int kChunks = D / 8;                              // 16-byte chunks of a row
  static constexpr int kThreadsPerRow = kChunks < 16 ? kChunks : 16;
  static constexpr int kChunksPerThread = kChunks / kThreadsPerRow;  // 2 at hd 256: chunks col, col + 16
  static constexpr int kRowsPerPass = kThreads / kThreadsPerRow;     // 8 or 16
  static constexpr int kPasses = BN / kRowsPerPass;
  static constexpr int kPassBytes = kRowsPerPass * 128;
  static constexpr int kChunkStepBytes = kThreadsPerRow / 8 * BN * 128;  // chunk + 16: two panels on
  static_assert(D % 64 == 0 && kChunks % kThreadsPerRow == 0, "whole 64-dim panels");
  static_assert(kRowsPerPass % 8 == 0 && BN % kRowsPerPass == 0, "a thread's rows share their swizzle");

  // Thread tid's chunk of a row (its first; the others kThreadsPerRow apart) and its first row.
  MUH_HOST_DEVICE static constexpr int col(int tid) { return tid % kThreadsPerRow; }
  MUH_HOST_DEVICE static constexpr int first_row(int tid) { return tid / kThreadsPerRow; }
  MUH_HOST_DEVICE static constexpr int row(int tid, int pass) { return first_row(tid) + pass * kRowsPerPass; }
  MUH_HOST_DEVICE static constexpr int chunk(int tid, int c) { return col(tid) + c * kThreadsPerRow; }
  MUH_HOST_DEVICE static constexpr std::uint32_t first(int tid) {
    return sm90_swizzled_chunk<BN>(first_row(tid), col(tid));
  }
  MUH_HOST_DEVICE static constexpr std::uint32_t offset(int tid, int pass, int c) {
    return first(tid) + static_cast<std::uint32_t>(pass * kPassBytes + c * kChunkStepBytes);
  }
};

}  // namespace muh::kernels
