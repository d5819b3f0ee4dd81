// kernels/decode_portable.cuh — the portable decode agent: plain CUDA C++ (no inline PTX of its
// own, no async copies, no tensor cores), fits 48 KB of shared memory, runs fp16 / bf16 / fp32
// caches and fp8 ones (e4m3 / e5m2 codes with fp16 / bf16 q: each code widened to fp32 as it is
// used, the same arithmetic after it). It is what the BI-V100 profile (own arch) and the T4 rows
// run, and what the H200 runs when those targets are forced. Cross-lane operations only through
// kernels/warp_tile.cuh (32-lane tiles).
//
// One CTA = one (sequence, KV head, ≤ 16-query-head chunk, partition), as decode_common.cuh
// schedules it; its query heads are taken kPassRows (8) at a time, each pass one sweep over the
// partition's K/V (the seed's 4 and 6 query heads per KV head: one pass). Per tile of kTile (32)
// tokens, with the NEXT tile's K and V already on their way into registers:
//   1. partial scores: lane t of tile w scores token t against the pass's query heads over the
//      w-th slice of head_dim, straight from its own 16-byte K loads (q from shared memory,
//      fp32, one broadcast per 4 dims and head); the slices' sums go to shared memory;
//   2. online softmax: tile r (one per query head) adds the slices, scales to log2 units and
//      updates the head's running max and sum; p and the rescale factor go to shared memory;
//   3. O = O·α + P V: each thread accumulates, in fp32 registers, the pass's query heads over its
//      own 16-byte V loads: (token group, 8 dims) in NHD, (token group, 1 dim) in vLLM's layout;
//   and at the end the token groups' O are added in a fixed order and combine_and_store
//   (decode_common.cuh) normalises and writes the output (V1) or the (o, lse) partial (V2).
// Why this shape (issue 18; the kernel before it reached 0.02–0.05 of the read floor on 16 SMs,
// bench/results/h200-2026-12-01-20d64c7/): it staged each tile in shared memory with
// synchronous loads (16 KB per CTA in flight, then nothing while it computed), computed all 16
// MMA rows for 4 live heads (4× the FMAs) and converted one element per FMA. Here:
//   * bytes in flight: a whole tile (32 tokens · 2 · 512 B = 32 KB at hd 256 fp16) is loading
//     during the previous tile's math, and K and V go straight to the registers that use them;
//   * FMAs per K/V element: one per live query head (the CTA's other MMA rows are skipped), the
//     element converted once and reused from a register by every head. A GQA-4 decode needs 2
//     FMAs per byte; the other instructions are one conversion per element, one q broadcast per
//     4 FMAs (step 1) or one p load per 4–8 (step 3), the loads and their addresses: the tile
//     loop is 840 instructions at 4 heads in the vLLM layout (sm_90 SASS), 257 of them FMAs;
//   * fp32 FMAs, not packed half2 ones: with half2 products summed in fp16 over runs of 8, the
//     score error at hd 256 (estimated ~5e-4 in log units for |q| ≤ 2) would be ~3× the p
//     rounding of the tests' naive reference (tol = 2 × its error, check/decode_case.hpp), and
//     at short lengths a score error moves the output by as much: no margin. With fp32 sums,
//     half2 products save nothing (each pair needs two conversions and two adds). Every dtype
//     takes the same path.
// Measured (H200, 16-SM green partition, fp16 hd 256, vLLM layout, cold L2;
// bench/results/h200-2026-12-02-8236b7e-portable/): 0.17 (4 heads) / 0.12 (6 heads) of the read
// floor at 256k, 0.18–0.27 / 0.13–0.20 at 8k–32k: 4.3–6.6× the kernel before it at each one's
// best split count. One CTA alone on an SM streams 17 / 13 GB/s, two share one at 12.7 / 8.7
// GB/s each (≈ 2.3 instructions a clock per SM at 4 heads, ~750 of the 840 run a tile); with
// one CTA per SM (registers uncapped) the 256k cells take 1.5× as long (1005 against 663 µs):
// issue- and latency-bound at this occupancy, far from the bandwidth (issue 18's 0.4 is not
// reached). A pass of 6 heads for groups of 5–6 (portable_pass_heads; it was 8, two of them
// padding): the 6-head cells 1.10–1.15× faster, 0.15–0.25 of the floor, the 4-head ones unchanged
// (H100, 16 SMs, bench/results/h100-2026-12-06-prefill-exit-six-heads.md). Over an e4m3 cache
// (half the bytes, a widening per code): 1.08–1.15× the fp16 cache's tokens/s on the same cells
// (H100, 16 SMs, bench/results/h100-2026-12-06-portable-fp8/) — issue-bound either way.
#pragma once

