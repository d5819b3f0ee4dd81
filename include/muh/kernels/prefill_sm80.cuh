// kernels/prefill_sm80.cuh — the tensor-core prefill agent for sm_80 and newer (Ampere, Ada, and
// Hopper until its own agent exists): FlashAttention-2's structure, written for muh.
//
// One CTA computes O for block_m query rows of one (sequence, q head); each of the num_warps warps
// owns block_m / num_warps rows (whole m16 tiles). Per key tile of block_n keys:
//   S = Q Kᵀ        mma.sync m16n8k16, fp32 accumulators in registers; Q fragments from
//                   registers (when they fit, see kQInRegs) or ldmatrix; K by ldmatrix
//   mask            only on tiles that cross the sequence end or the causal diagonal
//   online softmax  row max / sum over the 4 lanes of a quad (2 shuffles), ex2.approx with the
//                   scale folded into log2(e), rescale of O by exp2(m_old − m_new)
//   O += P V        P rounded to 16 bits in registers and fed straight to the second mma as its
//                   A operand (the S accumulator layout IS the A fragment layout); V by
//                   ldmatrix.trans
// At head_dim 256 with one m16 tile per warp (8-warp rows), warps work in pairs: the two warps
// of a pair share 32 rows, each computes S for half of the key tile and O for half of the head
// dim, and they swap row maxima and P halves through shared memory (policy.hpp,
// prefill_sm80_warp_pairs: each K/V fragment read then feeds two m16 tiles; +7–8 % measured).
// Ping-pong (policy ping_pong: the hd-256 warp-pair row on sm_90): with one 8-warp CTA per SM, the
// CTA barriers of the ring kept both warps of each scheduler in the same phase — both in their
// MMAs at once, contending for one tensor pipe, then both in their softmax, the pipe idle (ncu:
// 49 % active). Instead the CTA's two halves take turns at the MMAs through two named barriers,
// each doing its softmax during the other's turn, and the ring is ordered by per-buffer
// mbarriers (cp.async arrivals for full, one arrival per thread for empty); +6–7 % on the H200.
// K and V tiles stream through a ring of num_stages shared-memory tile buffers with cp.async; key tiles are
// visited from the last to the first, so the masked tiles (diagonal, ragged end) come first and
// the rest run without mask code. Shared-memory rows are XOR-swizzled in 16-byte chunks so that
// the 8 row addresses of each ldmatrix hit 8 different bank groups.
//
// The sm75 agent (Turing: fp16 only, no cp.async, 64 KB) is this body with two substitutions the
// policy's agent selects at compile time: each m16n8k16 becomes two m16n8k8 (sm80::mma_k16), and
// the copies go global → registers → shared memory (Sm75TileStage). A K/V tile is fetched into
// registers one copy group ahead and stored where the sm80 agent issues its cp.async, so its
// load latency overlaps the GEMM in between, as FlashAttention-1's and CUTLASS's pre-sm_80
// pipelines do. Its rows have one shared-memory buffer (one stage without async copy, the seed's
// rule); the registers are the second buffer.
//
// Paged K/V (chunked prefill, prefix reuse; kernels/prefill_kv.cuh): the same body, its K/V copies
// reading rows through the block table — cp.async per row for NHD pages and vLLM key pages, V
// tiles kept in 16-key runs for vLLM's token-minor value pages (sm80_load_v_runs) — and
// the next tile's block-table entries prefetched into L1. A split paged launch's tail runs
// prefill_sm80_paged_tail_kernel (below). Over an fp8 cache (muh/kv_quant.hpp; kKV) the copies
// land 1-byte codes in the ring and the barrier ring widens each tile in place before its GEMM
// (prefill_sm80_pipeline.cuh, prefill_sm80_tile.cuh); k_scale is in the softmax scale, v_scale
// multiplies O in the epilogue.
//
// Tiles, warps and stages come from the policy (Getter); nothing in the body depends on a
// particular head dim or dtype beyond the template parameters.
//
// Files: prefill_sm80_tile.cuh (the shape a policy gives the body, the shared-memory layout, the
// copies), prefill_sm80_pipeline.cuh (the schedules: the barrier ring, with cp.async or the sm75
// register stage, and the ping-pong), prefill_sm80_math.cuh (one function per step of a key
// tile, and the epilogue), this file (the body and the kernels).
// The body keeps every register array (fragments, S, P, O, the rows' softmax state) and every
// value the pipeline and the tile functions refer to as its own variables, and the functions
// take them by reference: so written, each kernel's SASS is the one the body compiled to when it
// was a single function (scripts/sass_diff.sh against the build before the split). Arrays local
// to a function, or values copied into a struct, changed the order ptxas saw them in — different
// register numbers, and in places spills.
#pragma once

