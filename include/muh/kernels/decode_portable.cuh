// kernels/decode_portable.cuh — the portable decode agent: plain CUDA C++ (no inline PTX, no
// async copies), fits 48 KB of shared memory, runs fp16 / bf16 / fp32. It is what the BI-V100
// profile (own arch) and the T4 rows run, and what the H200 runs when those targets are forced.
//
// One CTA = one (sequence, KV head, ≤ 16-query-head chunk, partition). Per tile of kTile tokens:
//   1. K, V tile → shared memory with 16-byte loads (synchronous); tokens past the range are 0
//   2. S = Q Kᵀ on CUDA cores: lane t of warp w scores token t against the rows r ≡ w (mod W)
//   3. online softmax: the same warp reduces its rows over the tile (base 2, scale folded in)
//   4. O = O·α + P V: each thread owns fixed (row, dim) slots of the 16 × D output
// V1 and V2 are this one kernel: a partition of one writes the output, several write partials.
#pragma once

#include "muh/kernels/decode_common.cuh"
#include "muh/kernels/warp_tile.cuh"
#include "muh/tuning/policy.hpp"

namespace muh::kernels::decode {

template <class Getter, DType DT, int D, bool kGuardInputs = true>
struct PortableTraits {
  using E = storage_t<DT>;
  static constexpr bool kGuard = kGuardInputs;  // the input guard (decode_common.cuh)
  static constexpr int kD = D;
  static constexpr DecodePolicy kPolicy = Getter{}();
  static constexpr int kWarps = kPolicy.num_warps;
  static constexpr int kThreads = tile32::kLanes * kWarps;  // num_warps counts 32-lane tiles
  static constexpr int kTile = kPolicy.tile_tokens;     // tokens per tile, one lane each
  static constexpr int kVec = 16 / int(sizeof(E));        // elements per 16-byte load
  static constexpr int kPerWord = 4 / int(sizeof(E));     // elements per 4-byte word
  static constexpr int kKStride = D + kPerWord;           // K row + one word: lanes hit distinct banks
  static constexpr int kRowsPerWarp = kRows / kWarps;
  static constexpr int kSlots = kRows * D / kThreads;     // output elements per thread
  // Shared memory, in bytes (decode_smem_bytes() in tuning/policy.hpp is the same sum).
  static constexpr int kOffK = 0;                                          // [kTile][kKStride] E
  static constexpr int kOffV = kOffK + kTile * kKStride * int(sizeof(E));  // [kTile][D] E
  static constexpr int kOffQ = kOffV + kTile * D * int(sizeof(E));         // [16][D] E
  static constexpr int kOffS = kOffQ + kRows * D * int(sizeof(E));         // [16][kTile] f32 scores → p
  static constexpr int kOffAlpha = kOffS + kRows * kTile * 4;              // [16] f32 rescale of this tile
  static constexpr int kOffM = kOffAlpha + kRows * 4;                      // [16] f32 running max (log2)
  static constexpr int kOffL = kOffM + kRows * 4;                          // [16] f32 running sum
  static constexpr int kSmemBytes = kOffL + kRows * 4;