#include "muh/kernels/decode_common.cuh"
#include "muh/kernels/decode_variant.cuh"
#include "muh/kernels/fp8_widen.cuh"
#include "muh/kernels/variant.cuh"
#include "muh/kernels/warp_tile.cuh"
#include "muh/tuning/policy.hpp"

#include <type_traits>

namespace muh::kernels::decode {

template <class Getter, DType DT, int D, bool kGuardInputs = true, KVDType KV = KVDType::same>
struct PortableTraits {
  using E = storage_t<DT>;  // q and out
  // The cache's element: q's type, or an fp8 code (muh/kv_quant.hpp; k_scale is in scale_log2,
  // v_scale applied to O by combine_and_store).
  static constexpr KVDType kKV = KV;
  static constexpr bool kFp8 = is_fp8(KV);
  using C = std::conditional_t<kFp8, std::uint8_t, E>;
  static constexpr bool kGuard = kGuardInputs;  // the input guard (decode_common.cuh)
  static constexpr int kD = D;
  static constexpr DecodePolicy kPolicy = Getter{}();
  static constexpr int kWarps = kPolicy.num_warps;           // 32-lane tiles (warp_tile.cuh)
  static constexpr int kThreads = tile32::kLanes * kWarps;   // num_warps counts 32-lane tiles
  static constexpr int kTile = kPolicy.tile_tokens;          // tokens per tile: one lane each in step 1
  static constexpr int kPassRows = kPortableDecodeRows;      // query heads per pass (8)
  static constexpr int kQVec = 16 / int(sizeof(E));          // q elements per 16-byte load
  static constexpr int kQChunks = D / kQVec;
  static constexpr int kVec = 16 / int(sizeof(C));           // K elements per 16-byte load (vLLM's x)
  static constexpr int kChunks = D / kVec;                   // 16-byte chunks per K row
  static constexpr int kKChunks = (kChunks + kWarps - 1) / kWarps;  // step 1: chunks per lane and token
  // Step 3's V load: 16 bytes, but 8 bytes (8 codes) for an fp8 cache, so that a thread's O stays
  // 8 dims (NHD) and its V registers halve: 16 codes a load would double o[][] (128 floats at 8
  // heads a pass) for nothing the loads need (8-byte loads of 8 codes move as many bytes a
  // thread as the 16-bit cache's 16-byte ones of 8 elements).
  static constexpr int kVVec = kFp8 ? 8 : kVec;              // V elements per load
  static constexpr int kVChunks = D / kVVec;                 // V loads per NHD row
  using VLoad = std::conditional_t<kFp8, uint2, uint4>;
  // Shared memory, in bytes (decode_smem_bytes() in tuning/policy.hpp is the same sum).
  static constexpr int kOffQ = 0;                                          // [kPassRows][D] f32 q; after the loop O
  static constexpr int kOffPart = kOffQ + kPassRows * D * 4;               // [kWarps][kPassRows][kTile] f32 slice sums
  static constexpr int kOffP = kOffPart + kWarps * kPassRows * kTile * 4;  // [kTile][kPassRows] f32 p
  static constexpr int kOffAlpha = kOffP + kTile * kPassRows * 4;          // [kPassRows] f32 rescale of this tile
  static constexpr int kOffM = kOffAlpha + kPassRows * 4;                  // [kPassRows] f32 final max (log2)
  static constexpr int kOffL = kOffM + kPassRows * 4;                      // [kPassRows] f32 final sum
  static constexpr int kSmemBytes = kOffL + kPassRows * 4;

