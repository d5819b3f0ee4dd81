// kernels/prefill_portable.cuh — the portable prefill agent: plain CUDA C++ (no inline PTX, no
// cp.async, one synchronous stage), for the BI-V100 profile (Iluvatar's compiler takes CUDA C++,
// not NVIDIA PTX) and every profile whose rows fall back to it (fp32 everywhere, sm_75).
//
// K/V come from a source (template parameter): contiguous varlen tensors, or a paged cache in
// either layout (kernels/prefill_kv.cuh; only the K/V copies differ) holding q's type or fp8
// codes (muh/kv_quant.hpp: each 8-code load widened to q's 16-bit type on its way into shared
// memory, exactly — kernels/fp8_widen.cuh — so the tiles and the math are the 16-bit cache's;
// k_scale is in the softmax scale, v_scale applied to O in the epilogue).
// Shared memory is exactly prefill_smem_bytes() of policy.hpp: the Q tile and one K and one V
// tile, (block_m + 2·block_n)·head_dim·elem — the seed's 32×32 tile at hd 256 in 16-bit is
// (32 + 64)·256·2 = 48 KB. Scores and O stay in registers:
//   a row of the q tile belongs to TPR = threads / block_m adjacent lanes; lane c of the row
//   computes the scores of keys c, c+TPR, … and owns the O columns of 16-byte vectors c, c+TPR, …
//   S = Q Kᵀ        fp32 FMAs from shared memory
//   online softmax  row max / sum over the TPR lanes (shuffles), exp2f with the scale in log2(e)
//   O += P V        each p broadcast from its owner lane by a shuffle, V rows from shared memory
// Tiles are stored with each row's 16-byte vectors rotated by the row index, so the lanes of a
// warp that read the same column of different rows hit different banks.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "muh/kernels/fp8_widen.cuh"
#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/prefill_kv.cuh"
#include "muh/kernels/variant.cuh"
#include "muh/kernels/warp_tile.cuh"
#include "muh/tuning/policy.hpp"

