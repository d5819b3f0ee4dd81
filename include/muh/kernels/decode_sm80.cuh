// kernels/decode_sm80.cuh — the fast decode agent for sm_80 and newer (A100, L40S, H100/H200):
// tensor cores (mma.sync m16n8k16, fp32 accumulation) with the GQA query-head group on the MMA's
// 16 rows — or, for a group of ≤ 8, on its 8 columns (HeadsOnN) — and a per-warp cp.async (or
// TMA) pipeline of 16-token K/V tiles.
//
// Why tensor cores: a GQA group of 4–8 query heads gives each K/V byte 8–16 FLOPs; on CUDA cores
// (with the 16-bit → fp32 conversions) that caps a decode near 3 TB/s on the H200. As one
// m16n8k16 MMA per 8 tokens × 16 dims, the same work is ~50 tensor-core cycles per 8 KB of K/V
// per warp, far under the ~480 cycles that 8 KB takes to arrive at 4.4 TB/s / 132 SMs.
//
// One CTA = one (sequence, KV head, ≤ 16-query-head chunk, partition); V1 and V2 are this one
// kernel (a partition of one writes the output, several write (o, lse) partials for the merge).
// The CTA's tokens are cut into 16-token tiles dealt round-robin to its warps (warp w takes tiles
// w, w + W, …). Each warp runs alone until the end — its own num_stages-deep cp.async ring, its
// own online-softmax state (m, l) and O accumulator — so the main loop has no CTA barrier; the
// warps' states are merged once, through shared memory, at the end.
//
// Per tile, per warp (the tile math, HeadsOnM / HeadsOnN below; the body runs the pipeline):
//   S = Q Kᵀ        D/16 k-steps in 2 (HeadsOnM) or 4 (HeadsOnN) accumulator sets   scores()
//   online softmax  base 2, scale folded into log2(e)                               update()
//   O += P V        P re-packed from the S accumulators as an MMA operand           update()
// With Sm80Traits::kOverlap (hd 256, ≥ 3 stages) the body runs tile j + 1's scores() beside tile
// j's update(), so one warp has two independent dependency chains in flight.
//
// Shared-memory layouts (16-bit elements):
//   sQ [16][D + 8]; per warp and stage: K tile [16 tok][D + 8] and V tile, either NHD
//   [16 tok][D + 8] (ldmatrix.trans) or vLLM [D][16 tok] (ldmatrix, 16-byte halves XOR-swizzled
//   by bit 2 of the row). The 8-element row padding and the swizzle put the 8 row addresses of
//   every ldmatrix phase on distinct banks.
//
// The TMA variants (policy.tma, sm_90; decode_sm80_tma in policy.hpp says when): a tile's 16
// tokens are rows of one page, so lane 0 fetches K and V as tensor-map boxes completing on one
// mbarrier per stage, into a 1024-aligned stage area after sQ (the padded footprint leaves
// W·S·512 B for the alignment). Every L2 request is then a whole line; the cp.async form's
// 16-byte copies reach L2 as partial lines, and its lanes spend more instructions on addresses
// than on the tile's MMAs (vLLM pages: 32 copies a lane per hd-256 tile, each with a shuffle).
//   NHD  (page_size ≥ 16, D % 64 == 0): D/64 boxes each for K and V, [16 tok][64 dims] (2 KB,
//        128-byte swizzle: 16-byte chunk c of row r sits at chunk c ^ (r & 7), conflict-free for
//        ldmatrix like the padding).
//   vLLM (page_size 16): the page's K block [D/8][16 tok][8] as one box, as it is (ldmatrix reads
//        8 tokens of one 16-byte column: 128 contiguous bytes); its V block [D][16 tok] as one
//        box of [D/4][128 B] rows (4 dims each) with the 128-byte swizzle — chunk c = 2·(d & 3) + g
//        (dim d, tokens 8g ..) of row d/4 sits at c ^ (row & 7), so the 8 dims of an ldmatrix
//        phase land on 8 distinct 16-byte bank groups (unswizzled, dims 32 B apart: 2-way).
//
// An fp8 cache (Sm80Traits' KV, muh/kv_quant.hpp): the copies (cp.async, or TMA boxes of codes)
// fill a ring of stages of 1-byte codes. With the heads on N — on vLLM pages (the seed's case),
// and on NHD pages at head_dim 128 and 256, whose ring is 128-byte swizzled — the tile math reads
// the codes themselves: ldmatrix fragments widened in registers (HeadsOnNCodes;
// decode_sm80_fp8_fragments), in a footprint of their own (no 16-bit tiles: two CTAs a SM at
// hd 256, decode_sm80_codes_smem_bytes). Otherwise the warp widens each landed tile into one 16-bit K and V tile pair
// with the cp.async layouts above (widen_tokens, widen_v_tile), which the tile math reads
// unchanged — a pass through shared memory that took an hd-256 warp-tile from 272 to 671
// instructions (ncu, bench/results/h100-2026-12-06-portable-fp8/README.md, call 2). bf16 q runs
// fp16 MMAs over fp8 (load_q_fp16). Measured in bench/results/h100-2026-12-06-fp8.md.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>
#include <type_traits>

#include "muh/kernels/decode_common.cuh"
#include "muh/kernels/decode_variant.cuh"
#include "muh/kernels/fp8_fragments.hpp"
#include "muh/kernels/fp8_widen.cuh"
#include "muh/kernels/sm80_ptx.cuh"
#include "muh/kernels/variant.cuh"
#include "muh/tuning/policy.hpp"

namespace muh::kernels::decode {

// ---- The decode agent's own PTX wrappers (the rest: sm80_ptx.cuh, shared with prefill) -------
namespace ptx {

// An L2 policy that evicts K/V first: the cache is streamed once; q and the block table stay.
// Taken only for calls that read a few L2 sizes of K/V (DecodePlan::l2_evict_first, plan.cpp):
// there it is up to 11 % faster, on larger calls up to 10 % slower.
__device__ __forceinline__ std::uint64_t l2_evict_first() {
  std::uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}

// 16-byte global → shared copy, asynchronous; only src_bytes (0..16) are read, the rest of the
// 16 bytes is zero-filled (masked tokens become zeros, never NaN from unused cache slots).
// .L2::128B lets L2 fetch the whole 128-byte line on a miss (a warp's copies cover whole token
// rows, so the rest of the line is always wanted). A/B on the H200 (bench/results/
// decode-h200-2026-11-30-experiments.md, section 5, same build, same run): 1.2–4.5 % faster on
// all eight cells timed (hd128 b64×8k 555 → 542 µs, hd256 b16×8k 171 → 164 µs). The .ca form
// (through L1) also made the L2 requests whole lines (4.0 sectors per request instead of 2.3) and
// helped hd128 as much, but cost 13–14 % at hd256, where one CTA leaves L1 little room.
// kEvictFirst: the copy carries the L2 policy `pol` (DecodePlan::l2_evict_first says when).
template <bool kEvictFirst>
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes, std::uint64_t pol) {
  if constexpr (kEvictFirst)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::128B [%0], [%1], 16, %2, %3;\n"
                 ::"r"(sm80::smem_addr(dst)), "l"(src), "r"(src_bytes), "l"(pol)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n"
                 ::"r"(sm80::smem_addr(dst)), "l"(src), "r"(src_bytes)
                 : "memory");
}
// cp_async16 with `dst` handed over as a generic address, made a shared one inside the asm — the
// copies of sm80_issue_tile_fp8. At sm_90 ptxas 13.0 (V13.0.88) built their evict-first form in
// the kernels that read the codes themselves (NHD at hd 128/256, vLLM at hd 256) as
// LDGSTS [R + UR0], desc[UR1] with UR0 and UR1 written nowhere: "an illegal instruction" on an
// H100 (`muh verify --quick`'s nhd/ragged, pages of 8; bench/results/2026-12-07-fp8-decode-ptxas/).
// ptxas 13.5 does not; with the conversion in the asm 13.0 emits plain [R] forms. The ctest
// sass.uniform_registers fails a build whose SASS has such a register again.
template <bool kEvictFirst>
__device__ __forceinline__ void cp_async16_generic_dst(void* dst, const void* src, int src_bytes, std::uint64_t pol) {
  if constexpr (kEvictFirst)
    asm volatile("{\n.reg .u64 s;\ncvta.to.shared.u64 s, %0;\n"
                 "cp.async.cg.shared.global.L2::cache_hint.L2::128B [s], [%1], 16, %2, %3;\n}\n"
                 ::"l"(dst), "l"(src), "r"(src_bytes), "l"(pol)
                 : "memory");
  else
    asm volatile("{\n.reg .u64 s;\ncvta.to.shared.u64 s, %0;\n"
                 "cp.async.cg.shared.global.L2::128B [s], [%1], 16, %2;\n}\n"
                 ::"l"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}
// TMA (sm_90): K/V tiles as tensor-map boxes completing on an mbarrier. Compiled to a trap
// for older archs, where launch_decode never selects the TMA kernel.
__device__ __forceinline__ void mbar_init(std::uint32_t bar, int count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
  __trap();
#endif
}
// Orders this thread's generic-proxy shared-memory accesses before later async-proxy (TMA) ones.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#else
  __trap();
#endif
}
// Waits until the phase of parity `parity` of the mbarrier has completed (sm80_ptx.cuh).
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  sm80::mbarrier_wait_parity(bar, parity);
#else
  __trap();
#endif
}
// One box of a 2-D tensor map at (c0, c1) into shared memory, completing on `bar`.
template <bool kEvictFirst>
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0, int c1,
                                            std::uint64_t pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const auto m = reinterpret_cast<std::uint64_t>(map);
  if constexpr (kEvictFirst)
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c0), "r"(c1), "l"(pol)
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c0), "r"(c1)
        : "memory");
#else
  __trap();
#endif
}
// One box of a 3-D tensor map at (c0, c1, c2) into shared memory, completing on `bar`.
template <bool kEvictFirst>
__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0, int c1,
                                            int c2, std::uint64_t pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const auto m = reinterpret_cast<std::uint64_t>(map);
  if constexpr (kEvictFirst)
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "l"(pol)
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
#else
  __trap();
#endif
}

// Fetches the 32-byte sector holding *p into L2 (no register, no wait).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

}  // namespace ptx