  static_assert(kPolicy.agent == Agent::portable, "portable traits need a portable policy row");
  static_assert(validate(kPolicy, DT, D), "decode policy row does not fit its profile");
  static_assert(kSmemBytes == decode_smem_bytes(kPolicy, DT, D), "footprint differs from the table's");
  static_assert(!kFp8 || DT != DType::fp32, "an fp8 cache is read with fp16 / bf16 q");
  static_assert(kTile <= tile32::kLanes && kTile % kVec == 0 && kTile % kVVec == 0,
                "a tile: one lane per token, whole V loads");
  static_assert(kWarps >= kPassRows, "step 2 gives each query head of a pass its own tile");
  static_assert(kTile >= 16, "a window's first tile (16-aligned start) holds a token of the window");
  static_assert(kThreads >= D && D % kVec == 0 && D % kQVec == 0 && D % 4 == 0,
                "step 3 gives each dim (vLLM) a thread");
};

// Where step 3's thread reads V and what it accumulates. A V load is kVVec contiguous elements
// (16 bytes; 8 for an fp8 cache):
//   NHD  [page][slot][head][D]: kVVec dims of one token. Thread (g, c): column c (dims
//        c·kVVec …), tokens g, g + G, … of the tile: o[row][kVVec].
//   vLLM [page][head][D][page_size]: kVVec tokens of one dim (page_size is a multiple of kVVec).
//        Thread (g, d): dim d, token groups g, g + G, … of the tile: o[row][1].
// G = the threads' groups; threads past G · columns (head_dim 96) have no V work.
template <class Tr, KVLayout L>
struct PortableVMap {
  static constexpr int kColumns = L == KVLayout::nhd ? Tr::kVChunks : Tr::kD;
  static constexpr int kGroups = Tr::kThreads / kColumns;
  static constexpr int kUnits = L == KVLayout::nhd ? Tr::kTile : Tr::kTile / Tr::kVVec;  // per column and tile
  static constexpr int kPerThread = (kUnits + kGroups - 1) / kGroups;
  static constexpr int kOut = L == KVLayout::nhd ? Tr::kVVec : 1;  // output elements per query head
};

// One 16-byte chunk → its 16 / sizeof(E) elements as floats.
template <class E>
__device__ __forceinline__ void unpack(const uint4& x, float (&f)[16 / sizeof(E)]) {
  if constexpr (sizeof(E) == 4) {
    f[0] = __uint_as_float(x.x);
    f[1] = __uint_as_float(x.y);
    f[2] = __uint_as_float(x.z);
    f[3] = __uint_as_float(x.w);
  } else {
    using E2 = std::conditional_t<std::is_same_v<E, __half>, __half2, __nv_bfloat162>;
    const E2* h = reinterpret_cast<const E2*>(&x);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 v;
      if constexpr (std::is_same_v<E, __half>) v = __half22float2(h[i]);
      else v = __bfloat1622float2(h[i]);
      f[2 * i] = v.x;
      f[2 * i + 1] = v.y;
    }
  }
}

// One load of the cache (16 bytes; an fp8 cache's V: 8) → its elements as floats. fp8 codes are
// widened exactly through fp16 (kernels/fp8_widen.cuh: a byte permute a pair for e5m2, one cvt a
// pair for e4m3 on sm_89+, a few integer operations and an HMUL2 before); the scales are applied
// elsewhere (k_scale in scale_log2, v_scale by combine_and_store).
template <class Tr, class Load, int N>
__device__ __forceinline__ void cache_to_float(const Load& x, float (&f)[N]) {
  if constexpr (Tr::kFp8) {
    constexpr int kWords = int(sizeof(Load)) / 4;
    static_assert(N == 4 * kWords, "four codes a word");
    const unsigned* w = reinterpret_cast<const unsigned*>(&x);
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      const uint2 h = widen_fp8x4<Tr::kKV, __half>(w[i]);
      const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&h.x));
      const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&h.y));
      f[4 * i] = lo.x;
      f[4 * i + 1] = lo.y;
      f[4 * i + 2] = hi.x;
      f[4 * i + 3] = hi.y;
    }
  } else {
    static_assert(sizeof(Load) == 16 && N == 16 / int(sizeof(typename Tr::C)), "a 16-byte load");
    unpack<typename Tr::C>(x, f);
  }
}

// A 4-byte word holding elements elem0 … of a load (C: the cache's element), with the elements at
// index ≥ n zeroed.
template <class C>
__device__ __forceinline__ unsigned zero_past(unsigned word, int elem0, int n) {
  if constexpr (sizeof(C) == 4) {
    return elem0 < n ? word : 0u;
  } else if constexpr (sizeof(C) == 2) {
    return (elem0 < n ? word & 0xffffu : 0u) | (elem0 + 1 < n ? word & 0xffff0000u : 0u);
  } else {  // four fp8 codes
    unsigned keep = 0u;
#pragma unroll
    for (int b = 0; b < 4; ++b)
      if (elem0 + b < n) keep |= 0xffu << (8 * b);
    return word & keep;
  }
}