namespace muh::kernels {

template <class T>
struct PortableVec {
  static constexpr int kElems = 16 / sizeof(T);  // elements per 16-byte vector: 8 (16-bit), 4 (fp32)
  __device__ __forceinline__ static void unpack(const uint4& x, float (&f)[kElems]) {
    const T* e = reinterpret_cast<const T*>(&x);
#pragma unroll
    for (int i = 0; i < kElems; ++i) f[i] = to_float(e[i]);
  }
  __device__ __forceinline__ static uint4 pack(const float (&f)[kElems], float scale) {
    uint4 x;
    T* e = reinterpret_cast<T*>(&x);
#pragma unroll
    for (int i = 0; i < kElems; ++i) e[i] = from_float<T>(f[i] * scale);
    return x;
  }
};

// Rows [0, ROWS) of a tile (row r at src + r·ld vectors) → shared memory, rotated; rows >= valid
// become zeros.
template <int ROWS, int NV, int NT>
__device__ __forceinline__ void portable_load_tile(uint4* dst, const uint4* src, long long ld, int valid, int tid) {
  for (int idx = tid; idx < ROWS * NV; idx += NT) {
    const int r = idx / NV, v = idx % NV;
    dst[r * NV + (v + r) % NV] = r < valid ? src[r * ld + v] : make_uint4(0u, 0u, 0u, 0u);
  }
}

// One tile vector (16 bytes of T) from a cache of element type KV at src: the 16 bytes themselves,
// or (an fp8 cache) 8 codes in one 8-byte load, widened exactly (fp8_widen.cuh).
template <class T, KVDType KV, class C>
__device__ __forceinline__ uint4 portable_cache_vector(const C* src) {
  if constexpr (is_fp8(KV)) {
    static_assert(sizeof(C) == 1 && sizeof(T) == 2, "fp8 codes widened to fp16 / bf16");
    return widen_fp8x8<KV, T>(*reinterpret_cast<const uint2*>(src));
  } else {
    static_assert(std::is_same_v<C, T>, "a 16-bit / fp32 cache holds the tile's type");
    return *reinterpret_cast<const uint4*>(src);
  }
}

// Paged K or V (kernels/prefill_kv.cuh): rows [0, ROWS) of the tile from key n0 → shared memory
// in portable_load_tile's layout; rows >= valid become zeros (the slots past a sequence's last key
// in its last page are never used, whatever they hold). T: the tile's element type; KV: the
// cache's (muh/kv_quant.hpp), whose elements C are T's or 1-byte fp8 codes. A tile vector is VE
// elements of T, read by portable_cache_vector: NHD gives VE dims of one key; the vLLM key pages
// give them as part of a 16-byte chunk of x = kX elements (the whole chunk for q's type, half of
// it for fp8 codes, x = 16); the vLLM value pages are token-minor, so there a thread loads VE
// consecutive slots of one dim — all in one page since page_size and n0 are multiples of VE — and
// scatters them down the tile's rows (a transposing copy).
template <int ROWS, int NV, int NT, class T, KVDType KV = KVDType::same, class C, KVLayout L>
__device__ __forceinline__ void portable_load_paged(uint4* dst, const PagedKvRows<C, L>& kv, bool value, int n0,
                                                    int valid, int tid) {
  constexpr int VE = 16 / static_cast<int>(sizeof(T));
  constexpr int kPerChunk = PagedKvRows<C, L>::kX / VE;  // tile vectors per vLLM key chunk: 1, or 2 (fp8)
  if constexpr (L == KVLayout::vllm) {
    if (value) {
      static_assert(ROWS % VE == 0, "a tile holds whole groups of VE slots");
      constexpr int G = ROWS / VE;  // slot groups of the tile
      T* d_el = reinterpret_cast<T*>(dst);
      for (int idx = tid; idx < NV * VE * G; idx += NT) {
        const int d = idx / G, r0 = (idx % G) * VE;  // neighbouring threads: neighbouring slots of one dim
        uint4 x = make_uint4(0u, 0u, 0u, 0u);
        if (r0 < valid) {
          int slot;
          const long long page = kv.page_of(n0 + r0, &slot);
          x = portable_cache_vector<T, KV>(kv.v + page + static_cast<long long>(d) * kv.page_size + slot);
        }
        const T* e = reinterpret_cast<const T*>(&x);
#pragma unroll
        for (int i = 0; i < VE; ++i) {
          const int r = r0 + i;
          d_el[(r * NV + (d / VE + r) % NV) * VE + d % VE] = r < valid ? e[i] : from_float<T>(0.f);
        }
      }
      return;
    }
  }
  for (int idx = tid; idx < ROWS * NV; idx += NT) {
    // vLLM keys: slots fastest (vector v of neighbouring slots is contiguous); NHD: dims fastest.
    const int r = L == KVLayout::vllm ? idx % ROWS : idx / NV, v = L == KVLayout::vllm ? idx / ROWS : idx % NV;
    uint4 x = make_uint4(0u, 0u, 0u, 0u);
    if (r < valid) {
      int slot;
      const long long page = kv.page_of(n0 + r, &slot);
      const C* src = L == KVLayout::nhd
                         ? kv.base(value) + page + slot * kv.ldk + v * VE
                         : kv.k + page + (static_cast<long long>(v / kPerChunk) * kv.page_size + slot) * kv.kX +
                               (v % kPerChunk) * VE;
      x = portable_cache_vector<T, KV>(src);
    }
    dst[r * NV + (v + r) % NV] = x;
  }
}

// The agent's body: one q tile of one (sequence, q head), K/V from source S (contiguous: a and
// its cu_seqlens_k; paged: pkv, kernels/prefill_kv.cuh). Var: the variant kind
// (kernels/variant.cuh); with PlainVariant every hook is compiled out. KV: a paged cache's element
// type (fp8: plain kind, fp16 / bf16 q — host checks).
template <class Getter, DType DT, int D, KVSource S, class Var = PlainVariant, KVDType KV = KVDType::same>
__device__ __forceinline__ void prefill_portable_body(const PrefillArgs& a, const PrefillPagedKV& pkv,
                                                      const Var& var = Var{}) {
  using T = storage_t<DT>;
  using C = std::conditional_t<is_fp8(KV), std::uint8_t, T>;  // a cache element
  static_assert(!is_fp8(KV) || (is_paged(S) && sizeof(T) == 2), "fp8: paged, 16-bit q");
  using Vec = PortableVec<T>;
  constexpr PrefillPolicy P = Getter{}();
  constexpr int BM = P.block_m, BN = P.block_n, NT = tile32::kLanes * P.num_warps;  // num_warps counts 32-lane tiles
  static_assert(P.num_stages == 1, "the portable agent has one synchronous stage");
  static_assert(NT % BM == 0, "threads must be a multiple of block_m");
  constexpr int TPR = NT / BM;  // lanes per query row
  static_assert(tile32::kGroupWidth<TPR>, "lanes per row: a power of two <= 32, so a row's lanes share one tile");
  constexpr int VE = Vec::kElems;
  static_assert(D % VE == 0, "head_dim must fill 16-byte vectors");
  constexpr int NV = D / VE;  // 16-byte vectors per row
  static_assert(NV % TPR == 0 && BN % TPR == 0, "row lanes must split head_dim and block_n evenly");
  constexpr int OV = NV / TPR;  // O vectors per lane
  constexpr int SJ = BN / TPR;  // scores per lane per key tile
  // Exactly the footprint the tables are checked with (48 KB for the seed's tiles).
  static_assert((BM + 2 * BN) * NV * 16 == prefill_smem_bytes(P, DT, D), "footprint != policy.hpp");

  extern __shared__ uint4 prefill_portable_smem[];
  uint4* sQ = prefill_portable_smem;  // [BM][NV]
  uint4* sK = sQ + BM * NV;           // [BN][NV]
  uint4* sV = sK + BN * NV;           // [BN][NV]

  const int tid = threadIdx.x;
  const int r = tid / TPR, c = tid % TPR;  // query row of the tile, lane within the row
  const TileCoord tc = tile_of(blockIdx.x, a);
  constexpr bool kPaged = is_paged(S);
  if (!prefill_sequence_ok<!kPaged>(a, tc.b)) return;  // the input guard (prefill_common.cuh)
  const int q_off = a.cu_seqlens_q[tc.b], sq = a.cu_seqlens_q[tc.b + 1] - q_off;
  const int m0 = tc.m_block * BM;
  if (m0 >= sq) return;
  if constexpr (kPaged)
    if (!paged_sequence_ok(pkv, tc.b, a.max_seqlen_k, a.input_errors)) return;  // (prefill_kv.cuh)
  const int k_off = kPaged ? 0 : a.cu_seqlens_k[tc.b];
  const int sk = kPaged ? paged_kv_len(pkv, tc.b) : a.cu_seqlens_k[tc.b + 1] - k_off;
  const int kvh = tc.h / a.group;
  const long long ldq = static_cast<long long>(a.num_q_heads) * NV;  // in vectors
  const long long ldk = static_cast<long long>(a.num_kv_heads) * NV;
  const uint4* gQ = static_cast<const uint4*>(a.q) + (q_off + m0) * ldq + static_cast<long long>(tc.h) * NV;
  const uint4* gK = static_cast<const uint4*>(a.k) + k_off * ldk + static_cast<long long>(kvh) * NV;
  const uint4* gV = static_cast<const uint4*>(a.v) + k_off * ldk + static_cast<long long>(kvh) * NV;
  // The key tiles [kt_begin, n_tiles) this q tile visits: with a window, those it reaches.
  int kt_begin = 0, n_tiles = (visible_keys(m0, BM, sq, sk, a.causal) + BN - 1) / BN;
  [[maybe_unused]] const auto vh = make_variant_head(var, tc.h, sq, sk);
  if constexpr (Var::kOn) vh.template key_tiles<BN>(m0, BM, &kt_begin, &n_tiles);
  PagedKvRows<C, paged_layout(S)> paged;
  if constexpr (kPaged) paged = PagedKvRows<C, paged_layout(S)>::template make<D>(pkv, tc.b, kvh);

  portable_load_tile<BM, NV, NT>(sQ, gQ, ldq, sq - m0, tid);

  float o[OV][VE];
#pragma unroll
  for (int ov = 0; ov < OV; ++ov)
#pragma unroll
    for (int e = 0; e < VE; ++e) o[ov][e] = 0.f;
  OnlineSoftmax run;  // the row's running max (raw score units) and this lane's partial sum
  const ScaledUnits<> units{a.scale_log2, a.scale};

  for (int tile = kt_begin; tile < n_tiles; ++tile) {
    const int n0 = tile * BN;
    __syncthreads();  // the previous tile's K/V are no longer read
    if constexpr (kPaged) {
      portable_load_paged<BN, NV, NT, T, KV>(sK, paged, false, n0, sk - n0, tid);
      portable_load_paged<BN, NV, NT, T, KV>(sV, paged, true, n0, sk - n0, tid);
    } else {
      portable_load_tile<BN, NV, NT>(sK, gK + n0 * ldk, ldk, sk - n0, tid);
      portable_load_tile<BN, NV, NT>(sV, gV + n0 * ldk, ldk, sk - n0, tid);
    }
    __syncthreads();

    // S = Q Kᵀ for keys c, c + TPR, ...
    float s[SJ];
#pragma unroll
    for (int jj = 0; jj < SJ; ++jj) s[jj] = 0.f;
#pragma unroll 4
    for (int v = 0; v < NV; ++v) {
      float qv[VE];
      Vec::unpack(sQ[r * NV + (v + r) % NV], qv);
#pragma unroll
      for (int jj = 0; jj < SJ; ++jj) {
        const int j = c + TPR * jj;
        float kv[VE];
        Vec::unpack(sK[j * NV + (v + j) % NV], kv);
#pragma unroll
        for (int e = 0; e < VE; ++e) s[jj] = fmaf(qv[e], kv[e], s[jj]);
      }
    }
    if constexpr (Var::kOn) {
      // Soft-cap and ALiBi on every score, then the window's (and the causal / end) mask.
#pragma unroll
      for (int jj = 0; jj < SJ; ++jj) s[jj] = vh.logit(s[jj], m0 + r, n0 + c + TPR * jj);
      if (vh.tile_needs_mask(n0, BN, m0, BM)) {
#pragma unroll
        for (int jj = 0; jj < SJ; ++jj)
          if (vh.masked(m0 + r, n0 + c + TPR * jj)) s[jj] = -INFINITY;
      }
    } else if (tile_needs_mask(n0, BN, m0, sq, sk, a.causal)) {
#pragma unroll
      for (int jj = 0; jj < SJ; ++jj)
        if (key_masked(m0 + r, n0 + c + TPR * jj, sq, sk, a.causal)) s[jj] = -INFINITY;
    }

    // Online softmax over the row's TPR lanes.
    float mx = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < SJ; ++jj) mx = fmaxf(mx, s[jj]);
    mx = tile32::reduce_max<TPR>(mx);
    const float m_new = run.max_with(mx);
    const float mu = units.stabiliser(m_new);
    const float corr = run.factor(mu, units);
    run.m = m_new;
    float sum = 0.f;
#pragma unroll
    for (int jj = 0; jj < SJ; ++jj) {
      s[jj] = units.weight(s[jj], mu);
      sum += s[jj];
    }
    run.accumulate(corr, sum);
#pragma unroll
    for (int ov = 0; ov < OV; ++ov)
#pragma unroll
      for (int e = 0; e < VE; ++e) o[ov][e] *= corr;

    // O += P V: p of key j lives in lane j % TPR of the row, slot j / TPR.
#pragma unroll
    for (int j = 0; j < BN; ++j) {
      const float p = tile32::broadcast<TPR>(s[j / TPR], j % TPR);
#pragma unroll
      for (int ov = 0; ov < OV; ++ov) {
        const int v = c + TPR * ov;
        float vv[VE];
        Vec::unpack(sV[j * NV + (v + j) % NV], vv);
#pragma unroll
        for (int e = 0; e < VE; ++e) o[ov][e] = fmaf(p, vv[e], o[ov][e]);
      }
    }
  }