// KV: the cache's element type (muh/kv_quant.hpp): q's dtype, or fp8 codes widened to it in
// shared memory (the fp8 stage layout below).
template <class Getter, DType DT, int D, bool kGuardInputs = true, KVDType KV = KVDType::same>
struct Sm80Traits {
  static constexpr bool kGuard = kGuardInputs;  // the input guard (decode_common.cuh)
  static constexpr KVDType kKV = KV;
  static constexpr bool kFp8 = is_fp8(KV);
  using OutE = storage_t<DT>;  // q and out
  // The tiles' and the MMAs' type: q's, except that bf16 q over an fp8 cache runs fp16 MMAs. The
  // codes widen to fp16 in one cvt.rn.f16x2.e4m3x2 (or a byte permute) a pair, to bf16 only
  // through fp32 (4 instructions a pair: 640 of an hd-256 tile's 1042 sm_90 instructions); the
  // queries are moved into fp16's range by a power of two per CTA (load_q_fp16), which the
  // softmax scale takes back exactly.
  static constexpr DType kDType = kFp8 && DT == DType::bf16 ? DType::fp16 : DT;
  using E = storage_t<kDType>;
  static constexpr bool kQToFp16 = kDType != DT;
  static constexpr DecodePolicy kPolicy = Getter{}();
  static constexpr int kD = D;
  static constexpr int kWarps = kPolicy.num_warps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kStages = kPolicy.num_stages;
  static constexpr int kRowElems = D + 8;                 // padded shared-memory row
  static constexpr int kTileElems = 16 * kRowElems;       // one warp's 16-token K (or V) tile
  static constexpr int kStageElems = 2 * kTileElems;      // K + V
  static constexpr int kQElems = kRows * kRowElems;
  static constexpr int kSmemBytes = (kQElems + kWarps * kStages * kStageElems) * int(sizeof(E));
  // Q's A-operand fragments live in registers up to D = 128 (32 registers); at 256 they are
  // re-read from shared memory, leaving registers to the 128 fp32 accumulators of O.
  static constexpr bool kQInRegs = D <= 128;
  // The main loop software-pipelined by one tile (decode_sm80_body): tile j + 1's QKᵀ beside tile
  // j's softmax and PV. It holds two tiles of a warp's ring at once, so it needs a third stage to
  // keep one in flight. At hd 256 a 4-warp CTA has one warp per scheduler and its tile math is
  // latency-bound (ncu: 0.2 eligible warps per scheduler, ~5 cycles per issued instruction). With
  // the row at 4 × 3 the seed's 16-SM cells at ≥ 32k ran 1.05–1.07× faster, 132-SM cells 0.98–1.00×
  // (bench/results/h200-2026-12-06-tile-pipeline.md, B → D). hd ≤ 128 (2 CTAs per SM) not measured.
  static constexpr bool kOverlap = kStages >= 3 && D >= 256;
  // An fp8 cache: the warp's stage area holds one 16-bit K tile and one V tile (the cp.async
  // layouts above, which the tile math reads as it reads a 16-bit cache's), then a ring of S
  // stages of fp8 codes [K 16·D | V 16·D] (NHD: token rows [16][D]; vLLM: the page's own K
  // block [D/16][16][16] and V block [D][16 tok]) that the copies fill; each landed tile is
  // widened into the 16-bit tiles by the warp (widen_k / widen_v in the body) — except where the
  // tile math reads the codes themselves (HeadsOnNCodes: vLLM pages, heads on N), which leaves
  // the widened pair unused. S ≥ 2 stages of codes plus one widened pair take no more than S 16-bit
  // stages, so the footprint (the table's) is the same.
  static constexpr int kFp8StageBytes = 2 * 16 * D;

  // (+ 128: the ring starts on a 128-byte boundary, as the TMA boxes want.)
  static_assert(!kFp8 || kStageElems * int(sizeof(E)) + kStages * kFp8StageBytes + 128 <=
                             kStages * kStageElems * int(sizeof(E)),
                "fp8: the widened tiles and the ring of codes fit the stage area");
  // The tile math on the codes themselves (HeadsOnNCodes) has no widened tiles: its kernels take
  // the smaller footprint of decode_sm80_codes_smem_bytes (policy.hpp) — Q, then the warps' rings
  // from the next 1024-byte boundary (or the combine's scratch).
  static constexpr int kCodesSmemBytes = decode_sm80_codes_smem_bytes(kPolicy, D);
  static_assert(!kFp8 || (kCodesSmemBytes <= kSmemBytes &&
                          kQElems * int(sizeof(E)) + 1023 + kWarps * kStages * kFp8StageBytes <= kCodesSmemBytes),
                "fp8: the codes' footprint holds Q and the aligned rings");

  static_assert(kPolicy.agent == Agent::sm80, "sm80 traits need an sm80 policy row");
  static_assert(DT == DType::fp16 || DT == DType::bf16, "tensor cores take 16-bit K/V");
  static_assert(validate(kPolicy, DT, D), "decode policy row does not fit its profile");
  static_assert(kSmemBytes == decode_smem_bytes(kPolicy, DT, D), "footprint differs from the table's");
  static_assert(D % 16 == 0, "head_dim must be a multiple of 16");
  // The final combine reuses the stage area (decode_sm80_combine_bytes).
  static_assert(decode_sm80_combine_bytes(kPolicy, D) <= kWarps * kStages * kStageElems * int(sizeof(E)),
                "combine scratch must fit the stage area");
};

// Issues the cp.asyncs of one warp's 16-token tile starting at token t0 into stage `st`
// (K tile, then V tile). `page` holds, in lane l, the page of token t0 + (l & 15). kHint: the
// copies carry the evict-first policy `pol`. It is a template parameter so that the grid-uniform
// choice costs one branch per tile: a probe that chose the copy form per copy at run time ran
// hd128 batch 16 × 8k (4 warps per SM) 23 % slower.
template <class Tr, KVLayout L, bool kHint>
__device__ __forceinline__ void sm80_issue_tile(const DecodeArgs& a, const CtaWork& w,
                                                typename Tr::E* st, int t0, int page, int lane,
                                                std::uint64_t pol) {
  using E = typename Tr::E;
  constexpr int D = Tr::kD, kCPT = D / 8, R = Tr::kRowElems;  // 16-byte chunks per token row
  const E* kc = static_cast<const E*>(a.k_cache);
  const E* vc = static_cast<const E*>(a.v_cache);
  E* sK = st;
  E* sV = st + Tr::kTileElems;
  const int Hkv = a.num_kv_heads, ps = a.page_size;
  // K (both layouts) and V (NHD): chunk i = (token i / kCPT, dims 8·(i % kCPT) ..); one
  // instruction covers 32 consecutive chunks, i.e. whole 16-byte-granular token rows.
#pragma unroll
  for (int it = 0; it < 16 * kCPT / 32; ++it) {
    const int i = it * 32 + lane, t = i / kCPT, c = i % kCPT, tok = t0 + t;
    const std::int64_t pg = __shfl_sync(0xffffffffu, page, t);
    const int slot = tok & (ps - 1);
    const int bytes = tok < w.kv_end ? 16 : 0;
    if constexpr (L == KVLayout::nhd) {
      const std::int64_t off = ((pg * ps + slot) * Hkv + w.kv_head) * D + c * 8;
      ptx::cp_async16<kHint>(sK + t * R + c * 8, kc + off, bytes, pol);
      ptx::cp_async16<kHint>(sV + t * R + c * 8, vc + off, bytes, pol);
    } else {
      const std::int64_t off = (((pg * Hkv + w.kv_head) * kCPT + c) * ps + slot) * 8;
      ptx::cp_async16<kHint>(sK + t * R + c * 8, kc + off, bytes, pol);
    }
  }
  if constexpr (L == KVLayout::vllm) {
    // V [page][head][D][page_size]: chunk (dim d, tokens g·8 .. g·8 + 7) is 16 contiguous bytes
    // of one page (page_size ≥ 8); a partly valid chunk reads only its valid tokens.
#pragma unroll
    for (int it = 0; it < 2 * D / 32; ++it) {
      const int i = it * 32 + lane, d = i >> 1, g = i & 1, tok0 = t0 + g * 8;
      const std::int64_t pg = __shfl_sync(0xffffffffu, page, g * 8);
      const int n = min(max(w.kv_end - tok0, 0), 8);
      const std::int64_t off = ((pg * Hkv + w.kv_head) * D + d) * ps + (tok0 & (ps - 1));
      ptx::cp_async16<kHint>(sV + d * 16 + ((g ^ ((d >> 2) & 1)) * 8), vc + off, n * int(sizeof(E)), pol);
    }
  }
}

// The fp8 form of sm80_issue_tile: tile t0's codes into ring stage `st` ([K 16 × D | V]).
//   NHD, K and V: chunk i = (token i / (D/16), dims 16·(i % (D/16)) ..), 16 codes: [16][D].
//   vLLM, K: the pages pack x = 16 codes, [page][head][D/16][page_size][16]; chunk i = (dims
//     16·(i / 16) .., token i % 16) into the page's own [D/16][16][16] (as its TMA box brings it,
//     and as HeadsOnNCodes reads it).
//   vLLM, V: chunk d = dim d, the tile's 16 tokens — one page (page_size ≥ 16, check_kv_quant);
//     a partly valid chunk reads only its valid tokens.
//   kSwizzled (NHD, the fragments' ring: decode_sm80_fp8_fragments): chunk (t, c) of K and of V at
//     codes_nhd_offset(t, c), the TMA's 128-byte swizzle.
template <class Tr, KVLayout L, bool kHint, bool kSwizzled = false>
__device__ __forceinline__ void sm80_issue_tile_fp8(const DecodeArgs& a, const CtaWork& w, std::uint8_t* st, int t0,
                                                    int page, int lane, std::uint64_t pol) {
  constexpr int D = Tr::kD, kCPT = D / 16;  // 16-code chunks per token row
  const auto* kc = static_cast<const std::uint8_t*>(a.k_cache);
  const auto* vc = static_cast<const std::uint8_t*>(a.v_cache);
  std::uint8_t* sK = st;
  std::uint8_t* sV = st + 16 * D;
  const int Hkv = a.num_kv_heads, ps = a.page_size;
#pragma unroll
  for (int it = 0; it < 16 * kCPT / 32; ++it) {
    const int i = it * 32 + lane;
    const int t = L == KVLayout::nhd ? i / kCPT : i & 15, c = L == KVLayout::nhd ? i % kCPT : i >> 4, tok = t0 + t;
    const std::int64_t pg = __shfl_sync(0xffffffffu, page, t);
    const int slot = tok & (ps - 1);
    const int bytes = tok < w.kv_end ? 16 : 0;
    if constexpr (L == KVLayout::nhd) {
      const std::int64_t off = ((pg * ps + slot) * Hkv + w.kv_head) * D + c * 16;
      if constexpr (kSwizzled) {
        ptx::cp_async16_generic_dst<kHint>(sK + codes_nhd_offset(t, c), kc + off, bytes, pol);
        ptx::cp_async16_generic_dst<kHint>(sV + codes_nhd_offset(t, c), vc + off, bytes, pol);
      } else {
        ptx::cp_async16_generic_dst<kHint>(sK + t * D + c * 16, kc + off, bytes, pol);
        ptx::cp_async16_generic_dst<kHint>(sV + t * D + c * 16, vc + off, bytes, pol);
      }
    } else {
      const std::int64_t off = (((pg * Hkv + w.kv_head) * kCPT + c) * ps + slot) * 16;
      ptx::cp_async16_generic_dst<kHint>(sK + c * 256 + t * 16, kc + off, bytes, pol);
    }
  }
  if constexpr (L == KVLayout::vllm) {
    const std::int64_t pg = __shfl_sync(0xffffffffu, page, 0);
    const int n = min(max(w.kv_end - t0, 0), 16);
#pragma unroll
    for (int it = 0; it < D / 32; ++it) {
      const int d = it * 32 + lane;
      const std::int64_t off = ((pg * Hkv + w.kv_head) * D + d) * ps + (t0 & (ps - 1));
      ptx::cp_async16_generic_dst<kHint>(sV + d * 16, vc + off, n, pol);
    }
  }
}

