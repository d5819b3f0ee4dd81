// tests/cpu/test_fp8_fragments.cpp — kernels/fp8_fragments.hpp's index math, replayed on the CPU:
// HeadsOnNCodes (decode_sm80.cuh) computes Sᵀ = K Qᵀ and Oᵀ += Vᵀ Pᵀ from ldmatrix reads of code
// rows, and the result must be the attention of the tile's tokens whatever order its fragments
// take them in. A model of the documented semantics (PTX ISA: ldmatrix .m8n8 .x4 .b16 — lanes
// 8i .. 8i + 7 give the row addresses of matrix i, lane l receives row l/4, 16-bit elements
// 2(l%4), 2(l%4) + 1 of each; mma .m16n8k16 fragments a0..a7, b0..b3, c0..c3; movmatrix .trans),
// not of any hardware; the values stand in for the widened codes (the widening is elementwise and
// keeps the order: fp8_widen.cuh). Also the V codes' range mask. The same for NHD pages: the
// swizzled ring, ldmatrix .trans (lane l receives rows 2(l%4), 2(l%4) + 1, 16-bit column l/4) and
// the byte permutes (prmt: byte i of the result is byte (sel >> 4i) & 7 of hi:lo).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "muh/kernels/fp8_fragments.hpp"

namespace {

using muh::kernels::decode::codes_a_fragment;
using muh::kernels::decode::codes_in_range;
using muh::kernels::decode::codes_in_range_in_order;
using muh::kernels::decode::codes_k_row;
using muh::kernels::decode::codes_nhd_offset;
using muh::kernels::decode::codes_nhd_row;
using muh::kernels::decode::codes_nhd_row_holds;
using muh::kernels::decode::kNhdEvenDim;
using muh::kernels::decode::kNhdOddDim;
using muh::kernels::decode::NhdCodeDims;
using muh::kernels::decode::codes_q_dim;
using muh::kernels::decode::codes_v_row;
using muh::kernels::decode::RowsOfCodes;

constexpr int kD = 256;  // head dim (any multiple of 32)

// A lane's register of 4 codes: the values of bytes 4q .. 4q + 3 of one matrix row.
using Reg = std::array<double, 4>;
using Regs = std::array<std::array<Reg, 4>, 32>;  // [lane][matrix]

// ldmatrix .x4 over a byte-addressed memory of values: row address of matrix i from lane 8i + j.
template <class Addr>
Regs ldmatrix_x4(const std::vector<double>& mem, Addr addr_of_lane) {
  Regs r{};
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 32; ++l) {
      const int row = addr_of_lane(8 * i + l / 4) + 4 * (l % 4);
      for (int b = 0; b < 4; ++b) r[l][i][b] = mem[row + b];
    }
  return r;
}

// ldmatrix .x4 .trans: lane l receives, of each matrix, 16-bit column l/4 of rows 2(l%4) and
// 2(l%4) + 1 — bytes (row 2q: 2g, 2g + 1), (row 2q + 1: 2g, 2g + 1).
template <class Addr>
Regs ldmatrix_x4_trans(const std::vector<double>& mem, Addr addr_of_lane) {
  Regs r{};
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, q = l % 4;
      for (int b = 0; b < 4; ++b) r[l][i][b] = mem[addr_of_lane(8 * i + 2 * q + b / 2) + 2 * g + b % 2];
    }
  return r;
}
// prmt: byte i of the result is byte (sel >> 4i) & 7 of hi:lo.
Reg byte_perm(const Reg& lo, const Reg& hi, unsigned sel) {
  Reg out{};
  for (int i = 0; i < 4; ++i) {
    const unsigned b = (sel >> (4 * i)) & 7u;
    out[i] = b < 4 ? lo[b] : hi[b - 4];
  }
  return out;
}