// A V load with the elements at index ≥ n zeroed (the range ends inside it).
template <class C>
__device__ __forceinline__ uint4 zero_past(const uint4& x, int n) {
  constexpr int kPerWord = 4 / int(sizeof(C));
  return make_uint4(zero_past<C>(x.x, 0, n), zero_past<C>(x.y, kPerWord, n), zero_past<C>(x.z, 2 * kPerWord, n),
                    zero_past<C>(x.w, 3 * kPerWord, n));
}
template <class C>
__device__ __forceinline__ uint2 zero_past(const uint2& x, int n) {
  constexpr int kPerWord = 4 / int(sizeof(C));
  return make_uint2(zero_past<C>(x.x, 0, n), zero_past<C>(x.y, kPerWord, n));
}

// Step 3's p of one token for heads 0 … N−1 of the pass: broadcasts of four (or fewer) floats.
template <int N>
__device__ __forceinline__ void load_p(const float* pt, float (&p)[N]) {
  if constexpr (N < 4) {
#pragma unroll
    for (int r = 0; r < N; ++r) p[r] = pt[r];
  } else {
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      const float4 x = *reinterpret_cast<const float4*>(pt + 4 * q);
      p[4 * q] = x.x;
      p[4 * q + 1] = x.y;
      p[4 * q + 2] = x.z;
      p[4 * q + 3] = x.w;
    }
    if constexpr (N % 4 == 2) {  // N = 6: the last two (8-byte aligned: pt is 16-byte aligned)
      const float2 x = *reinterpret_cast<const float2*>(pt + N - 2);
      p[N - 2] = x.x;
      p[N - 1] = x.y;
    }
  }
}

// One tile's K and V chunks of this thread, in registers (16 bytes each; zeros past kv_end).
template <class Tr, KVLayout L>
struct PortableTileRegs {
  uint4 k[Tr::kKChunks];
  typename Tr::VLoad v[PortableVMap<Tr, L>::kPerThread];
};

// Issues this thread's loads of the tile at t0 (nothing waits on them here). All threads of the
// CTA call it (a shuffle inside). bad_page (the guard): set when a block id read is outside
// [0, num_pages); page 0 is read instead.
template <class Tr, KVLayout L>
__device__ __forceinline__ void portable_load_tile(const DecodeArgs& a, const CtaWork& w, int t0, int warp,
                                                   int lane, int tid, PortableTileRegs<Tr, L>& r, bool& bad_page) {
  using C = typename Tr::C;
  using VLoad = typename Tr::VLoad;
  using VM = PortableVMap<Tr, L>;
  constexpr int D = Tr::kD, kVec = Tr::kVec, kVVec = Tr::kVVec;
  const C* kc = static_cast<const C*>(a.k_cache);
  const C* vc = static_cast<const C*>(a.v_cache);
  const int* bt = a.block_table + static_cast<std::int64_t>(w.seq) * a.max_blocks;
  const int Hkv = a.num_kv_heads, ps = a.page_size;
  const uint4 zero = make_uint4(0, 0, 0, 0);

  // K (both layouts): chunk (token t0 + lane, c) for this tile's slice c = warp·kKChunks + i.
  // Every tile of the CTA looks up the pages of all kTile tokens here; V takes them from it.
  int lane_page = 0;  // the page of token t0 + lane (guarded)
  {
    const int tok = t0 + lane;
    const bool live = lane < Tr::kTile && tok < w.kv_end;
    std::int64_t base = 0;  // element offset of the token's chunk 0
    if (live) {
      lane_page = guarded_page<Tr::kGuard>(a, bt[tok >> a.page_shift], bad_page);
      const std::int64_t page = lane_page;
      const int slot = tok & (ps - 1);
      base = L == KVLayout::nhd ? ((page * ps + slot) * Hkv + w.kv_head) * D
                                : (page * Hkv + w.kv_head) * std::int64_t(Tr::kChunks) * ps * kVec + slot * kVec;
    }
    // Chunk c is c·kVec elements on (NHD) or c·page_size·kVec elements on (vLLM).
    const std::int64_t step = L == KVLayout::nhd ? kVec : std::int64_t(ps) * kVec;
#pragma unroll
    for (int i = 0; i < Tr::kKChunks; ++i) {
      const int c = warp * Tr::kKChunks + i;
      r.k[i] = live && c < Tr::kChunks ? *reinterpret_cast<const uint4*>(kc + base + c * step) : zero;
    }
  }

  // V: this thread's units of its column (PortableVMap).
  const int g = tid / VM::kColumns, col = tid % VM::kColumns;
#pragma unroll
  for (int j = 0; j < VM::kPerThread; ++j) {
    const int u = g + VM::kGroups * j;
    const int x = min(L == KVLayout::nhd ? u : u * kVVec, Tr::kTile - 1);  // the unit's (first) token − t0
    const int tok = t0 + x;
    // Lane x's page, by shuffle (every lane takes part; a lane past its units ignores it).
    const std::int64_t page = __float_as_int(tile32::broadcast(__int_as_float(lane_page), x));
    r.v[j] = VLoad{};
    if (g < VM::kGroups && u < VM::kUnits && tok < w.kv_end) {
      const int slot = tok & (ps - 1);
      if constexpr (L == KVLayout::nhd) {
        r.v[j] = *reinterpret_cast<const VLoad*>(vc + ((page * ps + slot) * Hkv + w.kv_head) * D + col * kVVec);
      } else {
        r.v[j] = *reinterpret_cast<const VLoad*>(vc + ((page * Hkv + w.kv_head) * D + col) * ps + slot);
        // The range ends inside this load: zero the slots past it.
        if (tok + kVVec > w.kv_end) r.v[j] = zero_past<C>(r.v[j], w.kv_end - tok);
      }
    }
  }
}