// ---- Tile addressing: 16-byte chunks of the K/V tiles in shared memory -----------------------
// The chunk of 8 elements at (token `row`, dim `col`, col % 8 == 0) of a K tile or an NHD V tile:
// padded rows (the cp.async forms), the TMA's swizzled [D/64][16][64] boxes (NHD) or the vLLM
// page's own [D/8][16][8] K block (vLLM TMA).
template <class Tr, KVLayout L, bool kTma>
__host__ __device__ constexpr int tok_chunk_offset(int row, int col) {  // in elements
  if constexpr (kTma && L == KVLayout::vllm) {
    return (col >> 3) * 128 + row * 8;
  } else if constexpr (kTma) {
    const int b = col >> 6, c = (col >> 3) & 7;
    return b * 16 * 64 + row * 64 + ((c ^ (row & 7)) << 3);
  } else {
    return row * Tr::kRowElems + col;
  }
}
// The chunk of dim d, tokens 8g .. 8g + 7 of a vLLM-layout V tile [D][16 tok]: cp.async form,
// halves swizzled by bit 2 of the row (sm80_issue_tile); TMA form, [D/4][128 B] rows with the
// 128-byte swizzle (the file's header).
template <bool kTma>
__host__ __device__ constexpr int vllm_v_offset(int d, int g) {  // in elements
  if constexpr (kTma) {
    const int row = d >> 2, c = ((d & 3) << 1) | g;
    return row * 64 + ((c ^ (row & 7)) << 3);
  } else {
    return d * 16 + ((g ^ ((d >> 2) & 1)) * 8);
  }
}

// The fp8 ring's tile of codes → the 16-bit tile the tile math reads (cp.async layouts), 8 codes
// a lane at a time: consecutive lanes read consecutive 8 bytes and write consecutive 16-byte
// chunks, so neither side has a bank conflict. K (both layouts) and NHD V: token rows of D codes
// ([16][D]; kChunkMajor: the vLLM page's own [D/16][16 tok][16], as either copy form brings it) →
// padded token rows; vLLM V: [D][16 tok] codes → its [D][16] rows with the halves swizzled.
template <class Tr, bool kChunkMajor = false>
__device__ __forceinline__ void widen_tokens(const std::uint8_t* codes, typename Tr::E* tile, int lane) {
  constexpr int D = Tr::kD, U = D / 8;  // 8-code units per token row
#pragma unroll
  for (int it = 0; it < 16 * U / 32; ++it) {
    int u = it * 32 + lane, t, col, at;
    if constexpr (kChunkMajor) {  // consecutive lanes: consecutive 8 bytes of [D/16][16][16]
      col = (u >> 5) * 16 + (u & 1) * 8;
      t = (u >> 1) & 15;
      at = u * 8;
    } else {
      t = u / U;
      col = (u % U) * 8;
      at = t * D + col;
    }
    const uint2 x = *reinterpret_cast<const uint2*>(codes + at);
    *reinterpret_cast<uint4*>(tile + t * Tr::kRowElems + col) = widen_fp8x8<Tr::kKV, typename Tr::E>(x);
  }
}
// V; `valid` (1..16): the tile's tokens in range — a TMA box brings the whole page, whose slots
// past the range may hold anything (NaN codes), and P · V needs zeros there (the cp.asyncs
// zero-fill them already).
template <class Tr, KVLayout L>
__device__ __forceinline__ void widen_v_tile(const std::uint8_t* codes, typename Tr::E* tile, int lane, int valid) {
  if constexpr (L == KVLayout::nhd) {
    constexpr int D = Tr::kD, U = D / 8;
    widen_tokens<Tr>(codes, tile, lane);
    if (valid < 16) {
      __syncwarp();
      for (int u = lane; u < (16 - valid) * U; u += 32)
        *reinterpret_cast<uint4*>(tile + (valid + u / U) * Tr::kRowElems + (u % U) * 8) = make_uint4(0, 0, 0, 0);
    }
  } else {
#pragma unroll
    for (int it = 0; it < 2 * Tr::kD / 32; ++it) {
      const int u = it * 32 + lane, d = u >> 1, g = u & 1;  // dim d, tokens 8g .. 8g + 7
      uint2 x = *reinterpret_cast<const uint2*>(codes + u * 8);
      const int n = valid - 8 * g;  // this unit's tokens in range (little-endian: token 8g + i in byte i)
      if (n < 8) {
        x.x = n >= 4 ? x.x : n <= 0 ? 0u : x.x & (0xffffffffu >> (32 - 8 * n));
        x.y = n <= 4 ? 0u : x.y & (0xffffffffu >> (32 - 8 * (n - 4)));
      }
      *reinterpret_cast<uint4*>(tile + vllm_v_offset<false>(d, g)) = widen_fp8x8<Tr::kKV, typename Tr::E>(x);
    }
  }
}

// A lane's ldmatrix chunks along a tile's 16-dim groups i = 0 .. D/16 − 1 (the k-steps of QKᵀ,
// the dim groups of PV), as byte offsets: offset(i) = base[i % P] + (i / P) · kStride, the
// swizzle's pattern repeating every P groups. The P bases are computed once per warp; a tile's
// D/16 addresses are then its stage address plus a base plus an immediate. (Computed per load,
// the swizzles' index math was about a fifth of an hd-256 tile: ncu of the vLLM TMA kernel, 496 →
// 391 executed instructions per warp-tile; the seed's 16-SM cells 1.02–1.04× faster, bench/results/
// h200-2026-12-06-tile-pipeline.md, A → B.)
template <int P, int kStride>
struct LaneChunks {
  std::uint32_t base[P];
  __device__ __forceinline__ std::uint32_t at(std::uint32_t tile, int i) const {
    return tile + base[i % P] + (i / P) * kStride;
  }
};
// The P bases of a lane's chunks, one offset function for each tile form: Offset::at(a, b, i) is
// the element offset of the lane's chunk (a, b) in 16-dim group i. make() also checks, at compile
// time, the identity the bases rely on for every a < 16, b < 2 and group.
template <class Tr, int P, class Offset>
struct GroupChunks {
  static constexpr int kE = int(sizeof(typename Tr::E));
  static constexpr int kStride = (Offset::at(0, 0, P) - Offset::at(0, 0, 0)) * kE;
  using Type = LaneChunks<P, kStride>;
  static constexpr bool holds() {
    for (int a = 0; a < 16; ++a)
      for (int i = 0; i < Tr::kD / 16; ++i)
        for (int b = 0; b < 2; ++b)
          if (Offset::at(a, b, i) != Offset::at(a, b, i % P) + (i / P) * kStride / kE) return false;
    return true;
  }
  __device__ __forceinline__ static Type make(int a, int b) {
    static_assert(holds(), "the lane's chunk bases (LaneChunks)");
    Type c;
#pragma unroll
    for (int p = 0; p < P; ++p) c.base[p] = Offset::at(a, b, p) * kE;
    return c;
  }
};
// tok_chunk_offset at (row, 16 i + 8 h): the NHD TMA boxes' swizzle repeats every 4 groups (one
// 64-dim box); the other forms are linear in i.
template <class Tr, KVLayout L, bool kTma>
struct TokOffset {
  static constexpr int at(int row, int h, int i) { return tok_chunk_offset<Tr, L, kTma>(row, 16 * i + 8 * h); }
};
template <class Tr, KVLayout L, bool kTma>
using TokChunks = GroupChunks<Tr, kTma && L == KVLayout::nhd ? 4 : 1, TokOffset<Tr, L, kTma>>;
// vllm_v_offset at dim 16 i + d0 (0 ≤ d0 < 16), tokens 8g ..: the TMA swizzle's phase (row & 7,
// row = d / 4) depends on i only through i & 1.
template <bool kTma>
struct VllmVOffset {
  static constexpr int at(int d0, int g, int i) { return vllm_v_offset<kTma>(16 * i + d0, g); }
};
template <class Tr, bool kTma>
using VllmVChunks = GroupChunks<Tr, kTma ? 2 : 1, VllmVOffset<kTma>>;
// A tile's V chunks in either layout: NHD, token rows (TokChunks); vLLM, dim rows.
template <class Tr, KVLayout L, bool kTma>
using VChunks = std::conditional_t<L == KVLayout::nhd, TokChunks<Tr, L, kTma>, VllmVChunks<Tr, kTma>>;

// ---- The tile math: one warp's online softmax over its 16-token tiles --------------------------
// Two arrangements of the same math on the m16n8k16 MMA; the body (decode_sm80_body) runs the
// pipeline and calls, per warp: load_q once, per 16-token tile scores() (S = Q Kᵀ) then update()
// (the online softmax and O += P V: tile(); with Tr::kOverlap the next tile's scores() runs beside
// it), publish() at the end (the warp's m, l and unnormalised O into the combine's scratch [W][16] /
// [W][16][D]).
//
// The variant hooks of a tile (kernels/variant.cuh): each score of the lane passes through its
// query head's logits transform (soft-cap, ALiBi) and the window's mask (keys before win_lo) in
// update(), where the scores are scaled and masked anyway (tile_score). A lane's scores belong
// to two query heads (lane_head(lane, i), i = 0, 1 in each arrangement). PlainTileHooks: none
// (the plain kernels' code is the one of before the hooks).
struct PlainTileHooks {
  static constexpr bool kOn = false;
};
struct VariantTileHooks {
  static constexpr bool kOn = true;
  VariantHead h0, h1;  // the lane's query heads i = 0, 1
  int win_lo;          // the window's first key
  __device__ __forceinline__ const VariantHead& head(int i) const { return i == 0 ? h0 : h1; }
};
// A raw score of the lane's head i (0, 1) at token t of the tile (first token t0), as the online
// softmax takes it: in log2 units, or −inf past the range (t ≥ valid) and, with the hooks, before
// the window; the head's logits transform first.
template <class Hooks>
__device__ __forceinline__ float tile_score(float raw, int t, int valid, float scale_log2, const Hooks& hk, int t0,
                                            int i) {
  bool in = t < valid;
  if constexpr (Hooks::kOn) {
    in = in && t0 + t >= hk.win_lo;
    raw = hk.head(i).logit(raw, 0, t0 + t);
  }
  return in ? raw * scale_log2 : -INFINITY;
}

// Query heads on the MMA's 16 rows (M), tokens on N: any group, 16 heads per CTA.
//   S = Q Kᵀ        16 heads × 16 tokens: D/16 k-steps × 2 MMAs (K tile via ldmatrix)
//   O += P V        P re-packed from the S accumulators as the A operand: D/8 MMAs
template <class Tr, KVLayout L, bool kTma>
struct HeadsOnM {
  using E = typename Tr::E;
  static constexpr int D = Tr::kD, R = Tr::kRowElems;

  using KC = TokChunks<Tr, L, kTma>;
  using VC = VChunks<Tr, L, kTma>;

  const E* sQ = nullptr;
  unsigned qf[Tr::kQInRegs ? D / 16 : 1][4];  // Q as A fragments: rows = query heads, k = dims
  // The lane's ldmatrix chunks: K's B fragments (tokens (lane >> 4)·8 + (lane & 7), dims
  // 16kk + ((lane >> 3) & 1)·8), V's B fragments (NHD: tokens lane & 15, dims 16nn + (lane >> 4)·8;
  // vLLM: dims 16nn + (lane >> 4)·8 + (lane & 7), tokens 8·((lane >> 3) & 1) ..).
  typename KC::Type kc;
  typename VC::Type vc;
  float o[D / 8][4];  // O: 16 rows × D; n-tile j holds dims 8j .. 8j + 7 (C-fragment layout)
  float m[2] = {-INFINITY, -INFINITY};  // running max (log2 units) of rows lane/4 and lane/4 + 8
  float l[2] = {0.f, 0.f};              // running Σ p of the same rows (this lane's columns only)
  __device__ __forceinline__ OnlineSoftmaxView row(int i) { return OnlineSoftmaxView{m[i], l[i]}; }