#include <cmath>
#include <cstdint>

#include "muh/kernels/online_softmax.hpp"
#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/prefill_sm80_math.cuh"
#include "muh/kernels/prefill_sm80_pipeline.cuh"
#include "muh/kernels/prefill_sm80_tile.cuh"
#include "muh/kernels/sm80_ptx.cuh"
#include "muh/kernels/variant.cuh"
#include "muh/tuning/policy.hpp"

namespace muh::kernels {

// The paged K/V copy groups of sequence b, kv head kvh (an empty value for contiguous K/V, where
// the body's own view is the one used).
template <class Sh>
__device__ __forceinline__ PagedKvGroups<Sh> paged_kv_groups(const PrefillPagedKV* pkv, int b, int kvh, int sk,
                                                             int kt_end, int n_tiles) {
  if constexpr (Sh::kPaged)
    return {PagedKvRows<typename Sh::C, paged_layout(Sh::kSource)>::template make<Sh::kD>(*pkv, b, kvh), sk, kt_end,
            n_tiles};
  else
    return {};
}

// One q tile (`linear`, tile_of order): kPiece = false, the whole tile, writing out and lse;
// kPiece = true, its key tiles [kt_lo, kt_hi) (clipped to the keys it sees) as a piece of a split
// tail tile, writing a normalised (o, lse) partial to its workspace slot: piece_o [block_m][D] and
// piece_lse [block_m] fp32 (prefill_common.cuh, PrefillTail). The whole-tile body never sees the
// piece's arguments, so the whole-tile kernel compiles as it did before the split existed.
// kSrc: where K/V come from (contiguous: a's k, v, cu_seqlens_k; paged NHD or vLLM: *pkv, through
// the block table — kernels/prefill_kv.cuh); only the K/V copies differ (prefill_sm80_pipeline.cuh,
// prefill_sm80_tile.cuh). The sm75 agent reads contiguous and paged NHD K/V.
// Var: the variant kind (kernels/variant.cuh): PlainVariant compiles every hook out (the kernels
// of before variants, the same SASS); GeneralVariant clips the key tiles to the window, applies
// soft-cap / ALiBi and the window's mask on the scores, and folds the sink into the epilogue (a
// whole tile; a split tail's pieces leave it to the merge).
// kKV: the paged cache's element type (muh/kv_quant.hpp): q's own, or fp8 codes, widened in the
// ring (prefill_sm80_pipeline.cuh), k_scale folded into a's scale, v_scale applied to O here.
template <class Getter, DType DT, int D, bool kPiece = false, KVSource kSrc = KVSource::contiguous,
          class Var = PlainVariant, KVDType kKV = KVDType::same>
__device__ __forceinline__ void prefill_sm80_body(const PrefillArgs& a, long long linear, int kt_lo = 0,
                                                  int kt_hi = 0, float* piece_o = nullptr,
                                                  float* piece_lse = nullptr, const PrefillPagedKV* pkv = nullptr,
                                                  const Var& var = Var{}) {
  using Sh = Sm80PrefillShape<Getter, DT, D, kPiece, kSrc, kKV>;
  using T = typename Sh::T;
  constexpr int BM = Sh::BM, BN = Sh::BN, MT = Sh::MT;

  extern __shared__ __align__(128) unsigned char prefill_sm80_smem[];
  T* sQ = reinterpret_cast<T*>(prefill_sm80_smem);  // [BM][D]; reused for O in the epilogue
  T* sKV = sQ + BM * D;                             // [S][BN][D]: the ring of K and V tiles
  unsigned char* sX = reinterpret_cast<unsigned char*>(sKV + Sh::S * BN * D);  // [W][kXWarpBytes] (pairs)
  const std::uint32_t bars = sm80::smem_addr(sX + (Sh::kPairs ? Sh::W * Sh::kXWarpBytes : 0));  // (ping-pong)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;          // mma fragment row group and column pair
  const int wm = warp / Sh::WN, wn = warp % Sh::WN;  // row block of this warp, its half (pairs) or 0
  const TileCoord tc = tile_of(linear, a);
  if (!prefill_sequence_ok<!Sh::kPaged>(a, tc.b)) return;  // the input guard (prefill_common.cuh)
  const int q_off = a.cu_seqlens_q[tc.b], sq = a.cu_seqlens_q[tc.b + 1] - q_off;
  const int m0 = tc.m_block * BM;
  if (m0 >= sq) return;  // a short sequence of a varlen batch: nothing here
  if constexpr (Sh::kPaged)
    if (!paged_sequence_ok(*pkv, tc.b, a.max_seqlen_k, a.input_errors)) return;  // (prefill_kv.cuh)
  const int k_off = Sh::kPaged ? 0 : a.cu_seqlens_k[tc.b];
  const int sk = Sh::kPaged ? paged_kv_len(*pkv, tc.b) : a.cu_seqlens_k[tc.b + 1] - k_off;
  const int kvh = tc.h / a.group;
  const long long ldq = static_cast<long long>(a.num_q_heads) * D;
  const long long ldk = static_cast<long long>(a.num_kv_heads) * D;
  const T* gQ = static_cast<const T*>(a.q) + (q_off + m0) * ldq + static_cast<long long>(tc.h) * D;
  const T* gK = static_cast<const T*>(a.k) + k_off * ldk + static_cast<long long>(kvh) * D;
  const T* gV = static_cast<const T*>(a.v) + k_off * ldk + static_cast<long long>(kvh) * D;

  // Key tiles kt_end − 1 down to kt_end − n_tiles (kt_lo for a piece, 0 for a whole tile; with a
  // window, the first tile it reaches: the tiles wholly outside it are never loaded).
  [[maybe_unused]] const auto vh = make_variant_head(var, tc.h, sq, sk);
  [[maybe_unused]] int kt_win_begin = 0, kt_win_end = 0;
  if constexpr (Var::kOn) vh.template key_tiles<BN>(m0, BM, &kt_win_begin, &kt_win_end);
  const int kt_vis = Var::kOn ? kt_win_end : (visible_keys(m0, BM, sq, sk, a.causal) + BN - 1) / BN;
  const int kt_end = kPiece ? (kt_hi < kt_vis ? kt_hi : kt_vis) : kt_vis;
  const int n_tiles =
      Var::kOn ? (kt_end - (kt_lo > kt_win_begin ? kt_lo : kt_win_begin) > 0
                      ? kt_end - (kt_lo > kt_win_begin ? kt_lo : kt_win_begin)
                      : 0)
               : (kPiece ? (kt_end > kt_lo ? kt_end - kt_lo : 0) : kt_vis);

  typename Sh::KvStage kv_stage;  // the sm75 agent's register stage (unused by the sm80 agent)
  // The copy groups: the view of contiguous K/V declared exactly as before paging existed, the
  // paged groups beside it (an empty value for contiguous K/V), and kv the one of them the source
  // uses — chosen by a pointer, not by a function returning a reference: that (and a function
  // building the view) made ptxas order the addresses differently (+24 instructions in the
  // contiguous hd-128 kernel), and the contiguous kernels' SASS is the one before paging.
  const KvGroups<Sh> kv_view{gK, gV, ldk, sk, kt_end, n_tiles};
  const PagedKvGroups<Sh> kv_paged = paged_kv_groups<Sh>(pkv, tc.b, kvh, sk, kt_end, n_tiles);
  const KvGroupsOf<Sh>* kv_ptr;
  if constexpr (Sh::kPaged) kv_ptr = &kv_paged; else kv_ptr = &kv_view;
  const KvGroupsOf<Sh>& kv = *kv_ptr;
  Sm80Pipeline<Sh> pipe(kv, sKV, tid, bars, warp, kv_stage);
  if constexpr (Sh::kRegStage) {
    // Q's loads and group 0's in flight together. Here rather than in the pipeline's start():
    // there, ptxas numbered the Q stage's registers differently and the SASS changed.
    Sm75TileStage<BM, D, Sh::NT, T> q_stage;
    q_stage.fetch(gQ, ldq, sq - m0, tid);
    pipe.copy.fetch(0);
    q_stage.deposit(sQ, tid);
  }
  pipe.start(sQ, gQ, ldq, sq, m0);  // Q (cp.async) and the first S − 1 K/V copy groups
  pipe.first_turn();                // (ping-pong: half 1 lets half 0 go first)

  const Sm80Warp w{lane, g, t, wm, wn, wm * Sh::RW};
  const WarpPair<Sh> pair(sX, warp, wm);
  float o[MT][Sh::DTL][4];
  float row_m[MT][2], row_l[MT][2];  // the rows' online softmax: running max (raw score units), this thread's Σ p
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < Sh::DTL; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.f;
    row_m[mt][0] = row_m[mt][1] = -INFINITY;
    row_l[mt][0] = row_l[mt][1] = 0.f;
  }
  const int row0 = w.row0;
  typename QFragments<Sh>::Regs qf;
  const std::uint32_t q_base = sm80::smem_addr(sQ);
  const Sm80LdmOffsets<D> q_off_lane = q_ldm_pattern<D>(lane);
  const auto k_off_lane = k_pattern<Sh>(lane);
  const auto v_off_lane = v_pattern<Sh>(lane);
  // A pair's second warp starts at key BNW: a row offset (the chunk-major tile's rows are 16 bytes).
  const std::uint32_t k_half = static_cast<std::uint32_t>(wn * Sh::BNW * (Sh::kKChunkMajor ? 16 : D * 2));
  const std::uint32_t v_half = Sh::kVDimMajor ? 0u : static_cast<std::uint32_t>(wn * Sh::DW * 2);
  const QFragments<Sh> q{qf, q_base, q_off_lane, row0};
  // The rescale slack (softmax_rescale) as raw-score units (scale > 0 is validated).
  const float rescale_slack = kRescaleSlack / a.scale_log2;
  const ScaledUnits<sm80::Exp2Approx> units{a.scale_log2, a.scale};
  const TileMask<Sh> mask{m0, sq, sk, a.causal};

