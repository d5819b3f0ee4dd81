// kernels/prefill_sm80_math.cuh — the tile math of the tensor-core prefill agents
// (prefill_sm80.cuh), one function per step of a key tile:
//   qk_gemm         S = Q Kᵀ: mma.sync m16n8k16 (sm75: two m16n8k8), fp32 accumulators; Q from
//                   registers (QFragments) or ldmatrix, K by ldmatrix
//   TileMask        −inf past the sequence end and above the causal diagonal
//   row_max         the tile's row maxima: the 4 lanes of a quad (2 shuffles) and, with warp
//                   pairs, the mate warp
//   softmax_rescale P = 2^(S·c − m·c) and the rescale of l and O, on online_softmax.hpp's state
//   pack_p          P to 16 bits, in the A-fragment layout (the S accumulator layout IS it)
//   pv_gemm         O += P V, V by ldmatrix.trans (a dim-major V tile: plain ldmatrix)
// and the epilogue: row_sums, stage_tile (O / l into sQ, and lse), store_piece (a split tail's
// fp32 partial). Fragments (sm80_ptx.cuh, mma_16816): lane = 4g + t holds rows g and g + 8 of
// each m16 tile, columns 2t, 2t + 1 of each n8 tile.
#pragma once

#include <cmath>
#include <cstdint>

#include "muh/kernels/online_softmax.hpp"
#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/prefill_sm80_tile.cuh"
#include "muh/kernels/sm80_ptx.cuh"
#include "muh/kernels/variant.cuh"