  __device__ __forceinline__ void load_q(const E* q, int lane) {
    sQ = q;
    kc = KC::make((lane >> 4) * 8 + (lane & 7), (lane >> 3) & 1);
    if constexpr (L == KVLayout::nhd)
      vc = VC::make(lane & 15, lane >> 4);
    else
      vc = VC::make((lane >> 4) * 8 + (lane & 7), (lane >> 3) & 1);
    if constexpr (Tr::kQInRegs) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        sm80::ldmatrix_x4(qf[kk], sm80::smem_addr(sQ + (lane & 15) * R + kk * 16 + (lane >> 4) * 8));
    }
#pragma unroll
    for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  }

  struct Scores {
    // S of one tile: s[n] covers tokens 8n .. 8n + 7; this lane holds rows lane/4 (s[n][0..1])
    // and lane/4 + 8 (s[n][2..3]) at tokens 8n + 2·quad + {0, 1}.
    float s[2][4];
  };

  // The query-head row of the lane's scores s[n][2i], s[n][2i + 1] (the MMA's rows).
  __device__ __forceinline__ static int lane_head(int lane, int i) { return (lane >> 2) + 8 * i; }

  __device__ __forceinline__ Scores scores(const E* sK, int lane) const {
    const std::uint32_t k_tile = sm80::smem_addr(sK);
    // S = Q Kᵀ.
    // Even and odd k-steps accumulate into two sets (s, s_odd), summed after the loop: the
    // dependent MMA chain per accumulator halves (8 instead of 16 at head_dim 256). With one warp
    // per scheduler at head_dim 256 (ncu, batch 16 × 8k: 0.25 eligible warps per scheduler, 36 %
    // of the stall cycles on fixed-latency dependencies) that is time the copies of the next
    // tile wait for. A/B on the H200, same build, same run (bench/results/
    // decode-h200-2026-11-30-experiments.md, section 6): hd256 1.3–2.9 % faster on six cells
    // (b16 × 8k 169.0 → 164.0 µs, b16 × 32k 579 → 564), hd128 unchanged within 0.5 %.
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    float s_odd[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      float(&acc)[2][4] = (kk & 1) ? s_odd : s;
      unsigned qa[4], kb[4];
      if constexpr (Tr::kQInRegs) {
        qa[0] = qf[kk][0];
        qa[1] = qf[kk][1];
        qa[2] = qf[kk][2];
        qa[3] = qf[kk][3];
      } else {
        sm80::ldmatrix_x4(qa, sm80::smem_addr(sQ + (lane & 15) * R + kk * 16 + (lane >> 4) * 8));
      }
      sm80::ldmatrix_x4(kb, kc.at(k_tile, kk));
      sm80::mma_16816<Tr::kDType>(acc[0], qa, kb[0], kb[1]);
      sm80::mma_16816<Tr::kDType>(acc[1], qa, kb[2], kb[3]);
    }
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] += s_odd[n][e];
    return Scores{{{s[0][0], s[0][1], s[0][2], s[0][3]}, {s[1][0], s[1][1], s[1][2], s[1][3]}}};
  }

  // The online softmax and O += P V of one tile (first token t0) whose scores are `sc`; `valid`
  // (≥ 1) of its tokens are in range; hk: the variant hooks (PlainTileHooks: none).
  template <class Hooks>
  __device__ __forceinline__ void update(Scores& sc, const E* sV, int valid, float scale_log2, int lane,
                                         const Hooks& hk, int t0) {
    constexpr Log2Units<> kUnits;  // scores scaled to log2 units, exp2f
    const int quad = lane & 3;
    const std::uint32_t v_tile = sm80::smem_addr(sV);
    float(&s)[2][4] = sc.s;

    // Online softmax: (variant: transform the logits, mask keys before the window,) scale, mask
    // tokens past the range, new row max, rescale O and l.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = tile_score(s[n][e], n * 8 + 2 * quad + (e & 1), valid, scale_log2, hk, t0, e >> 1);
        s[n][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    float alpha[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
      // m_new is finite: token 0 of the tile is in range. First tile: alpha = 2^−inf = 0.
      alpha[i] = row(i).rescale_to(row(i).max_with(mx[i]), kUnits);
    }
    float rs[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = row(e >> 1).weight(s[n][e], kUnits);  // masked: 0
        s[n][e] = p;
        rs[e >> 1] += p;
      }
    row(0).accumulate(alpha[0], rs[0]);
    row(1).accumulate(alpha[1], rs[1]);
#pragma unroll
    for (int jj = 0; jj < D / 8; ++jj) {
      o[jj][0] *= alpha[0];
      o[jj][1] *= alpha[0];
      o[jj][2] *= alpha[1];
      o[jj][3] *= alpha[1];
    }

    // O += P V: P (16 rows × 16 tokens) re-packed from the S accumulators as the A operand.
    const unsigned pa[4] = {sm80::pack2<Tr::kDType>(s[0][0], s[0][1]), sm80::pack2<Tr::kDType>(s[0][2], s[0][3]),
                            sm80::pack2<Tr::kDType>(s[1][0], s[1][1]), sm80::pack2<Tr::kDType>(s[1][2], s[1][3])};
#pragma unroll
    for (int nn = 0; nn < D / 16; ++nn) {
      unsigned vb[4];
      sm80::ldmatrix_x4<L == KVLayout::nhd>(vb, vc.at(v_tile, nn));
      sm80::mma_16816<Tr::kDType>(o[2 * nn], pa, vb[0], vb[1]);
      sm80::mma_16816<Tr::kDType>(o[2 * nn + 1], pa, vb[2], vb[3]);
    }
  }

  __device__ __forceinline__ void publish(float* sO, float* sM, float* sL, int warp, int lane) {
    const int r0 = lane >> 2, quad = lane & 3;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      row(i).accumulate(__shfl_xor_sync(0xffffffffu, l[i], 1));
      row(i).accumulate(__shfl_xor_sync(0xffffffffu, l[i], 2));
    }
    if (quad == 0) {
      sM[warp * kRows + r0] = m[0];
      sM[warp * kRows + r0 + 8] = m[1];
      sL[warp * kRows + r0] = l[0];
      sL[warp * kRows + r0 + 8] = l[1];
    }
#pragma unroll
    for (int jj = 0; jj < D / 8; ++jj) {
      const int col = jj * 8 + 2 * quad;
      *reinterpret_cast<float2*>(sO + (warp * kRows + r0) * D + col) = make_float2(o[jj][0], o[jj][1]);
      *reinterpret_cast<float2*>(sO + (warp * kRows + r0 + 8) * D + col) = make_float2(o[jj][2], o[jj][3]);
    }
  }
};

// The online softmax and the publish of the heads-on-N arrangement, whatever its tiles hold
// (HeadsOnN: 16-bit tiles; HeadsOnNCodes: fp8 codes), over the arrangement's members: Oᵀ (o) and
// the running max m (log2 units) and Σ p (l) of heads 2·quad, 2·quad + 1 over this lane's tokens.
// (Functions over the members rather than a base class that holds them: with the base class the
// 16-bit kernels' SASS changed — member order — and this keeps it as it was.)
template <int D>
struct HeadsOnNRefs {
  float (&o)[D / 16][4];
  float (&m)[2];
  float (&l)[2];
  __device__ __forceinline__ OnlineSoftmaxView head(int e) const { return OnlineSoftmaxView{m[e], l[e]}; }
  __device__ __forceinline__ void clear_o() const {
#pragma unroll
    for (int j = 0; j < D / 16; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  }
};

// The types and lane map both heads-on-N arrangements share (an empty base: the members, and
// their order, stay each arrangement's own).
struct HeadsOnNLayout {
  struct Scores {
    float s[4];  // Sᵀ of one tile: rows g (s[0..1]) and g + 8 (s[2..3]) of heads 2·quad + {0, 1}
  };
  // The query head (the MMA's column) of the lane's scores s[i], s[i + 2].
  __device__ __forceinline__ static int lane_head(int lane, int i) { return 2 * (lane & 3) + i; }
};

// The online softmax of one tile (first token t0) whose scores are s (Sᵀ: rows g (s[0..1]) and
// g + 8 (s[2..3]) of heads 2·quad + {0, 1}); `valid` (≥ 1) of its tokens are in range; hk: the
// variant hooks (PlainTileHooks: none); Rows::token_of_row(r): the tile's token in S row r (the
// order the K fragments were loaded in). O is rescaled; returns Pᵀ as the B fragments of
// Oᵀ += Vᵀ Pᵀ (k = S rows 2·quad + {0, 1} (+ 8), n = head g): the transposes of the packed S
// pairs of rows g and g + 8.
template <class Tr, class Rows, class Hooks>
__device__ __forceinline__ uint2 heads_on_n_softmax(const HeadsOnNRefs<Tr::kD>& st, float (&s)[4], int valid,
                                                    float scale_log2, int lane, const Hooks& hk, int t0) {
  constexpr int D = Tr::kD;
  // Scores in log2 units; the weights by one MUFU.EX2 (exp2f's fix-up for results below 2^−126
  // changes nothing a softmax weight contributes: sm80_ptx.cuh).
  constexpr Log2Units<sm80::Exp2Approx> kUnits;
  const int g = lane >> 2;

  // Online softmax per head (a column): (variant: transform the logits, mask keys before the
  // window,) scale, mask tokens past the range, the max over the tile's 16 tokens (this lane's
  // two, then the 8 lanes of the same quad position), rescale.
#pragma unroll
  for (int e = 0; e < 4; ++e)
    s[e] = tile_score(s[e], Rows::token_of_row(g + (e >> 1) * 8), valid, scale_log2, hk, t0, e & 1);
  float mx[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
  float alpha[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], off));
    // m_new is finite: token 0 of the tile is in range. First tile: alpha = 2^−inf = 0.
    alpha[i] = st.head(i).rescale_to(st.head(i).max_with(mx[i]), kUnits);
  }
  float rs[2] = {0.f, 0.f};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    s[e] = st.head(e & 1).weight(s[e], kUnits);  // masked: 0
    rs[e & 1] += s[e];
  }
  st.head(0).accumulate(alpha[0], rs[0]);
  st.head(1).accumulate(alpha[1], rs[1]);
  // O's rescale is skipped when no head's max moved in the warp (alpha = 1 exactly: the same
  // bits). The vote is taken in the overlap form only, where it was measured (h200-2026-12-06-
  // tile-pipeline.md, D → E): on 16 SMs the 256k cells 1.02–1.03× (the max seldom moves), 8k
  // 0.98–0.99×.
  bool rescale = true;
  if constexpr (Tr::kOverlap) rescale = __any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f);
  if (rescale) {
#pragma unroll
    for (int nn = 0; nn < D / 16; ++nn) {
      st.o[nn][0] *= alpha[0];
      st.o[nn][1] *= alpha[1];
      st.o[nn][2] *= alpha[0];
      st.o[nn][3] *= alpha[1];
    }
  }
  return make_uint2(sm80::movmatrix_trans(sm80::pack2<Tr::kDType>(s[0], s[1])),
                    sm80::movmatrix_trans(sm80::pack2<Tr::kDType>(s[2], s[3])));
}