  for (int i = 0; i < n_tiles; ++i) {
    pipe.k_ready(i);
    if (i == 0) q.preload();
    const int n0 = (kt_end - 1 - i) * BN;  // the key tile's first key
    float s[MT][Sh::NTL][4];
    std::uint32_t qa[2][MT][4], kb[2][4];
    qk_gemm<Sh>(s, qa, kb, q, pipe.buffer(2 * i) + k_half, k_off_lane);
    pipe.k_done(i);
    if constexpr (Var::kOn)
      variant_logits_and_mask<Sh>(s, vh, m0, n0, w);  // soft-cap, ALiBi, then the window / causal / end mask
    else
      mask.apply(s, n0, w);
    float mx[MT][2];
    row_max<Sh>(s, mx, pair, w);
    softmax_rescale<Sh>(s, mx, row_m, row_l, o, units, rescale_slack);
    std::uint32_t pa[Sh::KH][MT][4];
    pack_p<Sh>(pa, s, pair, lane);
    pipe.v_ready(i);
    std::uint32_t pm[MT][4];  // (pairs) the mate's P, one k16 step at a time
    pv_gemm<Sh>(o, pa, pm, pipe.buffer(2 * i + 1) + v_half, v_off_lane, pair, w);
    pipe.v_done(i);
  }
  pipe.drain();