  static_assert(kPolicy.agent == Agent::portable, "portable traits need a portable policy row");
  static_assert(validate(kPolicy, DT, D), "decode policy row does not fit its profile");
  static_assert(kSmemBytes == decode_smem_bytes(kPolicy, DT, D), "footprint differs from the table's");
  static_assert(kRows % kWarps == 0 && kTile <= tile32::kLanes && kTile % kVec == 0, "tile shape");
  static_assert(kOffV % 16 == 0 && kOffQ % 16 == 0 && kOffS % 16 == 0, "16-byte aligned tiles");
};

// One 4-byte word of K or Q (2 × 16-bit or 1 × fp32 elements) → floats.
__device__ __forceinline__ void word_to_float(const __half* p, float (&f)[2]) {
  const float2 x = __half22float2(*reinterpret_cast<const __half2*>(p));
  f[0] = x.x;
  f[1] = x.y;
}
__device__ __forceinline__ void word_to_float(const __nv_bfloat16* p, float (&f)[2]) {
  const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
  f[0] = x.x;
  f[1] = x.y;
}
__device__ __forceinline__ void word_to_float(const float* p, float (&f)[1]) { f[0] = *p; }

// bad_page (the guard): set when a block id read is outside [0, num_pages); page 0 is read instead.
template <class Tr, KVLayout L>
__device__ __forceinline__ void portable_load_kv_tile(const DecodeArgs& a, const CtaWork& w,
                                                      int t0, unsigned char* smem, bool& bad_page) {
  using E = typename Tr::E;
  constexpr int D = Tr::kD;
  E* sK = reinterpret_cast<E*>(smem + Tr::kOffK);
  E* sV = reinterpret_cast<E*>(smem + Tr::kOffV);
  const E* kc = static_cast<const E*>(a.k_cache);
  const E* vc = static_cast<const E*>(a.v_cache);
  const int* bt = a.block_table + static_cast<std::int64_t>(w.seq) * a.max_blocks;
  const int Hkv = a.num_kv_heads, ps = a.page_size;
  constexpr int kCPT = D / Tr::kVec;  // 16-byte chunks per token row
  // K (both layouts) and V (NHD): chunk (token t, dims c·kVec ..) is 16 contiguous bytes.
  for (int i = threadIdx.x; i < Tr::kTile * kCPT; i += Tr::kThreads) {
    const int t = i / kCPT, c = i % kCPT, tok = t0 + t;
    uint4 kx = make_uint4(0, 0, 0, 0), vx = make_uint4(0, 0, 0, 0);
    if (tok < w.kv_end) {
      const std::int64_t page = guarded_page<Tr::kGuard>(a, bt[tok >> a.page_shift], bad_page);
      const int slot = tok & (ps - 1);
      if constexpr (L == KVLayout::nhd) {
        const std::int64_t off = ((page * ps + slot) * Hkv + w.kv_head) * D + c * Tr::kVec;
        kx = *reinterpret_cast<const uint4*>(kc + off);
        vx = *reinterpret_cast<const uint4*>(vc + off);
      } else {
        const std::int64_t off = (((page * Hkv + w.kv_head) * kCPT + c) * ps + slot) * Tr::kVec;
        kx = *reinterpret_cast<const uint4*>(kc + off);
      }
    }
    // K rows are padded by one word: store word by word.
    unsigned* kdst = reinterpret_cast<unsigned*>(sK + t * Tr::kKStride + c * Tr::kVec);
    kdst[0] = kx.x;
    kdst[1] = kx.y;
    kdst[2] = kx.z;
    kdst[3] = kx.w;
    if constexpr (L == KVLayout::nhd) *reinterpret_cast<uint4*>(sV + t * D + c * Tr::kVec) = vx;
  }
  if constexpr (L == KVLayout::vllm) {
    // V [page][head][D][page_size]: chunk (dim d, tokens g·kVec ..) is 16 contiguous bytes of
    // one page (page_size is a multiple of kVec); transpose it into sV[t][d], zeros past the range.
    constexpr int kGroups = Tr::kTile / Tr::kVec;
    for (int i = threadIdx.x; i < D * kGroups; i += Tr::kThreads) {
      const int d = i / kGroups, g = i % kGroups, tok0 = t0 + g * Tr::kVec;
      uint4 vx = make_uint4(0, 0, 0, 0);
      if (tok0 < w.kv_end) {
        const std::int64_t page = guarded_page<Tr::kGuard>(a, bt[tok0 >> a.page_shift], bad_page);
        const int slot0 = tok0 & (ps - 1);
        vx = *reinterpret_cast<const uint4*>(vc + ((page * Hkv + w.kv_head) * D + d) * ps + slot0);
      }
      const E* ve = reinterpret_cast<const E*>(&vx);
#pragma unroll
      for (int j = 0; j < Tr::kVec; ++j)
        sV[(g * Tr::kVec + j) * D + d] = tok0 + j < w.kv_end ? ve[j] : from_float<E>(0.f);
    }
  }
}

template <class Tr, KVLayout L>
__global__ void __launch_bounds__(Tr::kThreads) decode_portable_kernel(const DecodeArgs a, int* input_errors) {
  using E = typename Tr::E;
  constexpr int D = Tr::kD;
  extern __shared__ __align__(16) unsigned char smem[];
  const E* sK = reinterpret_cast<const E*>(smem + Tr::kOffK);  // [kTile][kKStride]
  const E* sV = reinterpret_cast<E*>(smem + Tr::kOffV);          // [kTile][D]
  E* sQ = reinterpret_cast<E*>(smem + Tr::kOffQ);          // [16][D]
  float* sS = reinterpret_cast<float*>(smem + Tr::kOffS);  // [16][kTile]
  float* sAlpha = reinterpret_cast<float*>(smem + Tr::kOffAlpha);
  float* sM = reinterpret_cast<float*>(smem + Tr::kOffM);
  float* sL = reinterpret_cast<float*>(smem + Tr::kOffL);

  const CtaWork w = cta_work<Tr::kGuard>(a, input_errors);
  if (w.idle) return;
  bool bad_page = false;  // the guard: this thread met a block id outside [0, num_pages)
  const int tid = threadIdx.x, warp = tile32::index(tid), lane = tile32::lane(tid);
  constexpr Log2Units<> kUnits;  // scores in log2 units (scale_log2 applied below), exp2f

  // Q rows of this CTA → shared memory (rows past w.rows are zero), running state reset.
  {
    constexpr int kCPT = D / Tr::kVec;
    const E* q = static_cast<const E*>(a.q) + (static_cast<std::int64_t>(w.seq) * a.num_q_heads + w.head0) * D;
    for (int i = tid; i < kRows * kCPT; i += Tr::kThreads) {
      const int r = i / kCPT, c = i % kCPT;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (r < w.rows) x = *reinterpret_cast<const uint4*>(q + r * D + c * Tr::kVec);
      *reinterpret_cast<uint4*>(sQ + r * D + c * Tr::kVec) = x;
    }
    if (tid < kRows) {
      sM[tid] = -INFINITY;
      sL[tid] = 0.f;
    }
  }
  float o[Tr::kSlots];  // unnormalised O: slot s is element (idx / D, idx % D), idx = tid + s·kThreads
#pragma unroll
  for (int s = 0; s < Tr::kSlots; ++s) o[s] = 0.f;

  for (int t0 = w.kv_begin; t0 < w.kv_end; t0 += Tr::kTile) {
    __syncthreads();  // the previous tile's P V is done with sV / sS (and Q is in place)
    portable_load_kv_tile<Tr, L>(a, w, t0, smem, bad_page);
    __syncthreads();
    const int valid = min(Tr::kTile, w.kv_end - t0);

    // S = Q Kᵀ: lane = token, this warp's rows r = warp + j·W.
    float acc[Tr::kRowsPerWarp];
#pragma unroll
    for (int j = 0; j < Tr::kRowsPerWarp; ++j) acc[j] = 0.f;
    if (lane < Tr::kTile) {
      const E* krow = sK + lane * Tr::kKStride;
      for (int d = 0; d < D; d += Tr::kPerWord) {
        float kf[Tr::kPerWord];
        word_to_float(krow + d, kf);
#pragma unroll
        for (int j = 0; j < Tr::kRowsPerWarp; ++j) {
          float qf[Tr::kPerWord];
          word_to_float(sQ + (warp + j * Tr::kWarps) * D + d, qf);
#pragma unroll
          for (int i = 0; i < Tr::kPerWord; ++i) acc[j] += qf[i] * kf[i];
        }
      }
    }

    // Online softmax over this tile, one row at a time (all 32 lanes; lanes past the tile hold −inf).
    // The row's state lives in shared memory; lane 0 updates it.
#pragma unroll
    for (int j = 0; j < Tr::kRowsPerWarp; ++j) {
      const int r = warp + j * Tr::kWarps;
      const float s = lane < valid ? acc[j] * a.scale_log2 : -INFINITY;
      float mx = s;
      mx = tile32::reduce_max(mx);
      OnlineSoftmax st{sM[r]};
      const float m_new = st.max_with(mx);  // finite: the tile holds ≥ 1 token
      const float p = kUnits.weight(s, m_new);  // masked: 2^−inf = 0
      float sum = p;
      sum = tile32::reduce_sum(sum);
      if (lane < Tr::kTile) sS[r * Tr::kTile + lane] = p;
      tile32::sync();
      if (lane == 0) {
        const float alpha = st.rescale_to(m_new, kUnits);  // first tile: 2^−inf = 0
        sAlpha[r] = alpha;
        st.l = sL[r];
        st.accumulate(alpha, sum);
        sL[r] = st.l;
        sM[r] = st.m;
      }
    }
    __syncthreads();

    // O = O·α + P V over the valid tokens.
#pragma unroll
    for (int s = 0; s < Tr::kSlots; ++s) {
      const int idx = tid + s * Tr::kThreads, r = idx / D, d = idx % D;
      if (r < w.rows) {
        float x = o[s] * sAlpha[r];
        const float* p = sS + r * Tr::kTile;
        for (int t = 0; t < valid; ++t) x += p[t] * to_float(sV[t * D + d]);
        o[s] = x;
      }
    }
  }
  // The guard: did any thread meet a bad block id? Then the CTA's rows are dropped (a V1 row as
  // of length 0, a V2 partial poisoned for the merge), and its thread 0 flags it.
  bool poisoned = false;
  if constexpr (Tr::kGuard) {
    poisoned = __syncthreads_or(bad_page);
    if (poisoned && tid == 0) flag_input_error(input_errors, InputError::block_id);
  } else {
    __syncthreads();
  }

  // Epilogue: normalise and write the output (V1) or the (o, lse) partial (V2).
#pragma unroll
  for (int s = 0; s < Tr::kSlots; ++s) {
    const int idx = tid + s * Tr::kThreads, r = idx / D, d = idx % D;
    if (r >= w.rows) continue;
    const float l = sL[r];
    const float val[1] = {l > 0.f && !poisoned ? o[s] / l : 0.f};
    const int h = w.head0 + r;
    if (a.num_splits == 1)
      store_elems<E, 1>(out_row<E>(a, w.seq, h, D) + d, val);
    else
      store_elems<float, 1>(a.part_o + part_row(a, w, h) * D + d, val);
    if (d == 0) {  // the row's lse, computed by this thread alone
      const float lse = OnlineSoftmax{sM[r], l}.lse(kUnits);
      if (a.num_splits == 1) {
        if (a.lse != nullptr) *lse_slot(a, w.seq, h) = poisoned ? -INFINITY : lse;
      } else {
        a.part_lse[part_row(a, w, h)] = poisoned ? __uint_as_float(kPoisonedLseBits) : lse;
      }
    }
  }
}

}  // namespace muh::kernels::decode