// Sᵀ's accumulator sets (HeadsOnN::scores says why there are several) summed pairwise into set 0.
template <int N>
__device__ __forceinline__ void sum_sets(float (&acc)[N][4]) {
  static_assert(N > 0 && (N & (N - 1)) == 0, "a power of two");
#pragma unroll
  for (int half = N / 2; half >= 1; half /= 2)
#pragma unroll
    for (int i = 0; i < half; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][e] += acc[i + half][e];
}

// Oᵀ's m-tile row r is dim r of its 16 (HeadsOnN; HeadsOnNCodes on vLLM pages).
struct DimsInOrder {
  __host__ __device__ static constexpr int dim_of_row(int r) { return r; }
};

// Heads 2·quad + {0, 1} from lanes 0..3 (l summed over the 8 lanes that share them); rows 8..15
// of the scratch stay unwritten: combine_and_store reads the CTA's w.rows ≤ 8. Dims: the dim
// of Oᵀ's m-tile rows (DimsInOrder, or NhdCodeDims: fp8_fragments.hpp).
template <int D, class Dims = DimsInOrder>
__device__ __forceinline__ void heads_on_n_publish(const HeadsOnNRefs<D>& st, float* sO, float* sM, float* sL,
                                                   int warp, int lane) {
  const int g = lane >> 2, quad = lane & 3;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) st.head(i).accumulate(__shfl_xor_sync(0xffffffffu, st.l[i], off));
  if (g == 0) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sM[warp * kRows + 2 * quad + e] = st.m[e];
      sL[warp * kRows + 2 * quad + e] = st.l[e];
    }
  }
#pragma unroll
  for (int nn = 0; nn < D / 16; ++nn)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      sO[(warp * kRows + 2 * quad + (e & 1)) * D + nn * 16 + Dims::dim_of_row(g + (e >> 1) * 8)] = st.o[nn][e];
}

// S rows in token order: the 16-bit tiles' ldmatrix rows are the tile's tokens.
struct RowsInOrder {
  __host__ __device__ static constexpr int token_of_row(int r) { return r; }
};

// Query heads on the MMA's 8 columns (N), the tile's 16 tokens on its rows: a group of ≤ 8 heads
// (decode_sm80_heads_on_n, policy.hpp). On the 16 rows a group of 4–6 heads — the seed's
// Qwen3.5/3.6 at TP4 — leaves 10–12 rows padded; here it fills 4–6 of 8 columns, and a tile
// takes half the MMAs, and O half the accumulators (D/4 a lane: 64 at head_dim 256, not 128).
//   Sᵀ = K Qᵀ       16 tokens × 8 heads: D/16 MMAs (the K tile as the A operand; Q's B
//                   fragments in registers at every head dim)
//   Oᵀ += Vᵀ Pᵀ     Pᵀ from the S accumulators, packed and transposed in registers (movmatrix),
//                   as the B operand; Vᵀ as the A operand: D/16 MMAs
template <class Tr, KVLayout L, bool kTma>
struct HeadsOnN : HeadsOnNLayout {
  using E = typename Tr::E;
  static constexpr int D = Tr::kD, R = Tr::kRowElems;
  static_assert(D % 32 == 0, "Q's fragments are loaded two k-steps at a time");

  using KC = TokChunks<Tr, L, kTma>;
  using VC = VChunks<Tr, L, kTma>;

  unsigned qb[D / 16][2];  // Q as B fragments: k = dims 16kk .., n = query heads (rows 0..7 of sQ)
  // The lane's ldmatrix chunks: K's A fragments (tokens lane & 15, dims 16kk + (lane >> 4)·8),
  // Vᵀ's A fragments (NHD: tokens (lane >> 4)·8 + (lane & 7), dims 16nn + ((lane >> 3) & 1)·8;
  // vLLM: dims 16nn + ((lane >> 3) & 1)·8 + (lane & 7), tokens 8·(lane >> 4) ..).
  typename KC::Type kc;
  typename VC::Type vc;
  float o[D / 16][4];      // Oᵀ: m-tile nn = dims 16nn .. 16nn + 15, n = heads (C-fragment layout)
  float m[2] = {-INFINITY, -INFINITY};  // running max (log2 units) of heads 2·quad, 2·quad + 1
  float l[2] = {0.f, 0.f};              // running Σ p of those heads over this lane's tokens
  __device__ __forceinline__ HeadsOnNRefs<D> state() { return HeadsOnNRefs<D>{o, m, l}; }

  __device__ __forceinline__ void load_q(const E* sQ, int lane) {
    kc = KC::make(lane & 15, lane >> 4);
    if constexpr (L == KVLayout::nhd)
      vc = VC::make((lane >> 4) * 8 + (lane & 7), (lane >> 3) & 1);
    else
      vc = VC::make(((lane >> 3) & 1) * 8 + (lane & 7), lane >> 4);
    // One x4 per two k-steps: rows = heads lane & 7, matrices = dims +0, +8, +16, +24.
#pragma unroll
    for (int k2 = 0; k2 < D / 32; ++k2) {
      unsigned r[4];
      sm80::ldmatrix_x4(r, sm80::smem_addr(sQ + (lane & 7) * R + k2 * 32 + (lane >> 3) * 8));
      qb[2 * k2][0] = r[0];
      qb[2 * k2][1] = r[1];
      qb[2 * k2 + 1][0] = r[2];
      qb[2 * k2 + 1][1] = r[3];
    }
    state().clear_o();
  }

  __device__ __forceinline__ Scores scores(const E* sK, int lane) const {
    const std::uint32_t k_tile = sm80::smem_addr(sK);
    // Sᵀ = K Qᵀ: k-step kk accumulates into set kk % kQkSets, the sets summed after the loop (as HeadsOnM's
    // even/odd pair, its comment says why). Here one MMA per k-step is the tile's only chain: with
    // 2 sets it was 8 dependent MMAs long, and with one warp per scheduler nothing hid it (ncu,
    // 4 warps × 2 stages, 2048 tokens per CTA: 0.19 eligible warps per scheduler, 5.3 cycles per
    // issued instruction, the stall samples on the QKᵀ and PV HMMAs). 4 sets, A/B on the H200 in
    // one run (bench/results/h200-2026-12-02-qk-chains/, call 4): the seed's cells at ≥ 32k
    // 1.45–1.65× faster on a 16-SM partition (0.31–0.35 → 0.50–0.53 of the read floor),
    // 1.02–1.10× on 132 SMs; the default grid's NHD cells unchanged (±0.7 %).
    constexpr int kQkSets = 4;  // a power of two (sum_sets)
    float acc[kQkSets][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned ka[4];
      sm80::ldmatrix_x4(ka, kc.at(k_tile, kk));
      sm80::mma_16816<Tr::kDType>(acc[kk % kQkSets], ka, qb[kk][0], qb[kk][1]);
    }
    sum_sets(acc);
    return Scores{{acc[0][0], acc[0][1], acc[0][2], acc[0][3]}};
  }

  // The online softmax and Oᵀ += Vᵀ Pᵀ of one tile (first token t0) whose scores are `sc`;
  // `valid` (≥ 1) of its tokens are in range; hk: the variant hooks (PlainTileHooks: none).
  template <class Hooks>
  __device__ __forceinline__ void update(Scores& sc, const E* sV, int valid, float scale_log2, int lane,
                                         const Hooks& hk, int t0) {
    const std::uint32_t v_tile = sm80::smem_addr(sV);
    const uint2 pb = heads_on_n_softmax<Tr, RowsInOrder>(state(), sc.s, valid, scale_log2, lane, hk, t0);
    // Oᵀ += Vᵀ Pᵀ.
#pragma unroll
    for (int nn = 0; nn < D / 16; ++nn) {
      // Vᵀ's A fragments (rows = dims 16nn .., k = tokens): matrices (tokens 0..7, dims +0),
      // (0..7, +8), (8..15, +0), (8..15, +8); transposed by ldmatrix from token rows (NHD),
      // read as they are from the vLLM tile's dim rows.
      unsigned va[4];
      sm80::ldmatrix_x4<L == KVLayout::nhd>(va, vc.at(v_tile, nn));
      sm80::mma_16816<Tr::kDType>(o[nn], va, pb.x, pb.y);
    }
  }

  __device__ __forceinline__ void publish(float* sO, float* sM, float* sL, int warp, int lane) {
    heads_on_n_publish(state(), sO, sM, sL, warp, lane);
  }
};

// The heads-on-N tile math straight from an fp8 cache's codes (no widening pass through shared
// memory): ldmatrix reads 8 × 16-code matrices of the ring stage and the lane widens its 4 codes
// of each into two fp16 pairs of an MMA fragment (kernels/fp8_fragments.hpp says where they land;
// tests/cpu/test_fp8_fragments.cpp replays it).
//   vLLM: the stage holds the page's K block [D/16][16 tok][16 codes] and V block [D][16 tok]; a
//     V dim row holds the tile's tokens, so the MMAs sum over a fixed permutation π of dims (QKᵀ)
//     and tokens (PV) that both operands share, and S row r is token π(r) (RowsOfCodes).
//   NHD: K and V token rows [16][D], swizzled (codes_nhd_offset); K's matrices are 8 tokens in
//     order, Vᵀ's come from ldmatrix .trans of the same rows and two byte permutes a register
//     pair, so tokens stay in order and Oᵀ's m-tile rows are dims 2g, 2g + 1 (NhdCodeDims).
// Per 16-token hd-256 tile a lane issues 16 ldmatrix.x4 and 128 code-pair widenings (NHD: and 64
// byte permutes), against the widening pass's 32 LDS.64 + 128 widenings + 32 STS.128 +
// __syncwarp + 32 ldmatrix.x4. Partial tiles: K rows past the range are masked in S (tile_score
// with S row r's token); V codes past it are zeroed in registers.
// (vLLM: K's x4 reads are 2-way bank-conflicted — a matrix's tokens π(0..7) = 0, 1, 4, 5, 8, 9, 12,
// 13 include t and t + 8, 128 B apart in the page's block; V's dim rows are conflict-free. NHD:
// conflict-free, the swizzle's purpose.)
template <class Tr, KVLayout L>
struct HeadsOnNCodes : HeadsOnNLayout {
  using E = std::uint8_t;     // the tiles: 1-byte codes
  using QE = typename Tr::E;  // q's and the MMAs' 16-bit type
  static constexpr int D = Tr::kD, R = Tr::kRowElems;
  static constexpr bool kNhd = L == KVLayout::nhd;
  static_assert(D % 32 == 0, "K's fragments are loaded two k-steps at a time");
  static_assert(!kNhd || (D % 128 == 0 && codes_nhd_row_holds(D)), "NHD: whole 128-byte boxes a row");
  static_assert(Tr::kFp8 && Tr::kDType == DType::fp16, "fp8 codes widen to fp16 MMA operands");
  using Rows = std::conditional_t<kNhd, RowsInOrder, RowsOfCodes>;  // S row r's token
  using Dims = std::conditional_t<kNhd, NhdCodeDims, DimsInOrder>;  // Oᵀ m-tile row r's dim