  float l_row[MT][2];
  row_sums<Sh>(l_row, row_l, pair, w);
  if constexpr (kPiece) {
    if constexpr (Sh::kFp8)
      store_piece<Sh>(piece_o, piece_lse, o, row_m, l_row, units, m0, sq, w, pkv->v_scale);
    else
      store_piece<Sh>(piece_o, piece_lse, o, row_m, l_row, units, m0, sq, w);
  } else {
    if constexpr (Var::kOn && Sh::kFp8)
      stage_tile<Sh>(a, tc, q_off, m0, sq, sQ, o, row_m, l_row, units, w, &vh, pkv->v_scale);
    else if constexpr (Var::kOn)
      stage_tile<Sh>(a, tc, q_off, m0, sq, sQ, o, row_m, l_row, units, w, &vh);  // with the sink
    else if constexpr (Sh::kFp8)
      stage_tile<Sh>(a, tc, q_off, m0, sq, sQ, o, row_m, l_row, units, w, nullptr, pkv->v_scale);
    else
      stage_tile<Sh>(a, tc, q_off, m0, sq, sQ, o, row_m, l_row, units, w);
    __syncwarp();
    // O from sQ to out in whole 16-byte chunks: this warp's rows (and, with pairs, head dims).
    using Swz = Sm80Swizzle<D>;
    constexpr int DTL = Sh::DTL;
    T* gO = static_cast<T*>(a.out) + (q_off + m0) * ldq + static_cast<long long>(tc.h) * D;
#pragma unroll
    for (int idx = lane; idx < Sh::RW * DTL; idx += 32) {
      const int r = row0 + idx / DTL, c = wn * DTL + idx % DTL;
      if (m0 + r < sq)
        *reinterpret_cast<uint4*>(gO + r * ldq + c * 8) = *reinterpret_cast<const uint4*>(sQ + Swz::offset(r, c));
    }
  }
}