namespace muh::kernels {

// A warp's place: lane = 4g + t in the fragments; row block wm of the CTA, its half wn of a warp
// pair (0 without pairs); row0, its first row in the q tile.
struct Sm80Warp {
  int lane, g, t, wm, wn, row0;
};

// Warp pairs (Sh::kPairs): the two warps of row block wm meet at barrier 1 + wm (64 threads);
// their exchange areas: P halves as the A fragments each lane holds ([MT][KH][32 lanes] × 16
// bytes, so the partner's lane l reads exactly what lane l wrote), then [MT][2][8 rows] fp32
// row values (maxima, then sums). Without pairs every call does nothing.
template <class Sh>
struct WarpPair {
  unsigned char* x_own;
  const unsigned char* x_mate;
  float* xm_own;
  const float* xm_mate;
  int wm;
  __device__ __forceinline__ WarpPair(unsigned char* sX, int warp, int wm_)
      : x_own(sX + warp * Sh::kXWarpBytes),
        x_mate(sX + (warp ^ 1) * Sh::kXWarpBytes),
        xm_own(reinterpret_cast<float*>(x_own + 32 * Sh::BN)),
        xm_mate(reinterpret_cast<const float*>(x_mate + 32 * Sh::BN)),
        wm(wm_) {}
  __device__ __forceinline__ void sync() const {
    if constexpr (Sh::kPairs) sm80::named_barrier_sync(1 + wm, 64);
  }
  __device__ __forceinline__ void put_row(int mt, int hr, Sm80Warp w, float v) const {
    if constexpr (Sh::kPairs)
      if (w.t == 0) xm_own[(mt * 2 + hr) * 8 + w.g] = v;
  }
  __device__ __forceinline__ float mate_row(int mt, int hr, Sm80Warp w) const {
    return xm_mate[(mt * 2 + hr) * 8 + w.g];
  }
  __device__ __forceinline__ void put_p(int kk, int mt, int lane, const std::uint32_t (&p)[4]) const {
    if constexpr (Sh::kPairs)
      *reinterpret_cast<uint4*>(x_own + ((kk * Sh::MT + mt) * 32 + lane) * 16) = make_uint4(p[0], p[1], p[2], p[3]);
  }
  __device__ __forceinline__ void mate_p(int kk, int mt, int lane, std::uint32_t (&p)[4]) const {
    const uint4 v = *reinterpret_cast<const uint4*>(x_mate + ((kk * Sh::MT + mt) * 32 + lane) * 16);
    p[0] = v.x, p[1] = v.y, p[2] = v.z, p[3] = v.w;
  }
};

// ldmatrix row addresses (see Sm80LdmOffsets): lanes 8i..8i+7 address matrix i.
//   Q (A operand): matrices rows 0–7 / 8–15 × chunks 2kk / 2kk+1 → a0..a3
//   K (B of Q Kᵀ): keys 0–7 × chunk 2kk, 0–7 × 2kk+1, 8–15 × 2kk, 8–15 × 2kk+1 → b0,b1 of two n8
//                  tiles (b_ldm_pattern)
//   V (B of P V, .trans): keys 0–7 / 8–15 × chunk 2dp, then × 2dp+1 → b0,b1 of two d tiles
// A warp of a pair starts its K rows at key wn·BNW and its V columns at dim wn·DW (chunk
// wn·DW/8, a multiple of the swizzle group, so the XOR pattern is the same: a plain offset).
template <int D>
__device__ __forceinline__ Sm80LdmOffsets<D> q_ldm_pattern(int lane) { return {lane & 15, lane >> 4}; }
// A B operand read as it is stored, by the plain ldmatrix (K; a dim-major V tile, Sh::kVDimMajor:
// dims on the rows, its keys contiguous): matrices rows 0–7 × chunk 2kk, 0–7 × 2kk+1, 8–15 × 2kk,
// 8–15 × 2kk+1 → b0,b1 of two n8 tiles (for V: of d tiles 2dp, 2dp+1, the same registers as the
// .trans pattern below gives from a key-major tile). Offsets: the tile's layout — the swizzled
// row-major tile (Sm80LdmOffsets), K chunk-major (Sm80ChunkMajorOffsets), V in 16-key runs
// (Sm80VRunOffsets).
template <class Offsets>
__device__ __forceinline__ Offsets b_ldm_pattern(int lane) {
  return {(lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1};
}
template <int D>
__device__ __forceinline__ Sm80LdmOffsets<D> v_ldm_pattern(int lane) {
  return {(lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4};
}
// The body's K pattern for a shape: the swizzled row-major tile's, or a chunk-major tile's
// (Sh::kKChunkMajor).
template <class Sh>
__device__ __forceinline__ auto k_pattern(int lane) {
  if constexpr (Sh::kKChunkMajor)
    return b_ldm_pattern<Sm80ChunkMajorOffsets<Sh::BN>>(lane);
  else
    return b_ldm_pattern<Sm80LdmOffsets<Sh::kD>>(lane);
}
// The body's V pattern for a shape: the key-major tile's (.trans), or a dim-major tile's — in
// 16-key runs (Sh::kVRuns) or [D][BN], swizzled (an fp8 cache's).
template <class Sh>
__device__ __forceinline__ auto v_pattern(int lane) {
  if constexpr (Sh::kVRuns)
    return b_ldm_pattern<Sm80VRunOffsets<Sh::kD>>(lane);
  else if constexpr (Sh::kVDimMajor)
    return b_ldm_pattern<Sm80LdmOffsets<Sh::BN>>(lane);
  else
    return v_ldm_pattern<Sh::kD>(lane);
}

// Q's A fragments: held in registers (Sh::kQInRegs: qf, loaded once by preload() at the first
// key tile) or re-read from sQ (at q_base) at every k16 step. A view: the registers, the address
// and the pattern are the body's own variables (held as values here, ptxas numbered the O
// accumulators differently and the kernel's SASS changed).
template <class Sh>
struct QFragments {
  using Regs = std::uint32_t[Sh::kQInRegs ? Sh::MT : 1][Sh::kQInRegs ? Sh::KD : 1][4];
  Regs& qf;
  const std::uint32_t& base;
  const Sm80LdmOffsets<Sh::kD>& off;
  const int& row0;  // the warp's first row in the tile
  __device__ __forceinline__ void preload() const {
    if constexpr (Sh::kQInRegs) {
#pragma unroll
      for (int mt = 0; mt < Sh::MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < Sh::KD; ++kk) sm80::ldmatrix_x4(qf[mt][kk], base + off.at(row0 + mt * 16, kk));
    }
  }
  __device__ __forceinline__ void load(std::uint32_t (&dst)[Sh::MT][4], int kk) const {
#pragma unroll
    for (int mt = 0; mt < Sh::MT; ++mt) {
      if constexpr (Sh::kQInRegs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) dst[mt][e] = qf[mt][kk][e];
      } else {
        sm80::ldmatrix_x4(dst[mt], base + off.at(row0 + mt * 16, kk));
      }
    }
  }
};

// S = Q Kᵀ over this warp's keys of one key tile (K at k_base, its half included).
// The K fragments (and Q's, when they come from shared memory) are double-buffered: the
// ldmatrix of step (kk, np + 1) is issued before the MMAs of step (kk, np). Written as one
// fragment per step, the 128×64 hd-128 kernel at 255 registers reused one register quad for
// K, so each ldmatrix waited for the 4 MMAs before it to read the quad and the next 4 waited
// ~30 cycles for it: one warp alone issued Q Kᵀ at ~45 % of the tensor pipe (ncu, hd128 4k:
// 50 % of the warp stall samples on HMMAs, tensor pipe 55 % active; the SASS showed
// LDSM → 4 HMMA → LDSM on R192..R195). Same registers, no spills, bitwise the same output;
// A/B on the H200 in one process (2026-11-30, bench/results/h200-2026-11-30-c80d7a6.md): hd 128
// +5–6 % on every cell (4k 342 → 362, 16k 345 → 366 TFLOP/s), hd 256 +0.4 % (its warp-pair
// tile already had the loads ahead of the MMAs). The sm75 agent keeps one fragment per step:
// ahead, its hd-64 kernel spilled 8 bytes on sm_75 (0 before; -Xptxas -v).
// qa, kb: the fragment registers of Q and K, two of each (the caller's: declared here, ptxas
// numbered the O accumulators differently).
template <class Sh, class KOff>
__device__ __forceinline__ void qk_gemm(float (&s)[Sh::MT][Sh::NTL][4], std::uint32_t (&qa)[2][Sh::MT][4],
                                        std::uint32_t (&kb)[2][4], const QFragments<Sh>& q, std::uint32_t k_base,
                                        const KOff& k_off) {
  constexpr int MT = Sh::MT, KD = Sh::KD;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Sh::NTL; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
  constexpr bool kAhead = !Sh::kRegStage;
  constexpr int NP = Sh::NTL / 2;  // n16 key pairs of one k16 step: one K ldmatrix.x4 each
  if constexpr (kAhead) {
    q.load(qa[0], 0);
    sm80::ldmatrix_x4(kb[0], k_base + k_off.at(0, 0));
  }
#pragma unroll
  for (int kk = 0; kk < KD; ++kk) {
#pragma unroll
    for (int np = 0; np < NP; ++np) {
      // Matrices: keys np·16+0..7 / +8..15 × d chunks 2kk / 2kk+1 → b0,b1 of n8 tiles 2np, 2np+1.
      const int cur = (kk * NP + np) & 1;
      if constexpr (!kAhead) {
        if (np == 0) q.load(qa[kk & 1], kk);
        sm80::ldmatrix_x4(kb[cur], k_base + k_off.at(np * 16, kk));
      } else if (np + 1 < NP) {
        sm80::ldmatrix_x4(kb[cur ^ 1], k_base + k_off.at((np + 1) * 16, kk));
      } else if (kk + 1 < KD) {
        sm80::ldmatrix_x4(kb[cur ^ 1], k_base + k_off.at(0, kk + 1));
        q.load(qa[(kk + 1) & 1], kk + 1);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        sm80::mma_k16<Sh::kAgent, Sh::kDType>(s[mt][2 * np], qa[kk & 1][mt], kb[cur][0], kb[cur][1]);
        sm80::mma_k16<Sh::kAgent, Sh::kDType>(s[mt][2 * np + 1], qa[kk & 1][mt], kb[cur][2], kb[cur][3]);
      }
    }
  }
}

// The mask: only tiles crossing the sequence end or the causal diagonal get one.
template <class Sh>
struct TileMask {
  int m0, sq, sk;
  bool causal;
  __device__ __forceinline__ void apply(float (&s)[Sh::MT][Sh::NTL][4], int n0, Sm80Warp w) const {
    if (!tile_needs_mask(n0, Sh::BN, m0, sq, sk, causal)) return;
    // The row limits below are loop-invariant; hoisted out of the loop they held 2·MT
    // registers through it and spilled 8 bytes at 128×64 hd 128 (4 buffers). An opaque copy
    // of the first row keeps them here, on the ≤ 2 masked tiles of a CTA.
    int row_first = m0 + w.row0 + w.g;
    asm volatile("" : "+r"(row_first));
#pragma unroll
    for (int mt = 0; mt < Sh::MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        // Row qi sees keys j < limit; in tile coordinates, column nt·8 + (e & 1) of this lane
        // is key n0 + wn·BNW + 2t + nt·8 + (e & 1).
        const int qi = row_first + mt * 16 + hr * 8;
        const int limit = causal ? min(sk, (sk - sq) + qi + 1) : sk;
        const int lim = limit - n0 - w.wn * Sh::BNW - 2 * w.t;
#pragma unroll
        for (int nt = 0; nt < Sh::NTL; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (nt * 8 + e >= lim) s[mt][nt][2 * hr + e] = -INFINITY;
      }
  }
};

// The general variant kind's scores (kernels/variant.cuh): soft-cap and ALiBi on every score of
// the tile, then, on a tile that crosses a window edge, the causal diagonal or the sequence end,
// −inf for every key outside its row's range. In place of TileMask, which the plain kind keeps.
// A tile with no transform on and no edge in it returns at once. Without that exit its ~64
// scores a lane each took the per-score tests (ptxas specialises the loop on the switches, but
// each pair of scores still branches on ALiBi and the mask): with only sinks on, the general kind
// ran 1.28–1.34× the plain kernel's time at hd 128 (bench/results/h100-2026-12-06-variants.md).
// Testing the switches once per tile inside the loop instead (call4-per-tile-hooks.patch there)
// made ptxas spill and the soft-cap and ALiBi tiles 1.26–1.29× slower; this exit leaves their
// code as it was (the SASS of the loop is the same plus one branch, no spills at hd 128).
// Measured (H100, bench/results/h100-2026-12-06-prefill-exit-six-heads.md): sinks alone 1.11–1.37×
// → 0.95–1.13× the plain kernel, soft-cap and ALiBi unchanged (1.19–1.66×).
template <class Sh>
__device__ __forceinline__ void variant_logits_and_mask(float (&s)[Sh::MT][Sh::NTL][4], const VariantHead& vh, int m0,
                                                        int n0, Sm80Warp w) {
  const bool needs_mask = vh.tile_needs_mask(n0, Sh::BN, m0, Sh::BM);
  if (vh.v.cap_raw == 0.f && vh.slope_raw == 0.f && !needs_mask) return;
  // The rows' key ranges are loop-invariant over the key tiles: hoisted, they would hold 4·MT
  // registers through the main loop (as TileMask's limits would; see there). The opaque copy of
  // the first row keeps them here.
  int row_first = m0 + w.row0 + w.g;
  asm volatile("" : "+r"(row_first));
#pragma unroll
  for (int mt = 0; mt < Sh::MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      // Row qi; column nt·8 + (e & 1) of this lane is key n0 + wn·BNW + 2t + nt·8 + (e & 1).
      const int qi = row_first + mt * 16 + hr * 8;
      const KeyRange32 r = vh.keys(qi);
      const int j0 = n0 + w.wn * Sh::BNW + 2 * w.t;
#pragma unroll
      for (int nt = 0; nt < Sh::NTL; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = j0 + nt * 8 + e;
          float& x = s[mt][nt][2 * hr + e];
          x = vh.logit(x, qi, j);
          if (needs_mask && (j < r.lo || j >= r.hi)) x = -INFINITY;
        }
    }
}

// The tile's row maxima (lane holds rows g and g+8 of each m16 tile; a row's 2·NTL values per
// lane, the rest in the other 3 lanes of the quad — and, with pairs, in the mate warp).
template <class Sh>
__device__ __forceinline__ void row_max(const float (&s)[Sh::MT][Sh::NTL][4], float (&mx)[Sh::MT][2],
                                        const WarpPair<Sh>& pair, Sm80Warp w) {
#pragma unroll
  for (int mt = 0; mt < Sh::MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float m = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < Sh::NTL; ++nt) m = fmaxf(m, fmaxf(s[mt][nt][2 * hr], s[mt][nt][2 * hr + 1]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      mx[mt][hr] = m;
      pair.put_row(mt, hr, w, m);
    }
  if constexpr (Sh::kPairs) {
    pair.sync();  // both halves' maxima written (and, by the CTA barrier before Q Kᵀ, last tile's P read)
#pragma unroll
    for (int mt = 0; mt < Sh::MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) mx[mt][hr] = fmaxf(mx[mt][hr], pair.mate_row(mt, hr, w));
  }
}

// The softmax of one tile on the rows' online-softmax states (m in raw score units, the scale
// folded into each exponent: ScaledUnits). O and l are rescaled only when some row max of the
// warp grew by more than kRescaleSlack (log2 units; a warp-uniform branch). Otherwise every row
// keeps its running max m, also one this tile exceeded by less than the slack: its weights
// p = 2^(s·c − m·c) then reach at most 2^kRescaleSlack = 256, harmless in the fp32 sums and in
// 16-bit P, and the result is the same softmax (any m works as the stabiliser; l and lse use the
// same m). Invariant: the true running max stays ≤ m + slack, so no weight or factor exceeds
// 2^slack. A row's first visible tile always rescales (m = −inf). Skipping rescales only when no
// max grew at all still rescaled 67 % of the 64-key tiles at seq 4k (ncu: the FMULs' execution
// count), as a warp's 32 rows see new maxima often; with the slack only the first tiles of a row
// do, saving DTL·4 FMUL + 4·MT (FFMA + MUFU) per lane and tile (136 at hd 256). Measured on the
// H200 (same process as FA2, 4k / 4k causal / 16k / 16k causal TFLOP/s): hd128 355/331/366/351
// → 359/336/366/357, hd256 128×64 w8 313/300/328/319 → 314/304/326/327 (+0–2.5 %).
inline constexpr float kRescaleSlack = 8.f;

template <class Sh, class Units>
__device__ __forceinline__ void softmax_rescale(float (&s)[Sh::MT][Sh::NTL][4], const float (&mx)[Sh::MT][2],
                                                float (&row_m)[Sh::MT][2], float (&row_l)[Sh::MT][2],
                                                float (&o)[Sh::MT][Sh::DTL][4], const Units& units,
                                                float rescale_slack) {
  bool grew = false;
#pragma unroll
  for (int mt = 0; mt < Sh::MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) grew |= mx[mt][hr] > row_m[mt][hr] + rescale_slack;  // −inf + x = −inf
  const bool rescale = __any_sync(0xffffffffu, grew);
#pragma unroll
  for (int mt = 0; mt < Sh::MT; ++mt) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      OnlineSoftmaxView row{row_m[mt][hr], row_l[mt][hr]};
      const float m_new = rescale ? row.max_with(mx[mt][hr]) : row.m;
      const float mu = units.stabiliser(m_new);  // a row with nothing visible yet: 0, and p = 0
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < Sh::NTL; ++nt)
#pragma unroll
        for (int e = 2 * hr; e < 2 * hr + 2; ++e) {
          const float p = units.weight(s[mt][nt][e], mu);
          s[mt][nt][e] = p;
          sum += p;
        }
      if (rescale) {
        const float corr = row.factor(mu, units);  // m_old = −inf → 0
        row.accumulate(corr, sum);
#pragma unroll
        for (int dt = 0; dt < Sh::DTL; ++dt) {
          o[mt][dt][2 * hr] *= corr;
          o[mt][dt][2 * hr + 1] *= corr;
        }
      } else {
        row.accumulate(sum);
      }
      row.m = m_new;
    }
  }
}

// P (16-bit) from the S accumulators: the accumulator layout IS the A fragment layout.
// Packed for the whole tile before P V (and before a late copy is issued): the S registers
// die here, which keeps the 128×64 w4 hd-128 kernel within 255 registers (packing per k16
// step inside the P V loop spilled 12 bytes there). With pairs, this warp's half goes to the mate.
template <class Sh>
__device__ __forceinline__ void pack_p(std::uint32_t (&pa)[Sh::KH][Sh::MT][4], const float (&s)[Sh::MT][Sh::NTL][4],
                                       const WarpPair<Sh>& pair, int lane) {
  constexpr DType DT = Sh::kDType;
#pragma unroll
  for (int kk = 0; kk < Sh::KH; ++kk)
#pragma unroll
    for (int mt = 0; mt < Sh::MT; ++mt) {
      pa[kk][mt][0] = sm80::pack2<DT>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      pa[kk][mt][1] = sm80::pack2<DT>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      pa[kk][mt][2] = sm80::pack2<DT>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      pa[kk][mt][3] = sm80::pack2<DT>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      pair.put_p(kk, mt, lane, pa[kk][mt]);
    }
}

// O += P V over this warp's head dims (V at v_base, its half included): first the k16 steps of
// its own keys (P from registers), then, with pairs, the mate's (P from the exchange).
// A dim-major V tile (Sh::kVDimMajor) is read with the plain ldmatrix at row (this warp's first
// dim + 16·dp), key chunk pair key_row / 16; v_base is then the tile itself (no half added).
template <class Sh, class VOffsets>
__device__ __forceinline__ void pv_gemm(float (&o)[Sh::MT][Sh::DTL][4], const std::uint32_t (&pa)[Sh::KH][Sh::MT][4],
                                        std::uint32_t (&pm)[Sh::MT][4], std::uint32_t v_base, const VOffsets& v_off,
                                        const WarpPair<Sh>& pair, Sm80Warp w) {
  auto pv_step = [&](const std::uint32_t (&pk)[Sh::MT][4], int key_row) {
#pragma unroll
    for (int dp = 0; dp < Sh::DTL / 2; ++dp) {
      // Matrices: keys key_row+0..7 / +8..15 × d chunks 2dp / 2dp+1 → b0,b1 of d tiles 2dp, 2dp+1.
      std::uint32_t vb[4];
      if constexpr (Sh::kVDimMajor)
        sm80::ldmatrix_x4(vb, v_base + v_off.at(w.wn * Sh::DW + dp * 16, key_row / 16));
      else
        sm80::ldmatrix_x4<true>(vb, v_base + v_off.at(key_row, dp));
#pragma unroll
      for (int mt = 0; mt < Sh::MT; ++mt) {
        sm80::mma_k16<Sh::kAgent, Sh::kDType>(o[mt][2 * dp], pk[mt], vb[0], vb[1]);
        sm80::mma_k16<Sh::kAgent, Sh::kDType>(o[mt][2 * dp + 1], pk[mt], vb[2], vb[3]);
      }
    }
  };
#pragma unroll
  for (int kk = 0; kk < Sh::KH; ++kk) pv_step(pa[kk], w.wn * Sh::BNW + kk * 16);
  if constexpr (Sh::kPairs) {
    pair.sync();  // the mate's half of P is written
#pragma unroll
    for (int kk = 0; kk < Sh::KH; ++kk) {
#pragma unroll
      for (int mt = 0; mt < Sh::MT; ++mt) pair.mate_p(kk, mt, w.lane, pm[mt]);
      pv_step(pm, (w.wn ^ 1) * Sh::BNW + kk * 16);
    }
  }
}

// ---- Epilogue: O / l (0 for a row that saw no key), lse = scale·m + ln l (−inf then). ---------

// The rows' l, summed over the quad's lanes; with pairs each warp's l covers its half of the
// keys: the halves are added through the exchange (both warps used the same maxima, so the sums
// share one scale).
template <class Sh>
__device__ __forceinline__ void row_sums(float (&l_row)[Sh::MT][2], const float (&row_l)[Sh::MT][2],
                                         const WarpPair<Sh>& pair, Sm80Warp w) {
#pragma unroll
  for (int mt = 0; mt < Sh::MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float l = row_l[mt][hr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      l_row[mt][hr] = l;
      pair.put_row(mt, hr, w, l);
    }
  if constexpr (Sh::kPairs) {
    pair.sync();
#pragma unroll
    for (int mt = 0; mt < Sh::MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) l_row[mt][hr] += pair.mate_row(mt, hr, w);
  }
}

// A piece of a split tail tile: o / l and lse, fp32, straight from the fragments into its
// workspace slot (4 lanes write 32 contiguous bytes of a row), for the merge kernel.
template <class Sh, class Units>
__device__ __forceinline__ void store_piece(float* piece_o, float* piece_lse, const float (&o)[Sh::MT][Sh::DTL][4],
                                            const float (&row_m)[Sh::MT][2], const float (&l_row)[Sh::MT][2],
                                            const Units& units, int m0, int sq, Sm80Warp w, float v_scale = 1.f) {
#pragma unroll
  for (int mt = 0; mt < Sh::MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const OnlineSoftmax row(row_m[mt][hr], l_row[mt][hr]);
      float inv = row.inv_l();
      if constexpr (Sh::kFp8) inv *= v_scale;  // an fp8 cache's V dequantisation
      const int r = w.row0 + mt * 16 + w.g + hr * 8;
      if (m0 + r >= sq) continue;
      if (w.t == 0 && w.wn == 0) piece_lse[r] = row.lse(units);
#pragma unroll
      for (int dt = 0; dt < Sh::DTL; ++dt)
        *reinterpret_cast<float2*>(piece_o + r * Sh::kD + w.wn * Sh::DW + dt * 8 + 2 * w.t) =
            make_float2(o[mt][dt][2 * hr] * inv, o[mt][dt][2 * hr + 1] * inv);
    }
}

// A whole tile, first step: lse, and O / l into this warp's own rows (and, with pairs, head dims)
// of sQ, from where the caller stores whole 16-byte chunks (its own code: as a function or a
// lambda, that loop's addressing compiled differently and the SASS changed).
// vh (the general variant kind): the row's sink joins the denominator here (fold_sink).
template <class Sh, class Units>
__device__ __forceinline__ void stage_tile(const PrefillArgs& a, const TileCoord& tc, int q_off, int m0, int sq,
                                           typename Sh::T* sQ, const float (&o)[Sh::MT][Sh::DTL][4],
                                           const float (&row_m)[Sh::MT][2], const float (&l_row)[Sh::MT][2],
                                           const Units& units, Sm80Warp w, const VariantHead* vh = nullptr,
                                           float v_scale = 1.f) {
  using Swz = Sm80Swizzle<Sh::kD>;
#pragma unroll
  for (int mt = 0; mt < Sh::MT; ++mt) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const OnlineSoftmax row(row_m[mt][hr], l_row[mt][hr]);
      float inv = row.inv_l();
      const int r = w.row0 + mt * 16 + w.g + hr * 8;
      if (vh != nullptr) {
        float lse;
        vh->finish(row.lse(units), inv, &inv, &lse);
        if (a.lse != nullptr && w.t == 0 && w.wn == 0 && m0 + r < sq) *lse_slot(a, tc.h, q_off, m0, r) = lse;
      } else if (a.lse != nullptr && w.t == 0 && w.wn == 0 && m0 + r < sq) {
        *lse_slot(a, tc.h, q_off, m0, r) = row.lse(units);
      }
      if constexpr (Sh::kFp8) inv *= v_scale;  // an fp8 cache's V dequantisation (lse is the scores')
#pragma unroll
      for (int dt = 0; dt < Sh::DTL; ++dt)
        *reinterpret_cast<std::uint32_t*>(sQ + Swz::offset(r, w.wn * Sh::DTL + dt) + 2 * w.t) =
            sm80::pack2<Sh::kDType>(o[mt][dt][2 * hr] * inv, o[mt][dt][2 * hr + 1] * inv);
    }
  }
}

}  // namespace muh::kernels