  unsigned qb[D / 16][2];  // Q as B fragments: k ↔ dims 16kk + π(k), n = query heads (rows 0..7 of sQ)
  // The lane's ldmatrix rows, bytes: vLLM, in a K block (+ 512 a k-step pair); NHD, of k-step
  // pairs 0..3 in K and V alike (+ 2048 a box).
  std::uint32_t rows[kNhd ? 4 : 1];
  float o[D / 16][4];      // Oᵀ, m and l as HeadsOnN's
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.f, 0.f};
  __device__ __forceinline__ HeadsOnNRefs<D> state() { return HeadsOnNRefs<D>{o, m, l}; }

  __device__ __forceinline__ void load_q(const QE* sQ, int lane) {
    if constexpr (kNhd) {
#pragma unroll
      for (int p = 0; p < 4; ++p) rows[p] = codes_nhd_row(lane, p);
    } else {
      rows[0] = codes_k_row(lane);
    }
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint2 x = *reinterpret_cast<const uint2*>(sQ + g * R + codes_q_dim(kk, q));
      qb[kk][0] = x.x;  // k = 2q, 2q + 1
      qb[kk][1] = x.y;  // k = 2q + 8, 2q + 9
    }
    state().clear_o();
  }

  // The lane's ldmatrix row of k-step pair k2 of a K tile at `tile` (NHD: and of Vᵀ's m-tile pair
  // k2 of a V tile; vLLM: a V tile's is v_row_at).
  __device__ __forceinline__ std::uint32_t row_at(std::uint32_t tile, int k2) const {
    if constexpr (kNhd)
      return tile + rows[k2 % 4] + (k2 / 4) * 2048;
    else
      return tile + rows[0] + k2 * 512;
  }
  // ... of Vᵀ's m-tile pair p of a V tile at `tile`: NHD, the K rows (.trans reads them); vLLM,
  // dim rows 32p + lane of the [D][16 tok] block.
  __device__ __forceinline__ std::uint32_t v_row_at(std::uint32_t tile, int p, int lane) const {
    if constexpr (kNhd)
      return row_at(tile, p);
    else
      return tile + codes_v_row(lane) + p * 512;
  }

  // An A fragment (16 rows × k16) from two ldmatrix registers of 4 codes: rows g and g + 8.
  __device__ __forceinline__ static void widen_a(std::uint32_t (&a)[4], std::uint32_t row_g, std::uint32_t row_g8) {
    const uint2 x = widen_fp8x4<Tr::kKV, __half>(row_g), y = widen_fp8x4<Tr::kKV, __half>(row_g8);
    codes_a_fragment(a, x.x, x.y, y.x, y.y);
  }

  __device__ __forceinline__ Scores scores(const E* sK, int lane) const {
    const std::uint32_t k_tile = sm80::smem_addr(sK);
    // Sᵀ = K Qᵀ in 4 accumulator sets (HeadsOnN::scores says why).
    constexpr int kQkSets = 4;
    float acc[kQkSets][4] = {};
#pragma unroll
    for (int k2 = 0; k2 < D / 32; ++k2) {
      std::uint32_t r[4];
      sm80::ldmatrix_x4(r, row_at(k_tile, k2));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int kk = 2 * k2 + h;
        std::uint32_t ka[4];
        widen_a(ka, r[2 * h], r[2 * h + 1]);
        sm80::mma_16816<DType::fp16>(acc[kk % kQkSets], ka, qb[kk][0], qb[kk][1]);
      }
    }
    sum_sets(acc);
    return Scores{{acc[0][0], acc[0][1], acc[0][2], acc[0][3]}};
  }

  template <class Hooks>
  __device__ __forceinline__ void update(Scores& sc, const E* sV, int valid, float scale_log2, int lane,
                                         const Hooks& hk, int t0) {
    const std::uint32_t v_tile = sm80::smem_addr(sV);
    const uint2 pb = heads_on_n_softmax<Tr, Rows>(state(), sc.s, valid, scale_log2, lane, hk, t0);
    // Oᵀ += Vᵀ Pᵀ: Vᵀ's A fragments of m-tiles 2p, 2p + 1 from one x4 — vLLM: over the dim rows
    // 32p + lane (16 codes each: the tile's tokens); NHD: .trans over the token rows of chunks
    // 2p, 2p + 1, each register pair (tokens 0..7, 8..15) permuted into dims 2g and 2g + 1 — the
    // codes past the range zeroed.
    const std::uint32_t keep = kNhd ? codes_in_range_in_order(valid, lane & 3) : codes_in_range(valid, lane & 3);
#pragma unroll
    for (int p = 0; p < D / 32; ++p) {
      std::uint32_t r[4];
      sm80::ldmatrix_x4<kNhd>(r, v_row_at(v_tile, p, lane));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        std::uint32_t va[4];
        if constexpr (kNhd)
          widen_a(va, __byte_perm(r[2 * h], r[2 * h + 1], kNhdEvenDim) & keep,
                  __byte_perm(r[2 * h], r[2 * h + 1], kNhdOddDim) & keep);
        else
          widen_a(va, r[2 * h] & keep, r[2 * h + 1] & keep);
        sm80::mma_16816<DType::fp16>(o[2 * p + h], va, pb.x, pb.y);
      }
    }
  }

  __device__ __forceinline__ void publish(float* sO, float* sM, float* sL, int warp, int lane) {
    heads_on_n_publish<D, Dims>(state(), sO, sM, sL, warp, lane);
  }
};

// One 16-token tile of either arrangement: update(scores()) (the overlap form of the body splits
// the two across iterations).
template <class Math, class Hooks>
__device__ __forceinline__ void tile(Math& math, const typename Math::E* sK, const typename Math::E* sV, int valid,
                                     float scale_log2, int lane, const Hooks& hk, int t0) {
  typename Math::Scores sc = math.scores(sK, lane);
  math.update(sc, sV, valid, scale_log2, lane, hk, t0);
}

// Zeroes the tokens ≥ valid (1 ≤ valid < 16) of a TMA V tile: token rows (NHD) or, in each dim's
// two 16-byte chunks (vLLM), the elements of those tokens.
template <class Tr, KVLayout L>
__device__ __forceinline__ void zero_v_past(typename Tr::E* v, int valid, int lane) {
  constexpr int D = Tr::kD;
  if constexpr (L == KVLayout::vllm) {
    for (int i = lane; i < 2 * D; i += 32) {
      const int d = i >> 1, g = i & 1, n = valid - 8 * g;  // this chunk's tokens < valid
      if (n >= 8) continue;
      uint4* p = reinterpret_cast<uint4*>(v + vllm_v_offset<true>(d, g));
      uint4 x = n > 0 ? *p : make_uint4(0, 0, 0, 0);
      unsigned* wd = &x.x;
#pragma unroll
      for (int j = 0; j < 4; ++j)  // elements 2j, 2j + 1 (little-endian halves of word j)
        wd[j] = (2 * j < n ? wd[j] & 0xffffu : 0u) | (2 * j + 1 < n ? wd[j] & 0xffff0000u : 0u);
      *p = x;
    }
  } else {
    for (int i = lane; i < (16 - valid) * (D / 8); i += 32) {
      const int r = valid + i / (D / 8), c = i % (D / 8);
      *reinterpret_cast<uint4*>(v + (c >> 3) * 16 * 64 + r * 64 + (c & 7) * 8) = make_uint4(0, 0, 0, 0);
    }
  }
}

// bf16 q rows [rows][D] (rows ≤ 16; the rest of sQ's 16 rows zero) into sQ as fp16 · 2^e, the
// power of two e chosen for the CTA so that its largest |q| lands in [2^14, 2^15): every bf16
// value down to 2^−31 of the largest is then exact in fp16 (bf16 has 8 significant bits, fp16 11
// down to 2^−14 and, subnormal, 8 of them down to 2^−17); a smaller one rounds, moving a score by
// less than 2^−31 of its largest term. Returns e (0 when q holds only zeros or a non-finite
// value, which then flows into the scores as it would in bf16). One more CTA barrier, once per
// CTA.
template <class Tr>
__device__ __forceinline__ int load_q_fp16(const __nv_bfloat16* q, int rows, __half* sQ, int tid) {
  constexpr int D = Tr::kD, kChunks = kRows * (D / 8), kPer = (kChunks + Tr::kThreads - 1) / Tr::kThreads;
  __shared__ unsigned warp_max[Tr::kWarps];
  uint4 x[kPer];
  unsigned mx = 0;  // the largest |q| as float bits (non-negative floats order as their bits)
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = tid + k * Tr::kThreads, r = i / (D / 8), c = i % (D / 8);
    x[k] = make_uint4(0, 0, 0, 0);
    if (i < kChunks && r < rows) x[k] = *reinterpret_cast<const uint4*>(q + r * D + c * 8);
    const unsigned* wd = &x[k].x;
#pragma unroll
    for (int j = 0; j < 4; ++j) mx = max(mx, max((wd[j] & 0x7fffu) << 16, wd[j] & 0x7fff0000u));
  }
  mx = __reduce_max_sync(0xffffffffu, mx);
  if ((tid & 31) == 0) warp_max[tid >> 5] = mx;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < Tr::kWarps; ++i) mx = max(mx, warp_max[i]);
  int e = 0;
  if (mx != 0 && mx < 0x7f800000u) {
    frexpf(__uint_as_float(mx), &e);  // largest |q| < 2^e
    e = min(max(15 - e, -120), 120);
  }
  const float f = ldexpf(1.f, e);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = tid + k * Tr::kThreads, r = i / (D / 8), c = i % (D / 8);
    if (i >= kChunks) continue;
    const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&x[k]);
    uint4 h;
    unsigned* hd = &h.x;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 v = __bfloat1622float2(b[j]);
      const __half2 p = __floats2half2_rn(v.x * f, v.y * f);
      hd[j] = *reinterpret_cast<const unsigned*>(&p);
    }
    *reinterpret_cast<uint4*>(sQ + r * Tr::kRowElems + c * 8) = h;
  }
  return e;
}

