// kernels/fp8_fragments.hpp — where an fp8 tile's codes land in the m16n8k16 MMA's fragments when
// ldmatrix reads rows of 16 codes as if they were 8 16-bit elements (HeadsOnNCodes in
// decode_sm80.cuh): host and device, so that the CPU tests replay the fragment math
// (tests/cpu/test_fp8_fragments.cpp).
//
// ldmatrix gives lane l (g = l / 4, q = l % 4) row g, bytes 4q .. 4q + 3 of each 8-row matrix; the
// two fp16 pairs those 4 codes widen to are the fragment elements k = 2q, 2q + 1 (low pair) and
// 2q + 8, 2q + 9 (high pair). So the MMAs sum over a fixed permutation of their k axis:
//   S = Q Kᵀ (k = dims): in each 16-dim group, fragment k ↔ dim π(k); Q's fragments are loaded
//     with the same π (dims 4q .. 4q + 3 of a head, one 8-byte load);
//   O = P V (k = tokens): Vᵀ's fragment element k is token π(k) of the tile (a V dim row holds
//     the tile's 16 tokens), so S row r must be token π(r) too — the K rows ldmatrix is given.
// NHD pages hold V as token rows, so Vᵀ's k = tokens are across rows: ldmatrix .trans of token rows
// π-free gives lane (g, q) dims 2g, 2g + 1 of tokens 2q, 2q + 1 (one matrix) and 2q + 8, 2q + 9
// (the next), which two byte permutes turn into the 4 codes of dim 2g and of dim 2g + 1 — whose
// pairs are the fragment elements k = 2q, 2q + 1, 2q + 8, 2q + 9 in token order. So on NHD pages
// S rows are tokens in order (RowsInOrder), and Oᵀ's m-tile row g is dim 2g of its 16, row g + 8
// dim 2g + 1 (NhdCodeDims).
#pragma once

#include "muh/host_device.hpp"