// One lane's m16n8k16 operands as value pairs: A {a0a1, a2a3, a4a5, a6a7}, B {b0b1, b2b3}.
struct Pair {
  double x, y;
};
struct LaneA {
  Pair a[4];
};
struct LaneB {
  Pair b[2];
};
// HeadsOnNCodes::widen_a: the A fragment of rows g, g + 8 from the registers of rows g and g + 8,
// each widened to its (low, high) pairs.
LaneA widen_a(const Reg& row_g, const Reg& row_g8) {
  LaneA a;
  codes_a_fragment(a.a, Pair{row_g[0], row_g[1]}, Pair{row_g[2], row_g[3]}, Pair{row_g8[0], row_g8[1]},
                   Pair{row_g8[2], row_g8[3]});
  return a;
}
// C[16×8] += A B from the 32 lanes' fragments.
void mma(double (&c)[16][8], const std::array<LaneA, 32>& a, const std::array<LaneB, 32>& b) {
  double A[16][16] = {}, B[16][8] = {};
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, q = l % 4;
    const Pair* p = a[l].a;
    A[g][2 * q] = p[0].x, A[g][2 * q + 1] = p[0].y;
    A[g + 8][2 * q] = p[1].x, A[g + 8][2 * q + 1] = p[1].y;
    A[g][2 * q + 8] = p[2].x, A[g][2 * q + 9] = p[2].y;
    A[g + 8][2 * q + 8] = p[3].x, A[g + 8][2 * q + 9] = p[3].y;
    B[2 * q][g] = b[l].b[0].x, B[2 * q + 1][g] = b[l].b[0].y;
    B[2 * q + 8][g] = b[l].b[1].x, B[2 * q + 9][g] = b[l].b[1].y;
  }
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k) c[m][n] += A[m][k] * B[k][n];
}

struct Tile {
  std::vector<double> K, V, Q;    // K, V [16 tok][D], Q [8 heads][D]
  std::vector<double> kmem, vmem;  // the ring stage: K [D/16][16 tok][16], V [D][16 tok]
  std::vector<double> nk, nv;      // NHD pages' ring stage: K, V swizzled (codes_nhd_offset)
};
Tile make_tile(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tile t{std::vector<double>(16 * kD), std::vector<double>(16 * kD), std::vector<double>(8 * kD),
         std::vector<double>(16 * kD), std::vector<double>(16 * kD), std::vector<double>(16 * kD, NAN),
         std::vector<double>(16 * kD, NAN)};
  for (auto* v : {&t.K, &t.V, &t.Q})
    for (double& x : *v) x = u(rng);
  for (int tok = 0; tok < 16; ++tok)
    for (int d = 0; d < kD; ++d) {
      t.kmem[(d / 16) * 256 + tok * 16 + d % 16] = t.K[tok * kD + d];
      t.vmem[d * 16 + tok] = t.V[tok * kD + d];
      t.nk[codes_nhd_offset(tok, d / 16) + d % 16] = t.K[tok * kD + d];
      t.nv[codes_nhd_offset(tok, d / 16) + d % 16] = t.V[tok * kD + d];
    }
  return t;
}

// Sᵀ as HeadsOnNCodes::scores computes it from a K ring `mem` whose x4 of k-step pair k2 takes
// its rows from row_of(lane, k2): row r, head n.
template <class RowOf>
void codes_scores(const Tile& t, const std::vector<double>& mem, RowOf row_of, double (&s)[16][8]) {
  for (auto& row : s)
    for (double& x : row) x = 0;
  for (int k2 = 0; k2 < kD / 32; ++k2) {
    const Regs r = ldmatrix_x4(mem, [&](int lane) { return row_of(lane, k2); });
    for (int h = 0; h < 2; ++h) {
      const int kk = 2 * k2 + h;
      std::array<LaneA, 32> a;
      std::array<LaneB, 32> b;
      for (int l = 0; l < 32; ++l) {
        const int g = l / 4, q = l % 4;
        a[l] = widen_a(r[l][2 * h], r[l][2 * h + 1]);
        const double* qd = &t.Q[g * kD + codes_q_dim(kk, q)];  // load_q: 4 dims of head g
        b[l] = LaneB{{{qd[0], qd[1]}, {qd[2], qd[3]}}};
      }
      mma(s, a, b);
    }
  }
}

TEST(Fp8Fragments, ScoresRowRIsTokenPiOfR) {
  const Tile t = make_tile(1);
  double s[16][8];
  codes_scores(t, t.kmem, [](int lane, int k2) { return codes_k_row(lane) + k2 * 512; }, s);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      double ref = 0;
      for (int d = 0; d < kD; ++d) ref += t.K[RowsOfCodes::token_of_row(r) * kD + d] * t.Q[n * kD + d];
      EXPECT_NEAR(s[r][n], ref, 1e-9) << "S row " << r << " head " << n;
    }
}