// The kernels' body; kTma: K/V by TMA boxes from the maps tk / tv (make_tma_*_maps,
// decode_launch.cuh); kHeadsOnN: the tile math with the query heads on the MMA's columns (a group
// of ≤ 8: HeadsOnN), else on its rows. Var: the variant kind (kernels/variant.cuh); PlainVariant
// compiles every hook out. With GeneralVariant: the window moves the CTA's first token and its
// first tile masks the keys before it (decode_variant.cuh), soft-cap and ALiBi transform each
// score in update(), and the sinks join the warps' states before the combine (fold_sinks).
template <class Tr, KVLayout L, bool kTma, bool kHeadsOnN, class Var = PlainVariant>
__device__ __forceinline__ void decode_sm80_body(const DecodeArgs& a, const CUtensorMap* tk, const CUtensorMap* tv,
                                                 int* input_errors, const Var& var = Var{}) {
  static_assert(!kTma || L == KVLayout::vllm || Tr::kD % 64 == 0 || Tr::kFp8, "NHD TMA tiles: head_dim % 64 == 0");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  // Compiled for an older arch only so that the build links; never launched there (paged_decode
  // checks the target against the device).
  return;
#else
  using E = typename Tr::E;
  constexpr int D = Tr::kD, S = Tr::kStages, W = Tr::kWarps, R = Tr::kRowElems;
  extern __shared__ __align__(16) unsigned char smem[];
  E* sQ = reinterpret_cast<E*>(smem);  // [16][D + 8]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // The block-table entries of this warp's first two tiles do not depend on the sequence's length
  // (a partition starts at split · partition_tokens, V1 at 0), so they are read before seq_lens:
  // after the cold-L2 flush of a decode step, seq_lens, the table and K/V are each a trip to HBM,
  // and the first K/V copies now wait for two trips instead of three. Entries past the
  // sequence's end are read (the row has max_blocks of them) but never used. (The general kind
  // reads them after the window has moved the first token: load_page below.)
  const int* bt = a.block_table + static_cast<std::int64_t>(blockIdx.z) * a.max_blocks;
  const int first_tok = (a.num_splits == 1 ? 0 : static_cast<int>(blockIdx.y) * a.partition_tokens) + warp * 16;
  const long long covered = static_cast<long long>(a.max_blocks) << a.page_shift;
  auto early_page = [&](int j) {
    const int tok = first_tok + j * W * 16 + (lane & 15);
    return tok < covered ? __ldg(bt + (tok >> a.page_shift)) : 0;
  };
  int early0 = 0, early1 = 0;
  if constexpr (!Var::kOn) {
    early0 = early_page(0);
    early1 = early_page(1);
  }

  CtaWork w = cta_work<Tr::kGuard>(a, input_errors);
  [[maybe_unused]] DecodeWindow win{0, 0};  // (general kind) decode_variant.cuh
  if constexpr (Var::kOn) win = decode_window(a, var, w);
  if (w.idle) return;
  bool bad_page = false;  // the guard: this lane met a block id outside [0, num_pages)
  E* stages = sQ + Tr::kQElems + warp * S * Tr::kStageElems;  // this warp's [S][K tile | V tile]
  // TMA: this warp's [S][K tile | V tile] of dense swizzled [D/64][16][64] tiles, and its S
  // mbarriers (one phase per use of a stage).
  constexpr int kT = 16 * D;
  __shared__ __align__(8) std::uint64_t tma_bars[kTma ? W * S : 1];
  E* tstages = nullptr;
  std::uint32_t bar0 = 0;
  if constexpr (kTma) {
    const std::uint32_t base = sm80::smem_addr(sQ + Tr::kQElems);
    const std::uint32_t aligned = (base + 1023u) & ~1023u;
    static_assert(Tr::kWarps * Tr::kStages * 2 * 16 * 8 * int(sizeof(E)) >= 1023, "no room to align the TMA stages");
    tstages = reinterpret_cast<E*>(reinterpret_cast<unsigned char*>(sQ + Tr::kQElems) + (aligned - base)) + warp * S * 2 * kT;
    bar0 = sm80::smem_addr(&tma_bars[warp * S]);
    if (lane == 0) {
      for (int st = 0; st < S; ++st) ptx::mbar_init(bar0 + 8 * st, 1);
      ptx::fence_proxy_async();  // the initialised barriers are visible to the TMA unit
    }
    __syncwarp();
  }

  // This warp's tiles: w, w + W, … of the CTA's ceil(len / 16) tiles.
  const int n_tiles = (w.kv_end - w.kv_begin + 15) >> 4;
  const int my_tiles = n_tiles > warp ? (n_tiles - warp + W - 1) / W : 0;
  const std::uint64_t pol = ptx::l2_evict_first();
  // fp8: the widened K and V tiles, then the ring of codes (Sm80Traits::kFp8StageBytes a stage)
  // from the next 128-byte boundary — the cp.asyncs' and the TMA boxes' destination. The tile
  // math on the codes themselves (kCodes) has no widened tiles: the warps' rings follow Q from
  // its next 1024-byte boundary, the kernel's footprint Sm80Traits::kCodesSmemBytes (the swizzled
  // NHD ring's pattern is the shared address's bits 4–9).
  constexpr bool kCodes = Tr::kFp8 && decode_sm80_fp8_fragments(L, kHeadsOnN, D);
  constexpr bool kSwizzledRing = kCodes && L == KVLayout::nhd;
  [[maybe_unused]] std::uint8_t* ring = [&] {
    if constexpr (kCodes) {
      auto* p = reinterpret_cast<std::uint8_t*>(sQ + Tr::kQElems);
      return p + ((1024u - (sm80::smem_addr(p) & 1023u)) & 1023u) + warp * S * Tr::kFp8StageBytes;
    } else {
      auto* p = reinterpret_cast<std::uint8_t*>(stages + Tr::kStageElems);
      return p + ((128u - (sm80::smem_addr(p) & 127u)) & 127u);
    }
  }();
  auto issue_tile = [&](int st, int t0, int pg) {
    if constexpr (Tr::kFp8) {
      std::uint8_t* r = ring + st * Tr::kFp8StageBytes;
      if (a.l2_evict_first)
        sm80_issue_tile_fp8<Tr, L, true, kSwizzledRing>(a, w, r, t0, pg, lane, pol);
      else
        sm80_issue_tile_fp8<Tr, L, false, kSwizzledRing>(a, w, r, t0, pg, lane, pol);
    } else {
      E* p = stages + st * Tr::kStageElems;
      if (a.l2_evict_first)
        sm80_issue_tile<Tr, L, true>(a, w, p, t0, pg, lane, pol);
      else
        sm80_issue_tile<Tr, L, false>(a, w, p, t0, pg, lane, pol);
    }
  };
  auto tile_start = [&](int j) { return w.kv_begin + (warp + j * W) * 16; };
  // TMA: lane 0 issues tile t0's K and V boxes into stage st; `pg` (lane 0's page) holds all 16
  // tokens (decode_sm80_tma: page_size ≥ 16 (NHD) or 16 (vLLM), and t0 a multiple of 16). The
  // fence orders this warp's earlier reads and zero stores of the stage (made visible to lane 0
  // by the loop's __syncwarp) before the TMA's writes.
  auto issue_tma = [&](int st, int t0, int pg) {
    if constexpr (kTma) {
      if (lane == 0) {
        const std::uint32_t bar = bar0 + 8 * st;
        E* k = tstages + st * 2 * kT;
        E* v = k + kT;
        ptx::fence_proxy_async();
        ptx::mbar_expect_tx(bar, Tr::kFp8 ? 2u * 16 * D : 2u * kT * sizeof(E));
        auto boxes = [&](auto evict_first) {  // std::true_type / false_type: the L2 hint
          constexpr bool kHint = decltype(evict_first)::value;
          if constexpr (Tr::kFp8) {
            // The codes into ring stage st (make_tma_fp8_maps): vLLM, the page's (page, KV head)
            // K block [D/16][16][16] and V block [D][16] as they are (rows of 256 and 128 B); NHD,
            // the 16 token rows of K and of V, [16][D] each (kSwizzledRing: D/128 swizzled boxes
            // each, codes_nhd_offset).
            const std::uint32_t rk = sm80::smem_addr(ring + st * Tr::kFp8StageBytes), rv = rk + 16 * D;
            if constexpr (L == KVLayout::vllm) {
              const int block = pg * a.num_kv_heads + w.kv_head;
              ptx::tma_load_2d<kHint>(rk, tk, bar, 0, block * (D / 16), pol);
              ptx::tma_load_2d<kHint>(rv, tv, bar, 0, block * (D / 8), pol);
            } else if constexpr (kSwizzledRing) {  // boxes of [16][128 B], 128-byte swizzle
              const int row = pg * a.page_size + (t0 & (a.page_size - 1));
#pragma unroll
              for (int b = 0; b < D / 128; ++b) {
                ptx::tma_load_3d<kHint>(rk + b * 2048, tk, bar, b * 128, w.kv_head, row, pol);
                ptx::tma_load_3d<kHint>(rv + b * 2048, tv, bar, b * 128, w.kv_head, row, pol);
              }
            } else {
              const int row = pg * a.page_size + (t0 & (a.page_size - 1));
              ptx::tma_load_3d<kHint>(rk, tk, bar, 0, w.kv_head, row, pol);
              ptx::tma_load_3d<kHint>(rv, tv, bar, 0, w.kv_head, row, pol);
            }
          } else if constexpr (L == KVLayout::vllm) {
            // Rows of the maps: the page's (page, KV head) block of D/8 K rows and D/4 V rows
            // (< 2^31: make_tma_vllm_maps).
            const int block = pg * a.num_kv_heads + w.kv_head;
            ptx::tma_load_2d<kHint>(sm80::smem_addr(k), tk, bar, 0, block * (D / 8), pol);
            ptx::tma_load_2d<kHint>(sm80::smem_addr(v), tv, bar, 0, block * (D / 4), pol);
          } else {
            const int row = pg * a.page_size + (t0 & (a.page_size - 1));
#pragma unroll
            for (int b = 0; b < D / 64; ++b) {
              ptx::tma_load_3d<kHint>(sm80::smem_addr(k + b * 16 * 64), tk, bar, b * 64, w.kv_head, row, pol);
              ptx::tma_load_3d<kHint>(sm80::smem_addr(v + b * 16 * 64), tv, bar, b * 64, w.kv_head, row, pol);
            }
          }
        };
        if (a.l2_evict_first)
          boxes(std::true_type{});
        else
          boxes(std::false_type{});
      }
    }
  };

  // Block-table entries: lane l holds the page of token tile_start(j) + (l & 15). They are
  // loaded two tiles ahead of their use (two tiles of compute hide an L2 hit), and the sector
  // eight tiles ahead is prefetched into L2 (after the cold-L2 flush of a decode step, the
  // table is in HBM too: one 32-byte sector serves 8 pages).
  auto in_range = [&](int j) { return j < my_tiles && tile_start(j) + (lane & 15) < w.kv_end; };
  auto load_page = [&](int j) { return in_range(j) ? __ldg(bt + ((tile_start(j) + (lane & 15)) >> a.page_shift)) : 0; };
  auto prefetch_pages = [&](int j) {
    const int tok = tile_start(j);
    if (lane == 0 && j < my_tiles && tok < w.kv_end) ptx::prefetch_l2(bt + (tok >> a.page_shift));
  };

  // Tile j into stage j % S, and the block-table pipeline one tile on (the page of tile j + 1
  // becomes current, j + 2's is loaded, j + 8's sector prefetched).
  // The guard checks a block id where the copies use it, not where it is loaded: a compare right
  // after the __ldg waits for the load there, and the two tiles of lookahead are gone. Checked at
  // the load, the guard cost up to +14 % on the vLLM layout (hd128 batch 16 × 32k 649 → 741 µs)
  // and up to +5.8 % on NHD, against an A/A noise of ≤ 1.5 % (bench/results/
  // h200-2026-12-02-2572a08/guard-ab-*.md).
  int page = in_range(0) ? early0 : 0, page_next = in_range(1) ? early1 : 0;
  if constexpr (Var::kOn) {
    page = load_page(0);
    page_next = load_page(1);
  }
  auto issue = [&](int j) {
    const int pg = guarded_page<Tr::kGuard>(a, page, bad_page);
    if constexpr (kTma)
      issue_tma(j % S, tile_start(j), pg);
    else
      issue_tile(j % S, tile_start(j), pg);
    page = page_next;
    page_next = load_page(j + 2);
    prefetch_pages(j + 8);
  };
  // Pipeline prologue: tiles 0 .. S−2 in flight (one commit group per tile, empty ones too, so
  // that wait_group<S − 1> always means "tile j has landed").
#pragma unroll
  for (int j = 0; j < S - 1; ++j) {
    if (j < my_tiles) issue(j);
    sm80::cp_async_commit();
  }
  // Q rows of this CTA → sQ (rows past w.rows are zero: padded MMA rows, never written out).
  // Loaded after the K/V prologue is in flight, so the two latencies overlap. (kQToFp16: bf16 q
  // as fp16 · 2^q_exp, load_q_fp16; the scores are then 2^q_exp too large, which scale_log2
  // takes back.)
  [[maybe_unused]] int q_exp = 0;
  {
    using OutE = typename Tr::OutE;
    const OutE* q = static_cast<const OutE*>(a.q) + (static_cast<std::int64_t>(w.seq) * a.num_q_heads + w.head0) * D;
    if constexpr (Tr::kQToFp16) {
      q_exp = load_q_fp16<Tr>(q, w.rows, sQ, tid);
    } else {
      for (int i = tid; i < kRows * (D / 8); i += Tr::kThreads) {
        const int r = i / (D / 8), c = i % (D / 8);
        uint4 x = make_uint4(0, 0, 0, 0);
        if (r < w.rows) x = *reinterpret_cast<const uint4*>(q + r * D + c * 8);
        *reinterpret_cast<uint4*>(sQ + r * R + c * 8) = x;
      }
    }
  }
  const float scale_log2 = Tr::kQToFp16 ? ldexpf(a.scale_log2, -q_exp) : a.scale_log2;

  __syncthreads();  // sQ is written

  // (The tile math reads the TMA boxes' layouts where the boxes are its tiles; an fp8 cache's
  // widened tiles have the cp.async layouts, however the codes came. kCodes: the tile math reads
  // an fp8 ring's codes themselves, HeadsOnNCodes.)
  constexpr bool kTmaTiles = kTma && !Tr::kFp8;
  using Math = std::conditional_t<
      kCodes, HeadsOnNCodes<Tr, L>,
      std::conditional_t<kHeadsOnN, HeadsOnN<Tr, L, kTmaTiles>, HeadsOnM<Tr, L, kTmaTiles>>>;
  using TileE = typename Math::E;  // what the tile math reads: E, or fp8 codes (kCodes)
  Math math;
  math.load_q(sQ, lane);
  // The variant hooks of the lane's two query heads (heads past the CTA's rows are padding: they
  // take the last row's parameters, and their results are never stored). Their raw-score units
  // follow the scores' (kQToFp16: 2^q_exp larger).
  [[maybe_unused]] VariantArgs q_args;
  if constexpr (Var::kOn && Tr::kQToFp16) {
    q_args = var.args;
    q_args.cap_raw = ldexpf(q_args.cap_raw, q_exp);
    q_args.cap_exp2 = ldexpf(q_args.cap_exp2, -q_exp);
    q_args.inv_scale = ldexpf(q_args.inv_scale, q_exp);
  }
  const auto hooks = [&] {
    if constexpr (Var::kOn) {
      auto head = [&](int i) {
        const int h = w.head0 + min(Math::lane_head(lane, i), w.rows - 1);
        if constexpr (Tr::kQToFp16)
          return VariantHead(q_args, h, 1, win.seq_len);
        else
          return VariantHead(var.args, h, 1, win.seq_len);
      };
      return VariantTileHooks{head(0), head(1), win.lo};
    } else {
      return PlainTileHooks{};
    }
  }();

  // Stage j % S's K and V tiles; land(j, N): tile j has landed and is visible to the warp (N: the
  // cp.async commit groups issued after tile j's; with TMA each lane waits on the mbarrier).
  // (fp8: the one widened pair, which widen(j) fills from stage j % S's codes; kCodes: the codes.)
  auto stage_k = [&](int j) -> const TileE* {
    if constexpr (kCodes)
      return ring + (j % S) * Tr::kFp8StageBytes;
    else if constexpr (Tr::kFp8)
      return stages;
    else if constexpr (kTma)
      return tstages + (j % S) * 2 * kT;
    else
      return stages + (j % S) * Tr::kStageElems;
  };
  auto stage_v = [&](int j) -> TileE* {
    if constexpr (kCodes)
      return ring + (j % S) * Tr::kFp8StageBytes + 16 * D;
    else if constexpr (Tr::kFp8)
      return stages + Tr::kTileElems;
    else if constexpr (kTma)
      return tstages + (j % S) * 2 * kT + kT;
    else
      return stages + (j % S) * Tr::kStageElems + Tr::kTileElems;
  };
  // fp8: tile j's K or V codes (landed) widened into the 16-bit tile; the caller's __syncwarp
  // makes them visible before the tile math reads them. Nothing for a 16-bit cache, or kCodes.
  // (valid: V's tokens in range; only a warp's last tile may have fewer than 16.)
  constexpr bool kWiden = Tr::kFp8 && !kCodes;
  auto widen_k = [&](int j) {
    if constexpr (kWiden)
      widen_tokens<Tr, L == KVLayout::vllm>(ring + (j % S) * Tr::kFp8StageBytes, stages, lane);
  };
  auto widen_v = [&](int j, int valid) {
    if constexpr (kWiden)
      widen_v_tile<Tr, L>(ring + (j % S) * Tr::kFp8StageBytes + 16 * D, stage_v(j), lane, valid);
  };
  auto widened = [&] {
    if constexpr (kWiden) __syncwarp();
  };
  // fp8 by TMA: land() has no __syncwarp (each lane waits on the mbarrier itself), so before the
  // overlap form's first widening the warp's reads of the widened K tile (tile 0's QKᵀ) are ordered
  // here; later iterations end with one.
  auto reads_done = [&] {
    if constexpr (kWiden && kTma) __syncwarp();
  };
  auto land = [&](int j, auto newer_groups) {
    if constexpr (kTma) {
      ptx::mbar_wait(bar0 + 8 * (j % S), (j / S) & 1);
    } else {
      sm80::cp_async_wait<decltype(newer_groups)::value>();
      __syncwarp();  // every lane's copies of tile j are visible to the warp
    }
  };
  // A TMA box holds the whole page: V past the range may be anything (NaN in unused slots) and
  // P · V needs zeros there (masked K columns become −inf in S). Only a warp's last tile can be
  // partial.
  auto mask_v = [&](int j, int valid) {
    if constexpr (kTma && !Tr::kFp8) {  // (fp8: widen_v or HeadsOnNCodes::update zeroes them)
      if (valid < 16) zero_v_past<Tr, L>(stage_v(j), valid, lane);
      __syncwarp();
    }
  };

  if constexpr (Tr::kOverlap) {
    // Iteration j: tile j + 1's QKᵀ and tile j's softmax and PV in one basic block, so the
    // scheduler interleaves the two dependency chains (one warp per scheduler has nothing else
    // to hide them behind). Tile j + S − 1 goes into the stage tile j − 1 used; tiles j and
    // j + 1 are resident, S − 2 are in flight.
    // (fp8: K of tile j + 1 and V of tile j are widened together, after tile j + 1 has landed.)
    if (my_tiles > 0) {
      land(0, std::integral_constant<int, S - 2>{});
      widen_k(0);
      widened();
      typename Math::Scores sc = math.scores(stage_k(0), lane);
      int j = 0;
      for (; j + 1 < my_tiles; ++j) {
        if (j + S - 1 < my_tiles) issue(j + S - 1);
        if constexpr (!kTma) sm80::cp_async_commit();
        land(j + 1, std::integral_constant<int, S - 2>{});
        if (j == 0) reads_done();
        widen_k(j + 1);
        widen_v(j, 16);
        widened();
        typename Math::Scores next = math.scores(stage_k(j + 1), lane);
        math.update(sc, stage_v(j), 16, scale_log2, lane, hooks, tile_start(j));  // not the last tile: whole
        sc = next;
        __syncwarp();  // all lanes are done with stage j % S before it is refilled
      }
      const int valid = w.kv_end - tile_start(j);  // ≥ 1 tokens of the last tile are in range
      widen_v(j, valid);
      widened();
      mask_v(j, valid);
      math.update(sc, stage_v(j), valid, scale_log2, lane, hooks, tile_start(j));
    }
  } else {
    for (int j = 0; j < my_tiles; ++j) {
      // Keep S − 1 tiles in flight: issue tile j + S − 1 into the stage tile j − 1 used.
      if (j + S - 1 < my_tiles) issue(j + S - 1);
      if constexpr (!kTma) sm80::cp_async_commit();
      const int valid = w.kv_end - tile_start(j);  // ≥ 1 tokens of this tile are in range
      land(j, std::integral_constant<int, S - 1>{});
      widen_k(j);
      widen_v(j, valid);
      widened();
      mask_v(j, valid);
      tile(math, stage_k(j), stage_v(j), valid, scale_log2, lane, hooks, tile_start(j));
      __syncwarp();  // all lanes are done with stage j % S before it is refilled
    }
  }
  if constexpr (!kTma) sm80::cp_async_wait<0>();
  // Every warp is done with its stages: the combine reuses them. (The guard: and did any lane
  // meet a bad block id? Then the CTA's rows are dropped, and its thread 0 flags it.)
  const bool poisoned = cta_poisoned<Tr::kGuard>(bad_page, input_errors);

  // Combine the warps' states (m, l, unnormalised O) through shared memory, then store.
  float* sO = reinterpret_cast<float*>(sQ + Tr::kQElems);  // [W][16][D]
  float* sM = sO + W * kRows * D;                          // [W][16]
  float* sL = sM + W * kRows;                              // [W][16]
  math.publish(sO, sM, sL, warp, lane);
  __syncthreads();
  // (general kind) The sinks join warp 0's states ([16] floats of scratch after sL).
  if constexpr (Var::kOn) fold_sinks<D>(var, w, win, sM, sL, sO, sL + W * kRows, tid, Tr::kThreads);
  combine_and_store<typename Tr::OutE, D, Tr::kFp8>(a, w, W, sM, sL, sO, tid, Tr::kThreads, poisoned);
#endif
}