namespace muh::kernels::decode {

// π: the tile's token in S row r (and in fragment element k of a code row): 0, 1, 4, 5, 8, 9, 12,
// 13, 2, 3, 6, 7, 10, 11, 14, 15.
struct RowsOfCodes {
  MUH_HOST_DEVICE static constexpr int token_of_row(int r) { return 4 * ((r & 7) >> 1) + 2 * (r >> 3) + (r & 1); }
  // π(2q) = 4q, π(2q + 1) = 4q + 1, π(2q + 8) = 4q + 2, π(2q + 9) = 4q + 3 (the code order above),
  // and π is a permutation of 0 .. 15.
  static constexpr bool holds() {
    for (int q = 0; q < 4; ++q)
      if (token_of_row(2 * q) != 4 * q || token_of_row(2 * q + 1) != 4 * q + 1 ||
          token_of_row(2 * q + 8) != 4 * q + 2 || token_of_row(2 * q + 9) != 4 * q + 3)
        return false;
    int seen = 0;
    for (int r = 0; r < 16; ++r) seen |= 1 << token_of_row(r);
    return seen == 0xffff;
  }
};
static_assert(RowsOfCodes::holds(), "the code fragments' token order");

// The byte offset, in a K block of codes [D/16][16 tok][16], of the row lane `lane` gives the
// ldmatrix.x4 of k-steps 0 and 1 (add 512 per further pair): matrix i = lane / 8 is 16-dim group
// i / 2, S rows 8·(i & 1) .. + 7, so its row lane & 7 is token π(8·(i & 1) + (lane & 7)).
MUH_HOST_DEVICE constexpr int codes_k_row(int lane) {
  return (lane >> 4) * 256 + RowsOfCodes::token_of_row(((lane >> 3) & 1) * 8 + (lane & 7)) * 16;
}
// The first of the 4 dims (of a 16-dim group kk) whose q values lane (g, q) loads as its B
// fragment of Q for k-step kk: dims d, d + 1 are elements k = 2q, 2q + 1 (b0b1), d + 2, d + 3 are
// k = 2q + 8, 2q + 9 (b2b3) — the order of the code fragments below.
MUH_HOST_DEVICE constexpr int codes_q_dim(int kk, int q) { return 16 * kk + 4 * q; }
// An A fragment {a0a1, a2a3, a4a5, a6a7} of rows g, g + 8 from the two fp16 pairs each of those
// rows' 4 codes widen to: (low, high) of row g and of row g + 8.
template <class Pair>
MUH_HOST_DEVICE constexpr void codes_a_fragment(Pair (&a)[4], Pair g_low, Pair g_high, Pair g8_low, Pair g8_high) {
  a[0] = g_low;
  a[1] = g8_low;
  a[2] = g_high;
  a[3] = g8_high;
}
// ... and in a V block [D][16 tok], the row of the x4 over dims 0 .. 31 (Vᵀ's m-tiles 0 and 1;
// add 512 per further pair): dim `lane`.
MUH_HOST_DEVICE constexpr int codes_v_row(int lane) { return lane * 16; }
// The bytes of a lane's 4 codes (tokens 4q .. 4q + 3, byte i = token 4q + i) that are in range
// when `valid` tokens of the tile are: the rest are zeroed (a TMA box brings whole pages, whose
// other slots may hold NaN codes, and 0 · NaN would poison O).
MUH_HOST_DEVICE constexpr unsigned codes_in_range(int valid, int q) {
  const int n = valid - 4 * q;
  return n >= 4 ? 0xffffffffu : n <= 0 ? 0u : 0xffffffffu >> (32 - 8 * n);
}

// ---- NHD pages ([16 tok][D] codes a tile) ----------------------------------------------------
// The ring stage's K and V tiles: D/128 boxes of [16 tok][128 B] with the 128-byte swizzle (the
// TMA's CU_TENSOR_MAP_SWIZZLE_128B; the cp.async form lands its chunks the same way): 16-code
// chunk c of token t at box c / 8, row t, chunk (c % 8) ^ (t % 8). The 8 rows an ldmatrix phase
// reads (8 consecutive tokens of one chunk) then fall on 8 distinct 16-byte bank groups;
// unswizzled, rows D bytes apart would share one (8-way conflicts).
MUH_HOST_DEVICE constexpr int codes_nhd_offset(int t, int c) {  // in bytes
  return (c >> 3) * 2048 + t * 128 + (((c & 7) ^ (t & 7)) << 4);
}
// The row lane `lane` gives the x4 of chunks 2·k2, 2·k2 + 1 — K's k-steps (A fragments, rows =
// tokens) and Vᵀ's m-tiles (.trans) alike: matrix i = lane / 8 is chunk 2·k2 + i / 2, tokens
// 8·(i & 1) .. + 7. It repeats every 4 pairs (one box) at + 2048 bytes (codes_nhd_row_holds).
MUH_HOST_DEVICE constexpr int codes_nhd_row(int lane, int k2) {
  return codes_nhd_offset(((lane >> 3) & 1) * 8 + (lane & 7), 2 * k2 + (lane >> 4));
}
constexpr bool codes_nhd_row_holds(int head_dim) {
  for (int lane = 0; lane < 32; ++lane)
    for (int k2 = 0; k2 < head_dim / 32; ++k2)
      if (codes_nhd_row(lane, k2) != codes_nhd_row(lane, k2 % 4) + (k2 / 4) * 2048) return false;
  return true;
}
// ldmatrix .trans of 8 token rows gives lane (g, q) bytes (token 2q: dims 2g, 2g + 1; token
// 2q + 1: dims 2g, 2g + 1). Of the registers lo (tokens 0..7) and hi (8..15), the byte permutes
// below pick dim 2g's codes of tokens 2q, 2q + 1, 2q + 8, 2q + 9 and dim 2g + 1's (__byte_perm
// selectors: byte i of the result is byte (sel >> 4i) & 7 of hi:lo).
constexpr unsigned kNhdEvenDim = 0x6420u, kNhdOddDim = 0x7531u;
// Oᵀ's m-tile row r (16 dims of one chunk) is dim NhdCodeDims::dim_of_row(r) of them.
struct NhdCodeDims {
  MUH_HOST_DEVICE static constexpr int dim_of_row(int r) { return 2 * (r & 7) + (r >> 3); }
};
// The bytes of a lane's 4 permuted V codes (tokens 2q, 2q + 1, 2q + 8, 2q + 9) that are in range
// when `valid` tokens of the tile are.
MUH_HOST_DEVICE constexpr unsigned codes_in_range_in_order(int valid, int q) {
  return (2 * q < valid ? 0xffu : 0u) | (2 * q + 1 < valid ? 0xff00u : 0u) | (2 * q + 8 < valid ? 0xff0000u : 0u) |
         (2 * q + 9 < valid ? 0xff000000u : 0u);
}

}  // namespace muh::kernels::decode
