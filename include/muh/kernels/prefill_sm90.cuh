// kernels/prefill_sm90.cuh — the Hopper prefill agent (Agent::sm90, sm_90a code only): TMA loads
// into 128-byte-swizzled shared memory, wgmma for both GEMMs, warp specialisation.
//
// One CTA computes O for block_m (128) query rows of one (sequence, q head); three warp groups:
//   producer (warp group 0, 24 registers a thread): one thread issues every TMA load — Q once,
//            then the key tiles' K and V into a ring of num_stages (K, V) buffer pairs, each
//            buffer with a "full" mbarrier (the TMA's transaction bytes) and each pair an
//            "empty" one (the consumers' arrivals when their PV of it is done);
//   consumers (warp groups 1 and 2, 240 registers): 64 query rows each, per key tile
//      S = Q Kᵀ        wgmma m64n{block_n}k16, Q and K from shared memory (K-major), D/16 steps
//      mask            only on tiles that cross the sequence end or the causal diagonal
//      online softmax  row max / sum over the 4 lanes of a quad, exp2 with the scale folded in,
//                      O rescaled in registers
//      O += P V        wgmma m64n{D}k16, P from registers (the S accumulators, packed to 16
//                      bits, are the A fragment), V from shared memory (N-major)
// The two consumer groups run on the same K/V buffers without a fixed order, so one's softmax
// overlaps the other's GEMMs wherever the schedulers interleave them.
// Key tiles go from the last to the first, as in the sm80 agent, so the masked tiles come first.
//
// The tiles' layout is the TMA's: Q [D/64 panels][block_m rows][128 B], K and V [D/64][block_n]
// [128 B], each panel 1024-byte aligned (sm90_ptx.cuh says how wgmma reads them). The maps are
// 3-D over (dims, heads, rows) of the whole q / k / v tensors, so a box that runs past its
// sequence reads the next sequence's rows (masked: their scores are −inf, their weights 0) or,
// past the tensor, zeros. V rows past the sequence are zeroed in shared memory before PV reads
// them, so that a NaN or Inf there (another sequence's data) cannot reach O through 0 · Inf.
//
// The epilogue stages O / l through the warp group's own Q rows (its last QKᵀ has completed) and
// writes whole 16-byte chunks of the rows inside the sequence; lse [num_q_heads, total_q] as the
// other agents.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cmath>
#include <cstdint>

#include "muh/kernels/online_softmax.hpp"
#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/sm80_ptx.cuh"
#include "muh/kernels/sm90_ptx.cuh"
#include "muh/tuning/policy.hpp"