// The CTAs per SM the registers are capped for (__launch_bounds__): the row's ctas_per_sm (2 →
// 128 registers a thread at 256 threads), except where ptxas then spills much. sm_90, hd 256
// fp16, registers uncapped / spills at 128: vLLM N = 4 176 / 24 B, N = 8 188 / 32 B; NHD N = 4
// 174 / 20 B, N = 8 250 / 452 B; at N = 6 (spills at 128) vLLM 28 B, NHD 134 B — so NHD with 6 or
// 8 heads a pass (and fp32, twice the K/V registers) keeps one CTA.
template <class Tr, KVLayout L, int N>
inline constexpr int kPortableMinCtas =
    sizeof(typename Tr::E) == 4 || (L == KVLayout::nhd && N >= 6) ? 1 : Tr::kPolicy.ctas_per_sm;

// N: query heads the kernel computes per pass (1, 2, 4, 6 or 8 ≥ the live heads of a pass, so no
// per-head branch sits in the loops: heads past `rows` compute zeros nobody stores); the launch
// picks the smallest N ≥ min(group, 8) (portable_pass_heads()). Shared memory keeps the strides
// of kPassRows = 8 whatever N is.
//
// Var: the variant kind (kernels/variant.cuh); PlainVariant compiles every hook out. With
// GeneralVariant: a window moves the CTA's first token to the window's (len − 1 − left: a
// partition wholly before it reads no page and stores an empty partial, which the merge weighs
// 0); soft-cap and ALiBi transform the scores in step 2 (the query is the sequence's last
// token); the sink joins the rows' (max, sum) before combine_and_store — in partition 0 only, as
// a partial (o = 0, lse = sink) of its own, so the unchanged V2 merge counts it exactly once. A
// sequence of length 0 stays out = 0, lse = −inf (padding), sink or not.
// The kernel's arguments are taken by value, as the kernel takes them: by reference (to the
// kernel's parameters) ptxas numbered st's registers differently and moved a few of each pass's
// initialising moves (sm_90, fp16 hd 128: 8 of 8 portable kernels, same instruction counts); by
// value the plain kernels' SASS is the one of before the body was a function (scripts/sass_diff.sh).
template <class Tr, KVLayout L, int N, class Var = PlainVariant>
__device__ __forceinline__ void decode_portable_body(const DecodeArgs a, int* input_errors, const Var& var = Var{}) {
  using E = typename Tr::E;
  using VM = PortableVMap<Tr, L>;
  constexpr int D = Tr::kD, R = Tr::kPassRows, kVec = Tr::kVec, kVVec = Tr::kVVec;
  static_assert(N == 1 || N == 2 || N == 4 || N == 6 || N == 8, "heads per pass");
  extern __shared__ __align__(16) unsigned char smem[];
  float* sQ = reinterpret_cast<float*>(smem + Tr::kOffQ);        // [R][D] this pass's q (then its O)
  float* sPart = reinterpret_cast<float*>(smem + Tr::kOffPart);  // [kWarps][R][kTile] slice sums
  float* sP = reinterpret_cast<float*>(smem + Tr::kOffP);        // [kTile][R] p
  float* sAlpha = reinterpret_cast<float*>(smem + Tr::kOffAlpha);
  float* sM = reinterpret_cast<float*>(smem + Tr::kOffM);
  float* sL = reinterpret_cast<float*>(smem + Tr::kOffL);

  CtaWork w = cta_work<Tr::kGuard>(a, input_errors);
  // (general kind) The window moves the CTA's first token (decode_variant.cuh; step 2 masks the
  // keys before win.lo, and kTile >= 16 keeps a key of the window in the first tile).
  [[maybe_unused]] DecodeWindow win{0, 0};
  if constexpr (Var::kOn) win = decode_window(a, var, w);
  if (w.idle) return;
  bool bad_page = false;  // the guard: this thread met a block id outside [0, num_pages)
  const int tid = threadIdx.x, warp = tile32::index(tid), lane = tile32::lane(tid);
  const int vg = tid / VM::kColumns, vcol = tid % VM::kColumns;  // step 3's (group, column)
  constexpr Log2Units<> kUnits;  // scores in log2 units (scale_log2 applied in step 2), exp2f

  for (int pass0 = 0; pass0 < w.rows; pass0 += N) {
    const int rows = min(N, w.rows - pass0);  // live query heads of this pass
    CtaWork wp = w;                           // the pass as combine_and_store sees it
    wp.head0 = w.head0 + pass0;
    wp.rows = rows;

    // This pass's q → shared memory as fp32 (heads past `rows` are zero), before the first tile.
    {
      const E* q = static_cast<const E*>(a.q) + (static_cast<std::int64_t>(w.seq) * a.num_q_heads + wp.head0) * D;
      constexpr int kQVec = Tr::kQVec;
      for (int i = tid; i < R * Tr::kQChunks; i += Tr::kThreads) {
        const int r = i / Tr::kQChunks, c = i % Tr::kQChunks;
        uint4 x = make_uint4(0, 0, 0, 0);
        if (r < rows) x = *reinterpret_cast<const uint4*>(q + r * D + c * kQVec);
        float f[kQVec];
        unpack<E>(x, f);
#pragma unroll
        for (int v = 0; v < kQVec; v += 4)
          *reinterpret_cast<float4*>(sQ + r * D + c * kQVec + v) = make_float4(f[v], f[v + 1], f[v + 2], f[v + 3]);
      }
    }
    // p and α of the heads past `rows`: 0 and 1 for the whole pass (step 2 writes only live heads).
    for (int i = tid; i < Tr::kTile * R; i += Tr::kThreads) sP[i] = 0.f;
    if (tid < R) sAlpha[tid] = 1.f;
    // (general kind) step 2's head `warp`: its slope; warps past the live heads take the last one.
    [[maybe_unused]] const auto vh = make_variant_head(var, wp.head0 + min(warp, rows - 1), 1, win.seq_len);
    OnlineSoftmax st;  // step 2's running (max, sum) of head `warp` (all lanes of the tile alike)
    float o[N][VM::kOut];  // step 3: unnormalised O of this thread's elements, per head of the pass
#pragma unroll
    for (int r = 0; r < N; ++r)
#pragma unroll
      for (int e = 0; e < VM::kOut; ++e) o[r][e] = 0.f;

    PortableTileRegs<Tr, L> cur;
    portable_load_tile<Tr, L>(a, w, w.kv_begin, warp, lane, tid, cur, bad_page);
    __syncthreads();  // q in place

    for (int t0 = w.kv_begin; t0 < w.kv_end; t0 += Tr::kTile) {
      // The next tile's loads go out first: they land while this tile is computed.
      PortableTileRegs<Tr, L> next;
      portable_load_tile<Tr, L>(a, w, t0 + Tr::kTile, warp, lane, tid, next, bad_page);
      const int valid = min(Tr::kTile, w.kv_end - t0);

      // 1. Partial scores over this tile's head_dim slice: acc[r] = Σ_slice q[r]·k[lane].
      {
        float acc[N];
#pragma unroll
        for (int r = 0; r < N; ++r) acc[r] = 0.f;
#pragma unroll
        for (int i = 0; i < Tr::kKChunks; ++i) {
          const int c = warp * Tr::kKChunks + i;
          if (c < Tr::kChunks) {  // the same for the whole tile
            float kf[kVec];
            cache_to_float<Tr>(cur.k[i], kf);
#pragma unroll
            for (int v = 0; v < kVec; v += 4) {
#pragma unroll
              for (int r = 0; r < N; ++r) {  // every lane the same q address: a broadcast
                const float4 q4 = *reinterpret_cast<const float4*>(sQ + r * D + c * kVec + v);
                acc[r] = fmaf(q4.x, kf[v], acc[r]);
                acc[r] = fmaf(q4.y, kf[v + 1], acc[r]);
                acc[r] = fmaf(q4.z, kf[v + 2], acc[r]);
                acc[r] = fmaf(q4.w, kf[v + 3], acc[r]);
              }
            }
          }
        }
        if (lane < Tr::kTile) {
#pragma unroll
          for (int r = 0; r < N; ++r)
            if (r < rows) sPart[(warp * R + r) * Tr::kTile + lane] = acc[r];
        }
      }
      __syncthreads();

      // 2. Online softmax of head `warp` over this tile: s = Σ slices · scale·log2(e); lanes past
      //    the valid tokens hold −inf (weight 0).
      if (warp < rows) {
        float s = -INFINITY;
        bool visible = lane < valid;
        if constexpr (Var::kOn) visible = visible && t0 + lane >= win.lo;  // (the window's start)
        if (visible) {
          float x = 0.f;
#pragma unroll
          for (int k = 0; k < Tr::kWarps; ++k) x += sPart[(k * R + warp) * Tr::kTile + lane];
          if constexpr (Var::kOn) x = vh.logit(x, 0, t0 + lane);  // soft-cap, ALiBi (raw units)
          s = x * a.scale_log2;
        }
        const float m_new = st.max_with(tile32::reduce_max(s));  // finite: the tile holds ≥ 1 token
        const float p = kUnits.weight(s, m_new);                  // masked: 2^−inf = 0
        const float sum = tile32::reduce_sum(p);
        const float alpha = st.rescale_to(m_new, kUnits);          // first tile: 2^−inf = 0
        st.accumulate(alpha, sum);
        if (lane < Tr::kTile) sP[lane * R + warp] = p;
        if (lane == 0) sAlpha[warp] = alpha;
      }
      __syncthreads();

      // 3. O = O·α + P V over this thread's V chunks (p = 0 past the valid tokens, V zeroed there).
#pragma unroll
      for (int r = 0; r < N; ++r) {
        const float alpha = sAlpha[r];
        if (alpha != 1.f) {  // the max moved (the same for every thread): rescale
#pragma unroll
          for (int e = 0; e < VM::kOut; ++e) o[r][e] *= alpha;
        }
      }
      if (vg < VM::kGroups) {
#pragma unroll
        for (int j = 0; j < VM::kPerThread; ++j) {
          const int u = vg + VM::kGroups * j;
          if (u < VM::kUnits) {
            float vf[kVVec];
            cache_to_float<Tr>(cur.v[j], vf);
            if constexpr (L == KVLayout::nhd) {  // token u, dims vcol·kVVec …
              float p[N];
              load_p<N>(sP + u * R, p);
#pragma unroll
              for (int r = 0; r < N; ++r)
#pragma unroll
                for (int e = 0; e < kVVec; ++e) o[r][e] = fmaf(p[r], vf[e], o[r][e]);
            } else {  // tokens u·kVVec + e, dim vcol
#pragma unroll
              for (int e = 0; e < kVVec; ++e) {
                float p[N];
                load_p<N>(sP + (u * kVVec + e) * R, p);
#pragma unroll
                for (int r = 0; r < N; ++r) o[r][0] = fmaf(p[r], vf[e], o[r][0]);
              }
            }
          }
        }
      }
      cur = next;
    }

    // The guard: did any thread meet a bad block id? Then the CTA's rows are dropped (a V1 row as
    // of length 0, a V2 partial poisoned for the merge), and its thread 0 flags it.
    const bool poisoned = cta_poisoned<Tr::kGuard>(bad_page, input_errors);

    // Epilogue: each head's (max, sum); the token groups' O added into sQ's space in a fixed
    // order (group G−1 first: deterministic); then combine_and_store normalises and writes.
    if (warp < rows && lane == 0) {
      sM[warp] = st.m;
      sL[warp] = st.l;
    }
    float* sO = sQ;  // [R][D]; step 1 is done with q (two barriers since its last read)
    for (int g = VM::kGroups - 1; g >= 0; --g) {
      if (vg == g) {
#pragma unroll
        for (int r = 0; r < N; ++r) {
          if (r < rows) {
#pragma unroll
            for (int e = 0; e < VM::kOut; ++e) {
              float& dst = sO[r * D + (L == KVLayout::nhd ? vcol * kVVec + e : vcol)];
              dst = (g == VM::kGroups - 1 ? 0.f : dst) + o[r][e];
            }
          }
        }
      }
      __syncthreads();
    }
    // (general kind) The sink, once per row (decode_variant.cuh).
    if constexpr (Var::kOn) fold_sinks<D>(var, wp, win, sM, sL, sO, sAlpha, tid, Tr::kThreads);
    // combine_and_store reads m[p·16 + r], l[p·16 + r] and o[(p·16 + r)·D + d] of part p = 0.
    combine_and_store<E, D, Tr::kFp8>(a, wp, 1, sM, sL, sO, tid, Tr::kThreads, poisoned);
    __syncthreads();  // the next pass rewrites sQ / sM / sL
  }
}