// The kernels of both tensor-core agents. A compilation pass instantiates the body only for the
// agents whose instructions it has (sm80::agent_has_ptx): sm_75 code carries the sm75 agent and
// an empty sm80 kernel (never launched there), sm_80 and newer both — which is how the H200 runs
// the T4's fp16 policy (forced target 75) by emulation.
//
// prefill_sm80_kernel: CTA i computes q tile i (tile_of order) whole — the grid of every launch,
// and the first main_tiles tiles of a split one. prefill_sm80_tail_kernel: the tail of a split
// launch (prefill_common.cuh, PrefillTail), CTA j walking its 1–2 pieces. Two kernels rather than
// one with a branch: with the piece loop around the body in one kernel, ptxas spilled 28–60 bytes
// in the sm75 hd 64 / 256 and sm80 hd 96 kernels (none before); and the whole-tile kernel keeps
// exactly its arguments and body of before the split (the split's fields inside PrefillArgs
// alone left 16 bytes of spills in the sm75 hd-64 kernel).
template <class Getter, DType DT, int D>
__global__ void __launch_bounds__(Getter{}().num_warps * 32)
    prefill_sm80_kernel(const PrefillArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // A split launch's tail kernel, launched dependent on this one (prefill_launch.cuh), may start
  // once every CTA here has started: its CTAs then take the slots this grid's last round frees.
  // Without a dependent launch after it, this does nothing; a caller's own kernel launched
  // dependent on prefill() may likewise start early and, as PDL requires, must wait
  // (cudaGridDependencySynchronize) before it reads out.
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  if constexpr (sm80::agent_has_ptx(Getter{}().agent)) prefill_sm80_body<Getter, DT, D>(a, blockIdx.x);
}

// The general variant kind (kernels/variant.cuh): CTA i computes q tile i whole, K/V from source
// kSrc (contiguous: pkv unused), a paged cache's elements of type kKV. No tail split
// (prefill_split_applies).
template <class Getter, DType DT, int D, KVSource kSrc, KVDType kKV = KVDType::same>
__global__ void __launch_bounds__(Getter{}().num_warps * 32)
    prefill_sm80_variant_kernel(const PrefillArgs a, const PrefillPagedKV pkv, const VariantArgs v) {
  if constexpr (sm80::agent_has_ptx(Getter{}().agent))
    prefill_sm80_body<Getter, DT, D, false, kSrc, GeneralVariant, kKV>(a, blockIdx.x, 0, 0, nullptr, nullptr, &pkv,
                                                                       GeneralVariant{v});
}

// K/V from a paged cache of element type kKV: CTA i computes q tile i whole — the grid of an
// unsplit paged launch and the first main_tiles tiles of a split one (the trigger as in
// prefill_sm80_kernel).
template <class Getter, DType DT, int D, KVSource kSrc, KVDType kKV = KVDType::same>
__global__ void __launch_bounds__(Getter{}().num_warps * 32)
    prefill_sm80_paged_kernel(const PrefillArgs a, const PrefillPagedKV pkv) {
  static_assert(is_paged(kSrc), "the contiguous source runs prefill_sm80_kernel");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  if constexpr (sm80::agent_has_ptx(Getter{}().agent))
    prefill_sm80_body<Getter, DT, D, false, kSrc, PlainVariant, kKV>(a, blockIdx.x, 0, 0, nullptr, nullptr, &pkv);
}