template <class Tr, KVLayout L, bool kHeadsOnN>
__global__ void __launch_bounds__(Tr::kThreads) decode_sm80_kernel(const DecodeArgs a, int* input_errors) {
  decode_sm80_body<Tr, L, false, kHeadsOnN>(a, nullptr, nullptr, input_errors);
}

// The general variant kind (kernels/variant.cuh).
template <class Tr, KVLayout L, bool kHeadsOnN>
__global__ void __launch_bounds__(Tr::kThreads)
    decode_sm80_variant_kernel(const DecodeArgs a, int* input_errors, const VariantArgs v) {
  decode_sm80_body<Tr, L, false, kHeadsOnN, GeneralVariant>(a, nullptr, nullptr, input_errors, GeneralVariant{v});
}

// The TMA variants; the maps are kernel parameters (__grid_constant__: the TMA reads them from
// parameter memory, no copy to global).
template <class Tr, KVLayout L, bool kHeadsOnN>
__global__ void __launch_bounds__(Tr::kThreads)
    decode_sm80_tma_kernel(const DecodeArgs a, const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv,
                           int* input_errors) {
  decode_sm80_body<Tr, L, true, kHeadsOnN>(a, &tk, &tv, input_errors);
}

// The TMA variants of the general variant kind.
template <class Tr, KVLayout L, bool kHeadsOnN>
__global__ void __launch_bounds__(Tr::kThreads)
    decode_sm80_tma_variant_kernel(const DecodeArgs a, const __grid_constant__ CUtensorMap tk,
                                   const __grid_constant__ CUtensorMap tv, int* input_errors, const VariantArgs v) {
  decode_sm80_body<Tr, L, true, kHeadsOnN, GeneralVariant>(a, &tk, &tv, input_errors, GeneralVariant{v});
}

}  // namespace muh::kernels::decode