  // Epilogue: O / l (0 for a row that saw no key), lse = scale·m + ln l (−inf then); a sink
  // joins the denominator here, once (variant.hpp, fold_sink).
  run.l = tile32::reduce_sum<TPR>(run.l);
  if (m0 + r < sq) {
    float inv = run.inv_l();
    if constexpr (is_fp8(KV)) inv *= pkv.v_scale;  // V = code · v_scale, once on O
    [[maybe_unused]] float lse = 0.f;
    if constexpr (Var::kOn) vh.finish(run.lse(units), inv, &inv, &lse);
    uint4* gO = static_cast<uint4*>(a.out) + (q_off + m0 + r) * ldq + static_cast<long long>(tc.h) * NV;
#pragma unroll
    for (int ov = 0; ov < OV; ++ov) gO[c + TPR * ov] = Vec::pack(o[ov], inv);
    if (a.lse != nullptr && c == 0) {
      if constexpr (Var::kOn) *lse_slot(a, tc.h, q_off, m0, r) = lse;
      else *lse_slot(a, tc.h, q_off, m0, r) = run.lse(units);
    }
  }
}

template <class Getter, DType DT, int D>
__global__ void __launch_bounds__(Getter{}().num_warps * tile32::kLanes)
    prefill_portable_kernel(const PrefillArgs a) {
  prefill_portable_body<Getter, DT, D, KVSource::contiguous>(a, PrefillPagedKV{});
}

// The general variant kind (kernels/variant.cuh), K/V from source S (contiguous: pkv unused), a
// paged cache's elements of type KV.
template <class Getter, DType DT, int D, KVSource S, KVDType KV = KVDType::same>
__global__ void __launch_bounds__(Getter{}().num_warps * tile32::kLanes)
    prefill_portable_variant_kernel(const PrefillArgs a, const PrefillPagedKV pkv, const VariantArgs v) {
  prefill_portable_body<Getter, DT, D, S, GeneralVariant, KV>(a, pkv, GeneralVariant{v});
}

// K/V from a paged cache (S: paged_nhd or paged_vllm) of element type KV.
template <class Getter, DType DT, int D, KVSource S, KVDType KV = KVDType::same>
__global__ void __launch_bounds__(Getter{}().num_warps * tile32::kLanes)
    prefill_portable_paged_kernel(const PrefillArgs a, const PrefillPagedKV pkv) {
  static_assert(is_paged(S), "the contiguous source runs prefill_portable_kernel");
  prefill_portable_body<Getter, DT, D, S, PlainVariant, KV>(a, pkv);
}

}  // namespace muh::kernels