// CTA j of a split launch's tail walks its pieces (1–2; more where tail_chunk > key_tiles: a
// context launch's chunk part) — kSrc: the K/V source, as in the body; pkv the paged cache, null
// for contiguous K/V.
template <class Getter, DType DT, int D, KVSource kSrc = KVSource::contiguous, KVDType kKV = KVDType::same>
__device__ __forceinline__ void prefill_sm80_tail_pieces(const PrefillArgs& a, const PrefillTail& t,
                                                         const PrefillPagedKV* pkv, int j) {
  if constexpr (sm80::agent_has_ptx(Getter{}().agent)) {
    constexpr int kBM = Getter{}().block_m;
    long long it = static_cast<long long>(j) * t.tail_chunk;
    const long long end = tail_end(t, j);
    for (bool first = true; it < end; first = false) {
      if (!first) __syncthreads();  // the previous piece's warps are done with shared memory
      const TailSegment seg = tail_segment(t, j, it);
      prefill_sm80_body<Getter, DT, D, true, kSrc, PlainVariant, kKV>(a, seg.linear, seg.kt_lo, seg.kt_hi,
                                                   t.ws_o + static_cast<long long>(seg.slot) * kBM * D,
                                                   t.ws_lse + static_cast<long long>(seg.slot) * kBM, pkv);
      it = seg.next;
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched dependent on the whole-tile kernel, this grid may run beside it; it must not end
  // before it, so that what follows on the stream (the merge, then the caller's work) sees the
  // whole tiles' output as well.
  cudaGridDependencySynchronize();
#endif
}

template <class Getter, DType DT, int D>
__global__ void __launch_bounds__(Getter{}().num_warps * 32)
    prefill_sm80_tail_kernel(const PrefillArgs a, const PrefillTail t) {
  prefill_sm80_tail_pieces<Getter, DT, D>(a, t, nullptr, static_cast<int>(blockIdx.x));
}

// The tail of a split paged launch: pieces over a paged cache. A piece whose key range lies past
// its sequence's seqused_k (known on the device only: the plan splits max_seqlen_k) sees no key
// and writes an empty partial (lse −inf), which the merge weighs 0.
template <class Getter, DType DT, int D, KVSource kSrc, KVDType kKV = KVDType::same>
__global__ void __launch_bounds__(Getter{}().num_warps * 32)
    prefill_sm80_paged_tail_kernel(const PrefillArgs a, const PrefillPagedKV pkv, const PrefillTail t) {
  static_assert(is_paged(kSrc), "the contiguous source runs prefill_sm80_tail_kernel");
  prefill_sm80_tail_pieces<Getter, DT, D, kSrc, kKV>(a, t, &pkv, static_cast<int>(blockIdx.x));
}

// context_attention_fwd in one launch (prefill_plan.hpp, plan_context_prefill): every q tile of
// the chunk is a tail tile of two parts at once — its queries over the cached prefix (a: paged,
// not causal; t's pieces) and over the chunk's own keys (c: contiguous, causal; tc's pieces) —
// and CTAs [0, t.tail_ctas) take the prefix pieces, the rest the chunk's, each as its part's tail
// kernel would (one key range, one partial). prefill_context_merge_kernel then merges a tile's
// pieces of both parts. Run as two parts (the prefix split over every SM, the chunk's 16 whole
// tiles on a second stream, a merge of the two), the chunk's tiles find no free SM before the
// split's CTAs end: at the seed's 512-token chunks over 8k the op took ~97 µs where its prefix
// part alone took ~85 (H100; bench/results/2026-12-07-sm80-vllm-copies, section 5). Fused, it
// measured no faster (prefill_plan.hpp, ContextPlan, says by how much and what was not timed).
// Both parts tile the q rows alike (tile_of: at most kPrefillChunk m-blocks, where the causal and
// the plain order agree — the plan fuses only those).
template <class Getter, DType DT, int D, KVSource kSrc, KVDType kKV = KVDType::same>
__global__ void __launch_bounds__(Getter{}().num_warps * 32)
    prefill_sm80_context_tail_kernel(const PrefillArgs a, const PrefillPagedKV pkv, const PrefillTail t,
                                     const PrefillArgs c, const PrefillTail tc) {
  static_assert(is_paged(kSrc), "the prefix part reads a paged cache");
  const int j = static_cast<int>(blockIdx.x);
  if (j < t.tail_ctas)
    prefill_sm80_tail_pieces<Getter, DT, D, kSrc, kKV>(a, t, &pkv, j);
  else
    prefill_sm80_tail_pieces<Getter, DT, D>(c, tc, nullptr, j - t.tail_ctas);
}

}  // namespace muh::kernels