namespace muh::kernels {

// The shape a policy gives the sm90 body.
template <class Getter, DType DT, int D>
struct Sm90PrefillShape {
  static constexpr PrefillPolicy kPolicy = Getter{}();
  using T = std::conditional_t<DT == DType::bf16, __nv_bfloat16, __half>;
  static constexpr int BM = kPolicy.block_m, BN = kPolicy.block_n, S = kPolicy.num_stages;
  static constexpr int kConsumers = kPolicy.num_warps / 4 - 1;  // warp groups of 64 rows
  static constexpr int kThreads = kPolicy.num_warps * 32;
  static constexpr int kPanels = D / 64;
  static constexpr int kQPanel = BM * 128, kKVPanel = BN * 128;  // bytes of one 64-dim panel
  static constexpr int kQBytes = BM * D * 2, kKVBytes = BN * D * 2;
  // Shared memory: Q, then per stage K and V; the mbarriers after them.
  static constexpr int kBarOffset = kQBytes + 2 * S * kKVBytes;
  static_assert(DT == DType::fp16 || DT == DType::bf16, "the sm90 agent multiplies 16-bit inputs");
  static_assert(D % 64 == 0 && D <= 256, "the sm90 agent's tiles are whole 64-dim panels, N <= 256");
  static_assert(BM == 64 * kConsumers, "one consumer warp group per 64 q rows");
  static_assert(BN % 16 == 0 && (BN == 64 || BN == 128), "key tiles of 64 or 128 (the wgmma forms generated)");
  static_assert(BN <= 256 && BM <= 256, "a TMA box has at most 256 rows");
  static_assert(prefill_smem_bytes(kPolicy, DT, D) == kBarOffset + 8 * (1 + 3 * S) + 1024,
                "prefill_smem_bytes (policy.hpp) is this layout plus the 1024-byte alignment slack");
};

// The three tensor maps of one launch (built on the host, prefill_sm90_launch.cuh).
struct Sm90PrefillMaps {
  CUtensorMap q, k, v;
};

template <class Getter, DType DT, int D>
__device__ __forceinline__ void prefill_sm90_body(const PrefillArgs& a, const Sm90PrefillMaps& maps) {
  using Sh = Sm90PrefillShape<Getter, DT, D>;
  constexpr int BM = Sh::BM, BN = Sh::BN, S = Sh::S;
  extern __shared__ __align__(1024) unsigned char prefill_sm90_smem[];
  // The panels need 1024-byte alignment (the swizzle pattern repeats every 8 rows of 128 bytes).
  const std::uint32_t raw = sm80::smem_addr(prefill_sm90_smem);
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* const smem = prefill_sm90_smem + (base - raw);
  const std::uint32_t sQ = base;
  auto sK = [&](int s) { return base + Sh::kQBytes + static_cast<std::uint32_t>(2 * s * Sh::kKVBytes); };
  auto sV = [&](int s) { return sK(s) + static_cast<std::uint32_t>(Sh::kKVBytes); };
  const std::uint32_t bar_q = base + Sh::kBarOffset;
  auto bar_k = [&](int s) { return bar_q + 8u * (1 + s); };
  auto bar_v = [&](int s) { return bar_q + 8u * (1 + S + s); };
  auto bar_empty = [&](int s) { return bar_q + 8u * (1 + 2 * S + s); };

  const int tid = threadIdx.x;
  const TileCoord tc = tile_of(blockIdx.x, a);
  if (!prefill_sequence_ok(a, tc.b)) return;  // the input guard (prefill_common.cuh)
  const int q_off = a.cu_seqlens_q[tc.b], sq = a.cu_seqlens_q[tc.b + 1] - q_off;
  const int m0 = tc.m_block * BM;
  if (m0 >= sq) return;  // a short sequence of a varlen batch: nothing here
  const int k_off = a.cu_seqlens_k[tc.b], sk = a.cu_seqlens_k[tc.b + 1] - k_off;
  const int kvh = tc.h / a.group;
  const int kt_end = (visible_keys(m0, BM, sq, sk, a.causal) + BN - 1) / BN;  // key tiles kt_end − 1 … 0

  if (tid == 0) {
    sm90::mbar_init(bar_q, 1);
    for (int s = 0; s < S; ++s) {
      sm90::mbar_init(bar_k(s), 1);
      sm90::mbar_init(bar_v(s), 1);
      sm90::mbar_init(bar_empty(s), 4 * Sh::kConsumers);  // one arrival per consumer warp
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();

  const int wg = tid / 128;
  if (wg == 0) {
    // ---- Producer: one thread issues every load ------------------------------------------------
    sm90::setmaxnreg_dec<24>();
    if (tid == 0 && kt_end > 0) {
      sm90::mbar_arrive_expect_tx(bar_q, Sh::kQBytes);
#pragma unroll
      for (int p = 0; p < Sh::kPanels; ++p) sm90::tma_load_3d(sQ + p * Sh::kQPanel, &maps.q, bar_q, 64 * p, tc.h, q_off + m0);
      for (int i = 0; i < kt_end; ++i) {
        const int s = i % S;
        if (i >= S) sm90::mbar_wait(bar_empty(s), ((i / S) - 1) & 1);  // the consumers' PV of tile i − S is done
        const int row = k_off + (kt_end - 1 - i) * BN;
        sm90::mbar_arrive_expect_tx(bar_k(s), Sh::kKVBytes);
#pragma unroll
        for (int p = 0; p < Sh::kPanels; ++p) sm90::tma_load_3d(sK(s) + p * Sh::kKVPanel, &maps.k, bar_k(s), 64 * p, kvh, row);
        sm90::mbar_arrive_expect_tx(bar_v(s), Sh::kKVBytes);
#pragma unroll
        for (int p = 0; p < Sh::kPanels; ++p) sm90::tma_load_3d(sV(s) + p * Sh::kKVPanel, &maps.v, bar_v(s), 64 * p, kvh, row);
      }
    }
    return;
  }

  // ---- Consumers ---------------------------------------------------------------------------------
  sm90::setmaxnreg_inc<240>();
  const int c = wg - 1;                        // this group's rows: [64c, 64c + 64) of the tile
  const int lt = tid % 128, lane = tid % 32;
  const int r_lo = 64 * c + 16 * (lt / 32) + lane / 4;  // this thread's rows r_lo and r_lo + 8
  const int col = 2 * (lane % 4);                        // its columns col, col + 1 of each 8
  const int m0c = m0 + 64 * c;

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.f, 0.f};
  const ScaledUnits<sm80::Exp2Approx> units{a.scale_log2, a.scale};

  if (kt_end > 0) sm90::mbar_wait(bar_q, 0);
  for (int i = 0; i < kt_end; ++i) {
    const int s = i % S;
    const std::uint32_t parity = (i / S) & 1;
    const int n0 = (kt_end - 1 - i) * BN;  // the key tile's first key (sequence-relative)

    // S = Q Kᵀ
    float sc[BN / 2];
    sm90::mbar_wait(bar_k(s), parity);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const std::uint32_t in_panel = (kk % 4) * 32;
      sm90::wgmma_ss<DT, BN>(sc, sm90::desc_k_major(sQ + (kk / 4) * Sh::kQPanel + 64 * c * 128 + in_panel),
                             sm90::desc_k_major(sK(s) + (kk / 4) * Sh::kKVPanel + in_panel), kk > 0);
    }
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_operands(sc);

    // mask: the tile's keys past the sequence, and (causal) those above the diagonal
    if (tile_needs_mask(n0, BN, m0c, sq, sk, a.causal)) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (key_masked(m0 + r_lo + (e >> 1) * 8, n0 + 8 * j + col + (e & 1), sq, sk, a.causal)) sc[4 * j + e] = -INFINITY;
    }

    // online softmax: the rows' max over the quad, P = 2^(S·c − m·c), O and l rescaled
    float mx[2] = {row_m[0], row_m[1]};
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      mx[0] = fmaxf(mx[0], fmaxf(sc[4 * j], sc[4 * j + 1]));
      mx[1] = fmaxf(mx[1], fmaxf(sc[4 * j + 2], sc[4 * j + 3]));
    }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
      mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
    }
    float mu[2], factor[2], sum[2] = {0.f, 0.f};
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      mu[hr] = units.stabiliser(mx[hr]);            // a row with nothing visible yet: 0, and p = 0
      factor[hr] = units.factor(row_m[hr], mu[hr]);  // m_old = −inf → 0
      row_m[hr] = mx[hr];
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = units.weight(sc[4 * j + e], mu[e >> 1]);
        sc[4 * j + e] = p;
        sum[e >> 1] += p;
      }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) row_l[hr] = row_l[hr] * factor[hr] + sum[hr];
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[4 * j + e] *= factor[e >> 1];

    // P to 16 bits: k16 step kk takes the S columns 16kk .. 16kk + 15 (n8 blocks 2kk, 2kk + 1)
    std::uint32_t pa[BN / 16][4];
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pa[kk][0] = sm80::pack2<DT>(sc[8 * kk + 0], sc[8 * kk + 1]);
      pa[kk][1] = sm80::pack2<DT>(sc[8 * kk + 2], sc[8 * kk + 3]);
      pa[kk][2] = sm80::pack2<DT>(sc[8 * kk + 4], sc[8 * kk + 5]);
      pa[kk][3] = sm80::pack2<DT>(sc[8 * kk + 6], sc[8 * kk + 7]);
    }

    // O += P V
    sm90::mbar_wait(bar_v(s), parity);
    if (n0 + BN > sk) {
      // The rows past the sequence (its last tile, i == 0): zeros, written by both groups
      // together, made visible to wgmma's async reads before either multiplies.
      const int first = sk - n0 > 0 ? sk - n0 : 0;
      unsigned char* v = smem + (sV(s) - base);
      const int chunks = (BN - first) * Sh::kPanels * 8;  // 16-byte chunks of the rows [first, BN)
      for (int x = tid - 128; x < chunks; x += 128 * Sh::kConsumers) {
        const int p = x / ((BN - first) * 8), rest = x % ((BN - first) * 8);
        *reinterpret_cast<uint4*>(v + p * Sh::kKVPanel + (first + rest / 8) * 128 + (rest % 8) * 16) =
            make_uint4(0, 0, 0, 0);
      }
      sm90::fence_proxy_async();
      sm90::named_barrier_sync(1, 128 * Sh::kConsumers);
    }
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      sm90::wgmma_rs<DT, D>(o, pa[kk], sm90::desc_mn_major(sV(s) + kk * 16 * 128, Sh::kKVPanel), 1);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_operands(o);
    if (lane == 0) sm90::mbar_arrive(bar_empty(s));  // this warp is done with the pair
  }

  // ---- Epilogue: O / l through this group's Q rows, then whole 16-byte chunks to out ---------------
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    row_l[hr] += __shfl_xor_sync(0xffffffffu, row_l[hr], 1);
    row_l[hr] += __shfl_xor_sync(0xffffffffu, row_l[hr], 2);
  }
  using T = typename Sh::T;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const OnlineSoftmax row(row_m[hr], row_l[hr]);
    const float inv = row.inv_l();
    const int r = r_lo + 8 * hr;
    if (a.lse != nullptr && lane % 4 == 0 && m0 + r < sq) *lse_slot(a, tc.h, q_off, m0, r) = row.lse(units);
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const int p = j / 8, chunk = (j % 8) ^ (r % 8);  // the 128-byte swizzle of the panel
      *reinterpret_cast<std::uint32_t*>(smem + p * Sh::kQPanel + r * 128 + chunk * 16 + col * 2) =
          sm80::pack2<DT>(o[4 * j + 2 * hr] * inv, o[4 * j + 2 * hr + 1] * inv);
    }
  }
  sm90::named_barrier_sync(2 + c, 128);  // this group's rows are staged
  const long long ldq = static_cast<long long>(a.num_q_heads) * D;
  T* gO = static_cast<T*>(a.out) + (q_off + m0) * ldq + static_cast<long long>(tc.h) * D;
  constexpr int kRowChunks = D / 8;
#pragma unroll 4
  for (int x = lt; x < 64 * kRowChunks; x += 128) {
    const int r = 64 * c + x / kRowChunks, ch = x % kRowChunks;
    const int p = ch / 8, chunk = (ch % 8) ^ (r % 8);
    if (m0 + r < sq)
      *reinterpret_cast<uint4*>(gO + r * ldq + ch * 8) =
          *reinterpret_cast<const uint4*>(smem + p * Sh::kQPanel + r * 128 + chunk * 16);
  }
}

// CTA i computes q tile i (tile_of order) whole. Compiled for sm_90a only (CMake's muh_sm90a
// objects); an empty body anywhere else.
template <class Getter, DType DT, int D>
__global__ void __launch_bounds__(Getter{}().num_warps * 32, 1)
    prefill_sm90_kernel(const PrefillArgs a, const __grid_constant__ Sm90PrefillMaps maps) {
#if MUH_SM90A_PTX
  prefill_sm90_body<Getter, DT, D>(a, maps);
#endif
}

}  // namespace muh::kernels