template <class Tr, KVLayout L, int N>
__global__ void __launch_bounds__(Tr::kThreads, (kPortableMinCtas<Tr, L, N>))
    decode_portable_kernel(const DecodeArgs a, int* input_errors) {
  decode_portable_body<Tr, L, N>(a, input_errors);
}

// The general variant kind (kernels/variant.cuh).
template <class Tr, KVLayout L, int N>
__global__ void __launch_bounds__(Tr::kThreads, (kPortableMinCtas<Tr, L, N>))
    decode_portable_variant_kernel(const DecodeArgs a, int* input_errors, const VariantArgs v) {
  decode_portable_body<Tr, L, N, GeneralVariant>(a, input_errors, GeneralVariant{v});
}

// The heads per pass the launch compiles for a GQA group: the smallest of 1, 2, 4, 8 that holds
// min(group, 8) (groups of 9 and more take passes of 8; a chunk of 16 two).
// 6 for the groups of 5–6 (Qwen3.5/3.6-27B at TP4: 6 q heads per KV head) — with 8 a quarter of
// their FMAs and p loads were the two padded heads' (SASS, fp16 hd 256 vLLM: 1187 instructions a
// warp-tile at N = 8, 513 of them FFMAs).
constexpr int portable_pass_heads(int group) {
  return group <= 1 ? 1 : group <= 2 ? 2 : group <= 4 ? 4 : group <= 6 ? 6 : 8;
}