// Oᵀ += Vᵀ Pᵀ with Pᵀ's B fragments from S rows (HeadsOnN's movmatrix of the packed S pairs:
// lane (g, q) holds S rows 2q, 2q + 1 (and + 8) of head g): O must be Σ_r P[r] · V[π(r)].
TEST(Fp8Fragments, OutputWeighsTokenPiOfRByRowR) {
  const Tile t = make_tile(2);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  double P[16][8];
  for (auto& row : P)
    for (double& x : row) x = u(rng);
  std::array<LaneB, 32> pb;
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, q = l % 4;
    pb[l] = LaneB{{{P[2 * q][g], P[2 * q + 1][g]}, {P[8 + 2 * q][g], P[9 + 2 * q][g]}}};
  }
  for (int p = 0; p < kD / 32; ++p) {
    const Regs r = ldmatrix_x4(t.vmem, [&](int lane) { return codes_v_row(lane) + p * 512; });
    for (int h = 0; h < 2; ++h) {
      std::array<LaneA, 32> a;
      for (int l = 0; l < 32; ++l) a[l] = widen_a(r[l][2 * h], r[l][2 * h + 1]);
      double o[16][8] = {};  // Oᵀ of m-tile 2p + h: dims 16(2p + h) .. + 15
      mma(o, a, pb);
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
          const int d = 16 * (2 * p + h) + m;
          double ref = 0;
          for (int row = 0; row < 16; ++row) ref += P[row][n] * t.V[RowsOfCodes::token_of_row(row) * kD + d];
          EXPECT_NEAR(o[m][n], ref, 1e-9) << "dim " << d << " head " << n;
        }
    }
  }
}

TEST(Fp8Fragments, TokenOrderIsAPermutationTheCodesShare) {
  // (RowsOfCodes::holds() — π a permutation in the code order — is a static_assert of the header.)
  // A lane's 4 V codes (byte i = token 4q + i) are fragment elements 2q, 2q + 1, 2q + 8, 2q + 9.
  for (int q = 0; q < 4; ++q) {
    EXPECT_EQ(RowsOfCodes::token_of_row(2 * q), 4 * q);
    EXPECT_EQ(RowsOfCodes::token_of_row(2 * q + 9), 4 * q + 3);
  }
  // The x4 row addresses: 16-byte aligned, inside the K block's two 16-dim groups, each S row once.
  int seen = 0;
  for (int lane = 0; lane < 32; ++lane) {
    const int a = codes_k_row(lane);
    EXPECT_EQ(a % 16, 0);
    EXPECT_LT(a, 512);
    seen |= 1 << (lane >> 4) * 16 + (a % 256) / 16;
  }
  EXPECT_EQ(static_cast<unsigned>(seen), 0xffffffffu);
}

// Bytes kept of a lane's 4 V codes (tokens 4q .. 4q + 3) for each count of tokens in range.
TEST(Fp8Fragments, VCodesPastTheRangeAreZeroed) {
  for (int valid = 1; valid <= 16; ++valid)
    for (int q = 0; q < 4; ++q) {
      const unsigned keep = codes_in_range(valid, q);
      for (int b = 0; b < 4; ++b)
        EXPECT_EQ((keep >> (8 * b)) & 0xffu, 4 * q + b < valid ? 0xffu : 0u) << valid << " " << q << " " << b;
    }
}

// ---- NHD pages --------------------------------------------------------------------------------

// The swizzled ring is a one-to-one map of the tile's codes (make_tile left no NAN slot), and
// each ldmatrix phase (8 row addresses of one matrix) touches 8 distinct 16-byte bank groups.
TEST(Fp8Fragments, NhdRingIsABijectionAndConflictFree) {
  const Tile t = make_tile(4);
  for (double x : t.nk) EXPECT_FALSE(std::isnan(x));
  EXPECT_TRUE(codes_nhd_row_holds(kD));
  EXPECT_TRUE(codes_nhd_row_holds(128));
  for (int k2 = 0; k2 < kD / 32; ++k2)
    for (int i = 0; i < 4; ++i) {
      int banks = 0;
      for (int j = 0; j < 8; ++j) {
        const int a = codes_nhd_row(8 * i + j, k2);
        EXPECT_EQ(a % 16, 0);
        banks |= 1 << (a % 128) / 16;
      }
      EXPECT_EQ(banks, 0xff) << "k2 " << k2 << " matrix " << i;
    }
}

// Sᵀ from the NHD ring: row r is token r.
TEST(Fp8Fragments, NhdScoresAreInTokenOrder) {
  const Tile t = make_tile(5);
  double s[16][8];
  codes_scores(t, t.nk, codes_nhd_row, s);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      double ref = 0;
      for (int d = 0; d < kD; ++d) ref += t.K[r * kD + d] * t.Q[n * kD + d];
      EXPECT_NEAR(s[r][n], ref, 1e-9) << "S row " << r << " head " << n;
    }
}

// Oᵀ from the NHD ring: .trans, the byte permutes, the range mask; m-tile row m is dim
// NhdCodeDims::dim_of_row(m) of its chunk, and O = Σ_r P[r] V[r] over the tokens in range.
TEST(Fp8Fragments, NhdOutputFromTransposedCodes) {
  Tile t = make_tile(6);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int valid : {16, 11, 1}) {
    // Slots past the range hold NaN (a TMA box brings the whole page); P is 0 there (masked S).
    std::vector<double> nv = t.nv;
    for (int tok = valid; tok < 16; ++tok)
      for (int d = 0; d < kD; ++d) nv[codes_nhd_offset(tok, d / 16) + d % 16] = NAN;
    double P[16][8];
    for (int r = 0; r < 16; ++r)
      for (int n = 0; n < 8; ++n) P[r][n] = r < valid ? u(rng) : 0.0;
    std::array<LaneB, 32> pb;
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, q = l % 4;
      pb[l] = LaneB{{{P[2 * q][g], P[2 * q + 1][g]}, {P[8 + 2 * q][g], P[9 + 2 * q][g]}}};
    }
    for (int p = 0; p < kD / 32; ++p) {
      const Regs r = ldmatrix_x4_trans(nv, [&](int lane) { return codes_nhd_row(lane, p); });
      for (int h = 0; h < 2; ++h) {
        std::array<LaneA, 32> a;
        for (int l = 0; l < 32; ++l) {
          const unsigned keep = codes_in_range_in_order(valid, l % 4);
          Reg ev = byte_perm(r[l][2 * h], r[l][2 * h + 1], kNhdEvenDim);
          Reg od = byte_perm(r[l][2 * h], r[l][2 * h + 1], kNhdOddDim);
          for (int b = 0; b < 4; ++b) {
            if (((keep >> (8 * b)) & 0xffu) == 0) ev[b] = od[b] = 0.0;  // the AND with keep
          }
          a[l] = widen_a(ev, od);
        }
        double o[16][8] = {};
        mma(o, a, pb);
        for (int m = 0; m < 16; ++m)
          for (int n = 0; n < 8; ++n) {
            const int d = 16 * (2 * p + h) + NhdCodeDims::dim_of_row(m);
            double ref = 0;
            for (int row = 0; row < valid; ++row) ref += P[row][n] * t.V[row * kD + d];
            ASSERT_FALSE(std::isnan(o[m][n])) << "valid " << valid << " dim " << d;
            EXPECT_NEAR(o[m][n], ref, 1e-9) << "valid " << valid << " dim " << d << " head " << n;
          }
      }
    }
  }
  // NhdCodeDims is a permutation of a chunk's 16 dims.
  int seen = 0;
  for (int m = 0; m < 16; ++m) seen |= 1 << NhdCodeDims::dim_of_row(m);
  EXPECT_EQ(seen, 0xffff);
}

// Bytes kept of a lane's 4 permuted NHD V codes (tokens 2q, 2q + 1, 2q + 8, 2q + 9).
TEST(Fp8Fragments, NhdVCodesPastTheRangeAreZeroed) {
  for (int valid = 1; valid <= 16; ++valid)
    for (int q = 0; q < 4; ++q) {
      const unsigned keep = codes_in_range_in_order(valid, q);
      const int tok[4] = {2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9};
      for (int b = 0; b < 4; ++b)
        EXPECT_EQ((keep >> (8 * b)) & 0xffu, tok[b] < valid ? 0xffu : 0u) << valid << " " << q << " " << b;
    }
}

}  // namespace