// The kernel a launch of this row runs: by KV layout and portable_pass_heads(group).
template <class Tr>
inline auto portable_decode_kernel(KVLayout layout, int group) {
  using Fn = void (*)(const DecodeArgs, int*);
  auto pick = [layout](auto nhd, auto vllm) { return layout == KVLayout::nhd ? Fn(nhd) : Fn(vllm); };
  switch (portable_pass_heads(group)) {
    case 1: return pick(&decode_portable_kernel<Tr, KVLayout::nhd, 1>, &decode_portable_kernel<Tr, KVLayout::vllm, 1>);
    case 2: return pick(&decode_portable_kernel<Tr, KVLayout::nhd, 2>, &decode_portable_kernel<Tr, KVLayout::vllm, 2>);
    case 4: return pick(&decode_portable_kernel<Tr, KVLayout::nhd, 4>, &decode_portable_kernel<Tr, KVLayout::vllm, 4>);
    case 6: return pick(&decode_portable_kernel<Tr, KVLayout::nhd, 6>, &decode_portable_kernel<Tr, KVLayout::vllm, 6>);
    default: return pick(&decode_portable_kernel<Tr, KVLayout::nhd, 8>, &decode_portable_kernel<Tr, KVLayout::vllm, 8>);
  }
}

// The same for the general variant kind.
template <class Tr>
inline auto portable_decode_variant_kernel(KVLayout layout, int group) {
  using Fn = void (*)(const DecodeArgs, int*, const VariantArgs);
  auto pick = [layout](auto nhd, auto vllm) { return layout == KVLayout::nhd ? Fn(nhd) : Fn(vllm); };
  switch (portable_pass_heads(group)) {
    case 1:
      return pick(&decode_portable_variant_kernel<Tr, KVLayout::nhd, 1>,
                  &decode_portable_variant_kernel<Tr, KVLayout::vllm, 1>);
    case 2:
      return pick(&decode_portable_variant_kernel<Tr, KVLayout::nhd, 2>,
                  &decode_portable_variant_kernel<Tr, KVLayout::vllm, 2>);
    case 4:
      return pick(&decode_portable_variant_kernel<Tr, KVLayout::nhd, 4>,
                  &decode_portable_variant_kernel<Tr, KVLayout::vllm, 4>);
    case 6:
      return pick(&decode_portable_variant_kernel<Tr, KVLayout::nhd, 6>,
                  &decode_portable_variant_kernel<Tr, KVLayout::vllm, 6>);
    default:
      return pick(&decode_portable_variant_kernel<Tr, KVLayout::nhd, 8>,
                  &decode_portable_variant_kernel<Tr, KVLayout::vllm, 8>);
  }
}

}  // namespace muh::kernels::decode
