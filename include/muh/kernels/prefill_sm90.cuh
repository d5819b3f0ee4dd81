// kernels/prefill_sm90.cuh — the Hopper prefill agent (Agent::sm90, sm_90a code only): TMA loads
// into 128-byte-swizzled shared memory, wgmma for both GEMMs, warp specialisation.
//
// A CTA computes O for q tiles of block_m query rows of one (sequence, q head) each, one tile
// after another (one a CTA, or as many as the persistent schedule gives it: Sm90Scheduler); three
// or four warp groups:
//   producer (warp group 0, its registers given up to 40 a thread, 56 beside three consumer
//            groups): one thread (paged K/V: all four warps) issues every TMA load — per q tile its Q
//            into one of one or two Q buffers, and the key tiles' K and V into a ring of
//            num_stages (K, V) buffer pairs that runs on across the CTA's q tiles. Each buffer
//            has a "full" mbarrier (the TMA's transaction bytes) and a "free" one: K is free after
//            its QKᵀ, V after its PV (an arrival per consumer warp), a Q buffer after the epilogue
//            that stages O through it (an arrival per consumer thread).
//   consumers (warp groups 1 .. block_m/64: 232 registers a thread for 2 groups, 152 for 3): 64
//            query rows each, per key tile
//      S = Q Kᵀ        wgmma m64n{block_n}k16, Q and K from shared memory (K-major), D/16 steps
//      mask            only on tiles that cross the sequence end or the causal diagonal
//      online softmax  row max / sum over the 4 lanes of a quad, exp2 with the scale folded in,
//                      O rescaled in registers (skipped, exactly, where no row's max moved)
//      O += P V        wgmma m64n{D}k16, P from registers (the S accumulators, packed to 16
//                      bits, are the A fragment), V from shared memory (N-major)
// The two consumer groups run on the same K/V buffers; one's softmax overlaps the other's GEMMs
// as the schedulers interleave them (taking turns through named barriers, FA3's ping-pong, was
// measured within ±4 % and is not built).
// With the policy's overlap, a group also issues tile i's QKᵀ beside tile i − 1's PV and runs
// tile i's softmax while that PV finishes (FlashAttention-3's intra-warpgroup pipelining).
// Key tiles go from the last to the first, as in the sm80 agent, so the masked tiles come first.
// The steps are the functions below; prefill_sm90_body is the schedule.
//
// The tiles' layout is the TMA's: Q [D/64 panels][block_m rows][128 B], K and V [D/64][block_n]
// [128 B], each panel 1024-byte aligned (sm90_ptx.cuh says how wgmma reads them). The q map is
// 3-D over (dims, heads, rows) of the whole q tensor. K/V come from one of three sources (KVSource):
//   contiguous  3-D maps over the whole k / v tensors, one box of block_n rows a key tile: a box
//               that runs past its sequence reads the next sequence's rows (masked: their scores
//               are −inf, their weights 0) or, past the tensor, zeros;
//   paged NHD   4-D maps over the cache (dims, heads, slots, pages), boxes of gcd(page_size,
//               block_n) rows (≥ 8, so each lands on whole 1024-byte swizzle groups): a key tile
//               is block_n / box rows boxes, each from the page the block table names, box j
//               issued by lane j of producer warp j % 4. A TMA takes its coordinates from uniform
//               registers, so a warp issues its lanes' boxes one after another (SASS: each
//               UTMALDG in a BRA.U.ANY loop over the active lanes): one warp issuing the 8 boxes
//               of a page-16 tile (16 TMAs for K at hd 128) ran 0.82x the contiguous kernel on the
//               serving cell 8 × (32k + 2048), four warps 0.97x; 0.97x → 1.10x without a prefix
//               (H100, bench/results/2026-12-07-sm90-paged-probe). V's boxes of 16–64 rows come
//               a box a TMA, all panels (a 5-D map; V tiles then in [box][panel][rows] row
//               groups, v_row_offset): the 32k cell 0.97x → 0.98x. Boxes past the sequence's
//               last page are not loaded (their rows are masked, and V's zeroed, as below).
//   paged vLLM  the seed's layout, key pages [heads][D/8][page][8], value pages [heads][D][page]
//               (pages of a multiple of 16 slots: policy.hpp), boxes as paged NHD, each one TMA
//               that lands it in a form wgmma reads as it is: a key box's 128-byte runs (8 keys ×
//               8 dims) are the unswizzled core matrices of K-major K, [rows/8][D/8][128 B]; a
//               value box's rows of 16 tokens (32 bytes) are K-major V under the 32-byte swizzle,
//               [rows/16][D][32 B] — so PV multiplies V untransposed (wgmma_rk) where the other
//               sources' V is N-major.
// V rows past the sequence are zeroed in shared memory before PV reads them, so that a NaN or
// Inf there (another sequence's data, an unused slot of the last page) cannot reach O through
// 0 · Inf.
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
#include "muh/kernels/prefill_kv.cuh"
#include "muh/kernels/sm80_ptx.cuh"
#include "muh/kernels/sm90_ptx.cuh"
#include "muh/tuning/policy.hpp"

namespace muh::kernels {

// The shape a policy gives the sm90 body.
template <class Getter, DType DT, int D>
struct Sm90PrefillShape {
  static constexpr PrefillPolicy kPolicy = Getter{}();
  using T = std::conditional_t<DT == DType::bf16, __nv_bfloat16, __half>;
  static constexpr DType kDType = DT;
  static constexpr int kD = D;
  static constexpr int BM = kPolicy.block_m, BN = kPolicy.block_n, S = kPolicy.num_stages;
  static constexpr int kConsumers = kPolicy.num_warps / 4 - 1;  // warp groups of 64 rows
  static constexpr int kThreads = kPolicy.num_warps * 32;
  static constexpr int kPanels = D / 64;
  static constexpr int kQPanel = BM * 128, kKVPanel = BN * 128;  // bytes of one 64-dim panel
  static constexpr int kQBytes = BM * D * 2, kKVBytes = BN * D * 2;
  static constexpr int kQBufs = prefill_sm90_q_buffers(kPolicy, DT, D);  // (policy.hpp)
  // Shared memory: the Q buffers, then per stage K and V; the mbarriers after them (Q full and
  // free per Q buffer, then K full, V full, K free, V free per stage), then each Q buffer's tile.
  static constexpr int kBarOffset = kQBufs * kQBytes + 2 * S * kKVBytes;
  // 48 bytes per Q buffer: its q tile (an Sm90Tile each), then the producer warps' two claim slots.
  static constexpr int kSlotOffset = kBarOffset + 8 * (2 * kQBufs + 4 * S);
  static_assert(DT == DType::fp16 || DT == DType::bf16, "the sm90 agent multiplies 16-bit inputs");
  static_assert(D % 64 == 0 && D <= 256, "the sm90 agent's tiles are whole 64-dim panels, N <= 256");
  static_assert(BM == 64 * kConsumers, "one consumer warp group per 64 q rows");
  static_assert(kConsumers == 2 || kConsumers == 3, "two or three consumer warp groups");
  static_assert(!kPolicy.ping_pong, "the sm90 agent has no ping-pong (FA3's turns: measured within ±4 %, not built)");
  // Registers a thread (setmaxnreg). The CTA keeps the registers it was launched with — 168 a
  // thread for 384 threads (64,512), 128 for 512 (65,536) — and setmaxnreg only moves them between
  // its warp groups: the producer gives up all but 40 (2 consumer groups) or 56 (3), the
  // consumers take the rest (multiples of 8): 232 each of 2 groups (40 · 128 + 232 · 256 =
  // 64,512 exactly), 152 each of 3 (56 · 128 + 152 · 384 = 65,536). A consumer count the pool
  // cannot give waits in setmaxnreg.inc forever (the producer at 32 with consumers at 240 hung
  // the 2-group kernels: 17,408 freed against 18,432 wanted). The producer's loop over q tiles
  // (the persistent schedule) spilled 248 B at 24 registers (ptxas, bf16 hd 128), a few dozen
  // bytes at 40 — its one thread's local loads hit L1; the consumers spill nothing.
  static constexpr int kProducerRegs = kConsumers == 2 ? 40 : 56;
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;  // __launch_bounds__(kThreads, 1)
  static constexpr int kConsumerRegs =
      (kLaunchRegs * kThreads - kProducerRegs * 128) / (128 * kConsumers) / 8 * 8;
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= kLaunchRegs * kThreads,
                "setmaxnreg moves registers within the CTA's launch allocation only");
  static_assert(BN == 64 || BN == 128, "key tiles of 64 or 128 (the wgmma forms generated)");
  static_assert(BN <= 256 && BM <= 256, "a TMA box has at most 256 rows");
  static_assert(kQBufs == 1 || kQBufs == 2, "one or two Q buffers");
  static_assert(prefill_smem_bytes(kPolicy, DT, D) == kSlotOffset + 48 * kQBufs + 1024,
                "prefill_smem_bytes (policy.hpp) is this layout plus the 1024-byte alignment slack");
};

// The three tensor maps of one launch (built on the host, prefill_sm90_launch.cuh), the rows of
// one K/V box — block_n for contiguous K/V (3-D maps), gcd(page_size, block_n) for paged K/V
// (4-D maps over the cache) — and, paged NHD, V's row groups in shared memory (v_row_offset):
// block_n, or the box rows where V's map is 5-D with the panels as a box dim (box rows ≥ 16: one
// TMA a box for all its panels, where K takes one a panel). (The vLLM layout's V tiles are
// [rows/16][D][32 B] whatever the box: v_rows stays block_n.)
struct Sm90PrefillMaps {
  CUtensorMap q, k, v;
  int kv_box_rows;
  int v_rows;
};

// ---- The steps of a key tile (one consumer warp group, 64 q rows) --------------------------------
// A thread holds rows r and r + 8 of the group's 64 (r = 16·warp + lane/4 within the group, here
// tile-relative) and columns col, col + 1 of every 8 (col = 2·(lane % 4)) of S and O: register
// 4j + e is row r + 8·(e / 2), column 8j + col + e % 2 (sm90_ptx.cuh).
struct Sm90Rows {
  int r;    // tile-relative row of registers e = 0, 1 (e = 2, 3: r + 8)
  int col;  // column within each 8
};

// S = Q Kᵀ over the head dim, D/16 k16 steps, issued and committed (not waited for). K in the
// panel-major tile, or (the vLLM layout) unswizzled [BN/8][D/8][128 B]: a k16 step two core
// matrices (+256 bytes), 8-key groups D · 16 bytes apart.
template <class Sh, KVSource Src>
__device__ __forceinline__ void qk_issue(float (&sc)[Sh::BN / 2], std::uint32_t q_rows, std::uint32_t k_tile) {
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Sh::kPanels * 4; ++kk) {
    const std::uint32_t in_panel = (kk % 4) * 32;  // a k16 step within a 64-dim panel
    const std::uint64_t k_desc = Src == KVSource::paged_vllm
                                     ? sm90::desc_interleaved(k_tile + kk * 256, 128, Sh::kD * 16)
                                     : sm90::desc_k_major(k_tile + (kk / 4) * Sh::kKVPanel + in_panel);
    sm90::wgmma_ss<Sh::kDType, Sh::BN>(sc, sm90::desc_k_major(q_rows + (kk / 4) * Sh::kQPanel + in_panel), k_desc,
                                       kk > 0);
  }
  sm90::wgmma_commit();
}

// Where row r, panel p of a V tile lies: V tiles are [BN / v_rows groups][D/64 panels][v_rows
// rows][128 B] — v_rows = BN (one group: the panel-major layout of K) or, paged V loaded a box a
// TMA, the box's rows (Sm90PrefillMaps::v_rows). v_rows is a power of two ≥ 16, so a k16 step's
// 16 rows lie in one group and panel.
template <class Sh>
__device__ __forceinline__ std::uint32_t v_row_offset(int r, int p, int v_rows) {
  const int group = r & ~(v_rows - 1);
  return static_cast<std::uint32_t>((group * Sh::kPanels + p * v_rows + (r - group)) * 128);
}

// O += P V over the key tile, BN/16 k16 steps (16 key rows of 128 bytes each), issued and
// committed. V's 64-column panels are v_rows · 128 bytes apart (the descriptor's leading offset).
// The vLLM layout's V is dim-major: [BN/16 steps][D rows][32 B], 16 tokens a row, swizzled by
// 32 bytes; a step's D · 32 bytes are its K-major B operand.
template <class Sh, KVSource Src>
__device__ __forceinline__ void pv_issue(float (&o)[Sh::kD / 2], const std::uint32_t (&pa)[Sh::BN / 16][4],
                                         std::uint32_t v_tile, int v_rows) {
  sm90::wgmma_fence();
  const std::uint32_t panel_bytes = static_cast<std::uint32_t>(v_rows) * 128;
#pragma unroll
  for (int kk = 0; kk < Sh::BN / 16; ++kk) {
    if constexpr (Src == KVSource::paged_vllm)
      sm90::wgmma_rk<Sh::kDType, Sh::kD>(o, pa[kk], sm90::desc_sw32_k_major(v_tile + kk * Sh::kD * 32), 1);
    else
      sm90::wgmma_rs<Sh::kDType, Sh::kD>(o, pa[kk], sm90::desc_mn_major(v_tile + v_row_offset<Sh>(16 * kk, 0, v_rows),
                                                                        panel_bytes), 1);
  }
  sm90::wgmma_commit();
}

// Waits for the key tile's V; on the tile that runs past the sequence (its last, the first
// visited) zeroes the rows past it first — both consumer groups together, made visible to wgmma's
// async reads before either multiplies — so that 0 · Inf from another sequence's rows cannot
// reach O.
template <class Sh, KVSource Src>
__device__ __forceinline__ void v_ready(unsigned char* smem, std::uint32_t base, std::uint32_t v_tile, int v_rows,
                                        std::uint32_t bar, std::uint32_t parity, int n0, int sk, int tid) {
  sm80::mbarrier_wait_parity(bar, parity);
  if (n0 + Sh::BN > sk) {
    const int first = sk - n0 > 0 ? sk - n0 : 0;
    unsigned char* v = smem + (v_tile - base);
    if constexpr (Src == KVSource::paged_vllm) {
      // Tokens run along V's rows here: the 16-byte chunks (8 tokens) of the steps from first's,
      // whole where past first, element by element where first falls inside.
      const int s0 = first / 16;
      const int chunks = (Sh::BN / 16 - s0) * Sh::kD * 2;
      for (int x = tid - 128; x < chunks; x += 128 * Sh::kConsumers) {
        const int s = s0 + x / (Sh::kD * 2), c = (x / 2) % Sh::kD, h = x % 2;
        const int t0 = 16 * s + 8 * h;  // the chunk's first token
        if (t0 + 8 <= first) continue;
        unsigned char* chunk = v + s * Sh::kD * 32 + c * 32 + ((h ^ ((c >> 2) & 1)) * 16);
        if (t0 >= first) {
          *reinterpret_cast<uint4*>(chunk) = make_uint4(0, 0, 0, 0);
        } else {
          for (int e = first - t0; e < 8; ++e) reinterpret_cast<unsigned short*>(chunk)[e] = 0;
        }
      }
    } else {
      const int chunks = (Sh::BN - first) * Sh::kPanels * 8;  // 16-byte chunks of the rows [first, BN)
      for (int x = tid - 128; x < chunks; x += 128 * Sh::kConsumers) {
        const int p = x / ((Sh::BN - first) * 8), rest = x % ((Sh::BN - first) * 8);
        *reinterpret_cast<uint4*>(v + v_row_offset<Sh>(first + rest / 8, p, v_rows) + (rest % 8) * 16) =
            make_uint4(0, 0, 0, 0);
      }
    }
    sm90::fence_proxy_async();
    sm80::named_barrier_sync(1, 128 * Sh::kConsumers);
  }
}

// The mask of one consumer group's rows: keys past the sequence, and (causal) above the diagonal.
// Only tiles that cross either pay for it (tile_needs_mask, for the group's first row m0c).
struct TileMaskSm90 {
  int m0;   // the q tile's first row (sequence-relative)
  int m0c;  // this group's first row
  int sq, sk;
  bool causal;
  template <int BN>
  __device__ __forceinline__ void apply(float (&sc)[BN / 2], int n0, Sm90Rows rows) const {
    if (!tile_needs_mask(n0, BN, m0c, sq, sk, causal)) return;
    // key_masked per row, as a bound: row i sees keys j < min(sk, i + sk − sq + 1) (causal), made
    // relative to this thread's first column of the tile, so each element is one compare against
    // a constant (per element, key_masked's 64-bit arithmetic cost ~2.5x the softmax itself).
    int bound[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      long long lim = sk;
      if (causal) {
        const long long diag = static_cast<long long>(m0 + rows.r + 8 * hr) + sk - sq + 1;
        lim = diag < lim ? diag : lim;
      }
      lim -= static_cast<long long>(n0) + rows.col;
      bound[hr] = lim < 0 ? 0 : (lim > BN ? BN : static_cast<int>(lim));
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (8 * j + (e & 1) >= bound[e >> 1]) sc[4 * j + e] = -INFINITY;
  }
};

// The rows' rescale factors b^(m_old − m_new), and whether any row of the warp moved its max.
struct Sm90Rescale {
  float factor[2];
  bool any;
};

// Online softmax of one key tile: the rows' max over the quad (2 shuffles), P = 2^(S·c − m·c) in
// place, l = l·factor + Σ P. O's rescale is left to rescale_o (it waits for the PV in flight).
template <int BN, class Units>
__device__ __forceinline__ Sm90Rescale softmax_step(float (&sc)[BN / 2], float (&row_m)[2], float (&row_l)[2],
                                                    const Units& units) {
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
  Sm90Rescale f;
  float mu[2], sum[2] = {0.f, 0.f};
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    mu[hr] = units.stabiliser(mx[hr]);              // a row with nothing visible yet: 0, and p = 0
    f.factor[hr] = units.factor(row_m[hr], mu[hr]);  // m_old = −inf → 0; unchanged max → 1
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
  for (int hr = 0; hr < 2; ++hr) row_l[hr] = row_l[hr] * f.factor[hr] + sum[hr];
  // Once the rows' maxima settle (most tiles after the first few) the factor is exactly 1 and
  // the multiply by it can be skipped, warp by warp: exact, not an approximation.
  f.any = __any_sync(0xffffffffu, f.factor[0] != 1.f || f.factor[1] != 1.f);
  return f;
}

template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 2], const Sm90Rescale& f) {
  if (!f.any) return;
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[4 * j + e] *= f.factor[e >> 1];
}

// P to 16 bits in the A fragment of k16 step kk: S columns 16kk .. 16kk + 15 (n8 blocks 2kk and
// 2kk + 1) — rows r, r + 8 × columns col, col + 8 of the step.
template <DType DT, int BN>
__device__ __forceinline__ void pack_p(std::uint32_t (&pa)[BN / 16][4], const float (&sc)[BN / 2]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    pa[kk][0] = sm80::pack2<DT>(sc[8 * kk + 0], sc[8 * kk + 1]);
    pa[kk][1] = sm80::pack2<DT>(sc[8 * kk + 2], sc[8 * kk + 3]);
    pa[kk][2] = sm80::pack2<DT>(sc[8 * kk + 4], sc[8 * kk + 5]);
    pa[kk][3] = sm80::pack2<DT>(sc[8 * kk + 6], sc[8 * kk + 7]);
  }
}

// ---- The producer's K/V boxes ------------------------------------------------------------------
// Where one lane of a producer warp finds its box of a key tile: contiguous K/V, lane 0 the
// whole tile (row of the 3-D map); paged, lane j of every warp box j (box_rows keys from key
// kt·BN + j·box_rows: a slot and a page; page −1 past the sequence's pages, not loaded), which
// warp j % kIssuers issues.
struct Sm90Box {
  int row;   // contiguous: the map's row; paged: the slot within the page
  int page;  // paged: the page (−1: not loaded)
};

template <class Sh, KVSource Src>
struct Sm90KvBoxes {
  static constexpr bool kPaged = is_paged(Src);
  static constexpr int kIssuers = kPaged ? 4 : 1;  // the producer warps issuing boxes
  int lane, warp, kvh, k_off;
  int box_rows, boxes;         // rows of a box; boxes of a key tile (1 for contiguous K/V)
  bool v_panels_in_box;        // paged NHD: V's map is 5-D (a TMA a box, all panels)
  const int* blocks = nullptr;  // paged: the sequence's block-table row
  int used_pages = 0;          // paged: pages holding its keys
  int heads = 0;               // paged vLLM: the cache's kv heads (the maps' last dim: page · heads + kvh)
  FastDiv page;

  __device__ __forceinline__ Sm90KvBoxes(const Sm90PrefillMaps& maps, const PrefillPagedKV& kv, int b, int kvh_,
                                         int k_off_, int sk, int tid)
      : lane(tid % 32),
        warp(tid / 32),
        kvh(kvh_),
        k_off(k_off_),
        box_rows(maps.kv_box_rows),
        boxes(Sh::BN / maps.kv_box_rows),
        v_panels_in_box(maps.v_rows != Sh::BN) {
    if constexpr (kPaged) {
      blocks = kv.block_table + static_cast<long long>(b) * kv.max_blocks_per_seq;
      used_pages = (sk + kv.page_size - 1) / kv.page_size;
      heads = kv.num_kv_heads;
      page = kv.page_div;
    }
  }

  // This lane's box of key tile kt (the block-table read is the only global load).
  __device__ __forceinline__ Sm90Box locate(int kt) const {
    if constexpr (!kPaged) {
      return {k_off + kt * Sh::BN, 0};
    } else {
      if (lane >= boxes || lane % kIssuers != warp) return {0, -1};  // another warp's box
      int slot;
      const int pi = page.divmod(kt * Sh::BN + lane * box_rows, &slot);
      return {slot, pi < used_pages ? blocks[pi] : -1};
    }
  }

  // The boxes of one key tile (its K, or its V: value) into the stage buffer at dst, completing on
  // bar: lane 0 arms the barrier with the bytes of every box loaded (paged: of its warp's boxes;
  // the barrier expects one arrival a warp), then each lane issues its own. Paged NHD: a TMA a
  // panel into the panel-major tile, or (V's 5-D map) one into its box's row group. vLLM layout:
  // one for the whole box, K over (64, D/8, slots/8, pages · heads) from slot/8, V over (16, D,
  // slots/16, pages · heads) from slot/16 (prefill_sm90_launch.cuh's maps).
  __device__ __forceinline__ void load(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, Sm90Box box,
                                       bool value) const {
    if constexpr (!kPaged) {
      if (lane == 0) {
        sm90::mbar_arrive_expect_tx(bar, Sh::kKVBytes);
#pragma unroll
        for (int p = 0; p < Sh::kPanels; ++p) sm90::tma_load_3d(dst + p * Sh::kKVPanel, map, bar, 64 * p, kvh, box.row);
      }
    } else {
      const bool mine = box.page >= 0;
      const unsigned loaded = __ballot_sync(0xffffffffu, mine);
      if (lane == 0) sm90::mbar_arrive_expect_tx(bar, __popc(loaded) * box_rows * 128 * Sh::kPanels);
      __syncwarp();
      if constexpr (Src == KVSource::paged_vllm) {
        if (mine)
          sm90::tma_load_4d(dst + static_cast<std::uint32_t>(lane * box_rows * 128 * Sh::kPanels), map, bar, 0, 0,
                            box.row / (value ? 16 : 8), box.page * heads + kvh);
      } else if (mine && value && v_panels_in_box) {
        sm90::tma_load_5d(dst + static_cast<std::uint32_t>(lane * box_rows * 128 * Sh::kPanels), map, bar, 0,
                          box.row, kvh, box.page, 0);
      } else if (mine) {
        const std::uint32_t at = dst + static_cast<std::uint32_t>(lane * box_rows * 128);
#pragma unroll
        for (int p = 0; p < Sh::kPanels; ++p)
          sm90::tma_load_4d(at + p * Sh::kKVPanel, map, bar, 64 * p, kvh, box.row, box.page);
      }
    }
  }
};

// ---- The q tiles of a CTA ----------------------------------------------------------------------
// The q tiles one CTA computes, in turn (tile_of order, the heaviest first). The first is
// blockIdx.x. With a counter — the plan's persistent schedule (prefill_plan.hpp): a grid of one
// CTA per SM, the counter zeroed on the stream before the launch — each next one is the next
// unclaimed tile, so a CTA that finishes early takes more, as the hardware balances a grid of one
// CTA per tile, while its next tile's Q and K/V load during this one's epilogue. (A static
// round-robin over the same order ran causal grids 10–30 % slower: h100-2026-12-06-sm90-prefill
// call 5.) Without a counter, blockIdx.x + gridDim.x: none left in a grid of one CTA per tile.
struct Sm90Scheduler {
  int* counter = nullptr;  // nullptr: one CTA per q tile
  int tiles = 0;           // q tiles of the launch (prefill_grid_size)
#if defined(__CUDACC__)
  __device__ __forceinline__ int first() const { return static_cast<int>(blockIdx.x); }
  // By the producer: one thread (contiguous K/V) or kThreads of warp group 0 (paged: one warp a
  // box issuer), thread 0 claiming for them. Beyond one warp the claims pass through two shared
  // slots in turn, behind named barrier 5: a slot is written again two claims later, after a
  // barrier that every thread reaches only once it has read it.
  template <int kThreads>
  __device__ __forceinline__ int claim(int current, int* slots, int& claims) const {
    if (counter == nullptr) return current + static_cast<int>(gridDim.x);
    int next = 0;
    if (threadIdx.x == 0) next = atomicAdd(counter, 1);
    if constexpr (kThreads == 32) next = __shfl_sync(0xffffffffu, next, 0);
    if constexpr (kThreads > 32) {
      int* const slot = slots + (claims++ & 1);
      if (threadIdx.x == 0) *slot = next;
      sm80::named_barrier_sync(5, kThreads);
      next = *slot;
    }
    return next + static_cast<int>(gridDim.x);
  }
#endif
};

// The paged guard (prefill_kv.cuh's paged_sequence_ok) by the 32 lanes of a producer warp alone
// (each of the issuing warps runs it whole, and they reach the same answer), the consumers busy
// with the tile before: before each q tile of the persistent schedule. (Here,
// not in prefill_kv.cuh: the portable agent's files make no cross-lane call of their own,
// warp_tile.cuh; this is sm_90a code.) 6,250 ids at 100k keys and page 16 are 196 loads a lane,
// against the ~13 GFLOP of a q tile over those keys at hd 256.
__device__ __forceinline__ bool paged_sequence_ok_warp(const PrefillPagedKV& p, int b, int max_seqlen_k, int* errors,
                                                       int tid) {
  const int n = p.seqused_k[b];
  const bool len_ok = n >= 0 && n <= max_seqlen_k;
  const bool bad_id = len_ok && paged_ids_bad(p, b, n, tid % 32, 32);
  if (!__any_sync(0xffffffffu, bad_id) && len_ok) return true;
  if (tid == 0) flag_input_error(errors, len_ok ? InputError::block_id : InputError::seq_len);
  return false;
}

// What one q tile computes: its coordinates, its sequence's q rows and keys, its key tiles
// (kt_end − 1 … 0). The producer derives it from the tile's index (sm90_tile) and hands it to
// the consumers through shared memory with the tile's Q, kt_end −1 marking the end.
struct Sm90Tile {
  TileCoord tc{};
  int q_off = 0, sq = 0, m0 = 0;  // the sequence's first q row and q rows; the tile's first row
  int k_off = 0, sk = 0;          // its first key row (contiguous K/V) and keys
  int kt_end = 0;
};
static_assert(sizeof(Sm90Tile) <= 48, "a tile's slot in shared memory is 48 bytes (prefill_sm90_smem_bytes)");

template <class Sh, bool kPaged>
__device__ __forceinline__ Sm90Tile sm90_tile(const PrefillArgs& a, const PrefillPagedKV& kv, int linear) {
  Sm90Tile t;
  t.tc = tile_of(linear, a);
  t.q_off = a.cu_seqlens_q[t.tc.b];
  t.sq = a.cu_seqlens_q[t.tc.b + 1] - t.q_off;
  t.m0 = t.tc.m_block * Sh::BM;
  t.k_off = kPaged ? 0 : a.cu_seqlens_k[t.tc.b];
  t.sk = kPaged ? paged_kv_len(kv, t.tc.b) : a.cu_seqlens_k[t.tc.b + 1] - t.k_off;
  t.kt_end = (visible_keys(t.m0, Sh::BM, t.sq, t.sk, a.causal) + Sh::BN - 1) / Sh::BN;
  return t;
}

template <class Getter, DType DT, int D, KVSource Src, bool kOverlap = Getter{}().overlap>
__device__ __forceinline__ void prefill_sm90_body(const PrefillArgs& a, const Sm90PrefillMaps& maps,
                                                  const PrefillPagedKV& kv, const Sm90Scheduler& sched) {
  using Sh = Sm90PrefillShape<Getter, DT, D>;
  constexpr int kIssuers = Sm90KvBoxes<Sh, Src>::kIssuers;
  constexpr int BN = Sh::BN, S = Sh::S, QB = Sh::kQBufs;
  extern __shared__ __align__(1024) unsigned char prefill_sm90_smem[];
  // The panels need 1024-byte alignment (the swizzle pattern repeats every 8 rows of 128 bytes).
  const std::uint32_t raw = sm80::smem_addr(prefill_sm90_smem);
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* const smem = prefill_sm90_smem + (base - raw);
  auto sQ = [&](int qb) { return base + static_cast<std::uint32_t>(qb * Sh::kQBytes); };
  auto sK = [&](int s) { return base + static_cast<std::uint32_t>(QB * Sh::kQBytes + 2 * s * Sh::kKVBytes); };
  auto sV = [&](int s) { return sK(s) + static_cast<std::uint32_t>(Sh::kKVBytes); };
  const std::uint32_t bars = base + Sh::kBarOffset;
  auto bar_q = [&](int qb) { return bars + 8u * qb; };                // Q (and its tile's index) landed
  auto bar_q_free = [&](int qb) { return bars + 8u * (QB + qb); };    // the epilogue is done with the buffer
  auto bar_k = [&](int s) { return bars + 8u * (2 * QB + s); };
  auto bar_v = [&](int s) { return bars + 8u * (2 * QB + S + s); };
  auto bar_k_free = [&](int s) { return bars + 8u * (2 * QB + 2 * S + s); };  // QKᵀ of the stage's K done
  auto bar_v_free = [&](int s) { return bars + 8u * (2 * QB + 3 * S + s); };  // PV of the stage's V done
  // The q tile in Q buffer qb (kt_end −1: no more tiles), written before its bar_q arrival, whose
  // release the consumers' wait acquires.
  Sm90Tile* const tile_slot = reinterpret_cast<Sm90Tile*>(smem + Sh::kSlotOffset);
  static_assert(QB * sizeof(Sm90Tile) + 2 * sizeof(int) <= 48 * QB, "the tiles and the claim slots in 48 bytes a Q buffer");
  int* const claim_slots = reinterpret_cast<int*>(smem + Sh::kSlotOffset + QB * sizeof(Sm90Tile));

  const int tid = threadIdx.x;
  constexpr bool kPaged = is_paged(Src);
  if (tid == 0) {
    for (int qb = 0; qb < QB; ++qb) {
      sm80::mbarrier_init(bar_q(qb), 1);
      // One arrival per consumer thread: an arrival releases the arriving thread's own reads only
      // (of the tile's slot and the O it staged), so one lane's for its warp left the other
      // lanes' reads unordered before the next tile's writes — compute-sanitizer's racecheck
      // reported exactly those (h100-2026-12-06-sm90-persistent calls 1 and 2).
      sm80::mbarrier_init(bar_q_free(qb), 128 * Sh::kConsumers);
    }
    for (int s = 0; s < S; ++s) {
      sm80::mbarrier_init(bar_k(s), kIssuers);  // an arrival (with its boxes' bytes) per issuing warp
      sm80::mbarrier_init(bar_v(s), kIssuers);
      sm80::mbarrier_init(bar_k_free(s), 4 * Sh::kConsumers);
      sm80::mbarrier_init(bar_v_free(s), 4 * Sh::kConsumers);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();

  // Key tile g of the CTA's whole run (over all its q tiles) lives in stage g % S; its buffers'
  // phase is (g / S) & 1. The CTA's n-th q tile is in Q buffer n % QB, phase (n / QB) & 1.
  const int wg = tid / 128;
  if (wg == 0) {
    // ---- Producer: one thread issues every load (paged K/V: kIssuers warps, a box a lane) -------
    sm90::setmaxnreg_dec<Sh::kProducerRegs>();
    constexpr int kLoaders = kPaged ? 32 * kIssuers : 1;
    if (tid >= kLoaders) return;
    int g = 0;       // key tiles issued for the CTA's earlier q tiles
    int claims = 0;  // the warps' claims so far (Sm90Scheduler::claim)
    int linear = sched.first();
    for (int n = 0;; ++n) {
      // The next q tile with rows to compute, its sequence guarded (the input guard: cu_seqlens,
      // prefill_common.cuh; paged, seqused_k and its block-table row, prefill_kv.cuh — by the
      // producer warps alone, the consumers busy with the tile before).
      Sm90Tile t;
      for (; linear < sched.tiles; linear = sched.claim<kLoaders>(linear, claim_slots, claims)) {
        t = sm90_tile<Sh, kPaged>(a, kv, linear);
        if (!prefill_sequence_ok<!kPaged>(a, t.tc.b) || t.m0 >= t.sq) continue;
        if constexpr (kPaged)
          if (!paged_sequence_ok_warp(kv, t.tc.b, a.max_seqlen_k, a.input_errors, tid)) continue;
        break;
      }
      const bool done = linear >= sched.tiles;
      const int kt_end = done ? 0 : t.kt_end;
      const int after = done ? linear : sched.claim<kLoaders>(linear, claim_slots, claims);  // behind this tile's loads
      const int q_row = t.q_off + t.m0, h = t.tc.h;
      const Sm90KvBoxes<Sh, Src> boxes(maps, kv, t.tc.b, h / a.group, t.k_off, t.sk, tid);
      // K/V of key tile i (kt_end − 1 − i of the sequence) into stage (g + i) % S. K and V of a
      // stage are freed apart: the consumers are done with K_g after QKᵀ_g and with V_g only after
      // PV_g, one key tile later (the overlap below), so K_{g+S} loads while PV_g still runs. A
      // paged tile's pages are looked up one tile ahead, while the stage's wait covers the block
      // table's latency.
      Sm90Box box = kt_end > 0 ? boxes.locate(kt_end - 1) : Sm90Box{};
      auto load_kv = [&](int i) {
        const int s = (g + i) % S;
        const Sm90Box here = box;
        if (i + 1 < kt_end) box = boxes.locate(kt_end - 2 - i);
        const std::uint32_t freed = (((g + i) / S) - 1) & 1;  // the phase that key tile g + i − S completed
        if (g + i >= S) sm80::mbarrier_wait_parity(bar_k_free(s), freed);
        boxes.load(sK(s), &maps.k, bar_k(s), here, false);
        if (g + i >= S) sm80::mbarrier_wait_parity(bar_v_free(s), freed);
        boxes.load(sV(s), &maps.v, bar_v(s), here, true);
      };
      // Q goes first where its buffer is free already: the CTA's first tile, and with two Q
      // buffers every tile (the epilogue that frees one is that of two tiles back). With one Q
      // buffer (hd 256) the first S key tiles go before Q, which waits for the epilogue of the
      // tile before: their stages are freed by that tile (never by this one, which cannot start
      // without its Q), so they load during the epilogue. (With K/V ahead of every Q, the kernel
      // of one CTA per tile ran 3–9 % below the previous session's on the H100, call 1 of
      // h100-2026-12-06-sm90-persistent — a CTA's first Q behind up to 128 KB of K/V the suspect.)
      const int early = n < QB || QB == 2 ? 0 : (kt_end < S ? kt_end : S);
      for (int i = 0; i < early; ++i) load_kv(i);
      // Q once its buffer is free (the epilogue of q tile n − QB has read it back), with the
      // tile; no more tiles: the end mark alone.
      const int qb = n % QB;
      if (n >= QB) sm80::mbarrier_wait_parity(bar_q_free(qb), ((n / QB) - 1) & 1);
      if (tid == 0) {
        // (Derived again rather than kept in registers across the loads above: the producer has
        // 40 of them, and the tile's nine values spilled there.)
        Sm90Tile& slot = tile_slot[qb];
        slot = done ? Sm90Tile{} : sm90_tile<Sh, kPaged>(a, kv, linear);
        if (done) slot.kt_end = -1;
        if (kt_end == 0) {
          sm80::mbarrier_arrive(bar_q(qb));
        } else {
          sm90::mbar_arrive_expect_tx(bar_q(qb), Sh::kQBytes);
#pragma unroll
          for (int p = 0; p < Sh::kPanels; ++p)
            sm90::tma_load_3d(sQ(qb) + p * Sh::kQPanel, &maps.q, bar_q(qb), 64 * p, h, q_row);
        }
      }
      for (int i = early; i < kt_end; ++i) load_kv(i);
      if (done) return;
      g += kt_end;
      linear = after;
    }
  }

  // ---- Consumers ---------------------------------------------------------------------------------
  sm90::setmaxnreg_inc<Sh::kConsumerRegs>();
  const int c = wg - 1;  // this group's rows: [64c, 64c + 64) of the tile
  const int lt = tid % 128, lane = tid % 32;
  const Sm90Rows rows{64 * c + 16 * (lt / 32) + lane / 4, 2 * (lane % 4)};
  const ScaledUnits<sm80::Exp2Approx> units{a.scale_log2, a.scale};
  const int v_rows = kPaged ? maps.v_rows : BN;  // V's row groups (v_row_offset; contiguous: one)
  using T = typename Sh::T;

  int g = 0;  // key tiles of the CTA's earlier q tiles
  for (int n = 0;; ++n) {
    const int qb = n % QB;
    sm80::mbarrier_wait_parity(bar_q(qb), (n / QB) & 1);  // (its "memory" clobber orders the read below)
    const Sm90Tile t = tile_slot[qb];
    if (t.kt_end < 0) return;
    const int kt_end = t.kt_end, sk = t.sk;
    const TileMaskSm90 mask{t.m0, t.m0 + 64 * c, t.sq, sk, a.causal};
    const std::uint32_t q_rows = sQ(qb) + 64 * c * 128;  // this group's 64 rows of each Q panel

    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.f, 0.f};
    float sc[BN / 2];             // S of the key tile in flight, then its weights P (fp32)
    std::uint32_t pa[BN / 16][4];  // P of the previous key tile, 16-bit: the A operand of its PV

    auto stage = [&](int i) { return (g + i) % S; };
    auto parity = [&](int i) { return static_cast<std::uint32_t>(((g + i) / S) & 1); };
    auto first_key = [&](int i) { return (kt_end - 1 - i) * BN; };  // sequence-relative

    if constexpr (!kOverlap) {
      // One key tile at a time: S = Q Kᵀ, softmax, O += P V. The two consumer groups still
      // overlap each other (one's softmax beside the other's GEMMs, as the schedulers interleave).
      for (int i = 0; i < kt_end; ++i) {
        sm80::mbarrier_wait_parity(bar_k(stage(i)), parity(i));
        qk_issue<Sh, Src>(sc, q_rows, sK(stage(i)));
        sm90::wgmma_wait<0>();
        sm90::fence_operands(sc);
        if (lane == 0) sm80::mbarrier_arrive(bar_k_free(stage(i)));
        mask.apply<BN>(sc, first_key(i), rows);
        const Sm90Rescale f = softmax_step<BN>(sc, row_m, row_l, units);
        rescale_o<D>(o, f);
        pack_p<DT, BN>(pa, sc);
        v_ready<Sh, Src>(smem, base, sV(stage(i)), v_rows, bar_v(stage(i)), parity(i), first_key(i), sk, tid);
        pv_issue<Sh, Src>(o, pa, sV(stage(i)), v_rows);
        sm90::wgmma_wait<0>();
        sm90::fence_operands(o);
        if (lane == 0) sm80::mbarrier_arrive(bar_v_free(stage(i)));
      }
    } else {
      if (kt_end > 0) {
        // Tile 0: S = Q Kᵀ, then its softmax (O is still zero: nothing to rescale).
        sm80::mbarrier_wait_parity(bar_k(stage(0)), parity(0));
        qk_issue<Sh, Src>(sc, q_rows, sK(stage(0)));
        sm90::wgmma_wait<0>();
        sm90::fence_operands(sc);
        if (lane == 0) sm80::mbarrier_arrive(bar_k_free(stage(0)));
        mask.apply<BN>(sc, first_key(0), rows);
        softmax_step<BN>(sc, row_m, row_l, units);
        pack_p<DT, BN>(pa, sc);
      }
      // Tile i ≥ 1: its QKᵀ runs beside tile i − 1's PV, and its softmax beside the PV's tail
      // (FlashAttention-3's intra-warpgroup overlap): S_i and P_{i−1} are both in registers.
      for (int i = 1; i < kt_end; ++i) {
        sm80::mbarrier_wait_parity(bar_k(stage(i)), parity(i));
        v_ready<Sh, Src>(smem, base, sV(stage(i - 1)), v_rows, bar_v(stage(i - 1)), parity(i - 1), first_key(i - 1), sk, tid);
        qk_issue<Sh, Src>(sc, q_rows, sK(stage(i)));                                 // S_i = Q K_iᵀ      (group 1)
        pv_issue<Sh, Src>(o, pa, sV(stage(i - 1)), v_rows);                                  // O += P_{i−1} V_{i−1} (group 2)
        sm90::wgmma_wait<1>();                                                  // S_i has landed
        sm90::fence_operands(sc);
        if (lane == 0) sm80::mbarrier_arrive(bar_k_free(stage(i)));                // this warp is done with K_i
        mask.apply<BN>(sc, first_key(i), rows);
        const Sm90Rescale f = softmax_step<BN>(sc, row_m, row_l, units);       // P_i, the rows' new max
        // Pins the softmax before the wait: register arithmetic may otherwise sink past an asm
        // statement, and did (all of it after the wait below: the overlap gone, 8-30 % slower).
        sm90::fence_operands(sc);
        sm90::wgmma_wait<0>();                                                  // PV_{i−1} has landed
        sm90::fence_operands(o);
        if (lane == 0) sm80::mbarrier_arrive(bar_v_free(stage(i - 1)));            // ... and with V_{i−1}
        rescale_o<D>(o, f);
        pack_p<DT, BN>(pa, sc);
      }
      if (kt_end > 0) {
        const int last = kt_end - 1;
        v_ready<Sh, Src>(smem, base, sV(stage(last)), v_rows, bar_v(stage(last)), parity(last), first_key(last), sk, tid);
        pv_issue<Sh, Src>(o, pa, sV(stage(last)), v_rows);
        sm90::wgmma_wait<0>();
        sm90::fence_operands(o);
        if (lane == 0) sm80::mbarrier_arrive(bar_v_free(stage(last)));
      }
    }

    // ---- Epilogue: O / l through this group's Q rows, then whole 16-byte chunks to out -------------
    unsigned char* const staged = smem + (sQ(qb) - base);
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      row_l[hr] += __shfl_xor_sync(0xffffffffu, row_l[hr], 1);
      row_l[hr] += __shfl_xor_sync(0xffffffffu, row_l[hr], 2);
    }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const OnlineSoftmax row(row_m[hr], row_l[hr]);
      const float inv = row.inv_l();
      const int r = rows.r + 8 * hr;
      if (a.lse != nullptr && lane % 4 == 0 && t.m0 + r < t.sq) *lse_slot(a, t.tc.h, t.q_off, t.m0, r) = row.lse(units);
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        const int p = j / 8, chunk = (j % 8) ^ (r % 8);  // the 128-byte swizzle of the panel
        *reinterpret_cast<std::uint32_t*>(staged + p * Sh::kQPanel + r * 128 + chunk * 16 + rows.col * 2) =
            sm80::pack2<DT>(o[4 * j + 2 * hr] * inv, o[4 * j + 2 * hr + 1] * inv);
      }
    }
    sm80::named_barrier_sync(2 + c, 128);  // this group's rows are staged
    const long long ldq = static_cast<long long>(a.num_q_heads) * D;
    T* gO = static_cast<T*>(a.out) + (t.q_off + t.m0) * ldq + static_cast<long long>(t.tc.h) * D;
    constexpr int kRowChunks = D / 8;
#pragma unroll 4
    for (int x = lt; x < 64 * kRowChunks; x += 128) {
      const int r = 64 * c + x / kRowChunks, ch = x % kRowChunks;
      const int p = ch / 8, chunk = (ch % 8) ^ (r % 8);
      if (t.m0 + r < t.sq)
        *reinterpret_cast<uint4*>(gO + r * ldq + ch * 8) =
            *reinterpret_cast<const uint4*>(staged + p * Sh::kQPanel + r * 128 + chunk * 16);
    }
    // This thread is done with the Q buffer (its staged rows read back): the next Q may load
    // there. Its generic-proxy writes are ordered before the TMA's async-proxy writes by the fence.
    sm90::fence_proxy_async();
    sm80::mbarrier_arrive(bar_q_free(qb));
    g += kt_end;
  }
}

// Each CTA computes the q tiles `sched` gives it (tile_of order) whole, its K/V from source Src
// (contiguous: kv unused). Compiled for sm_90a only (CMake's muh_sm90a objects); an empty body
// anywhere else.
template <class Getter, DType DT, int D, KVSource Src, bool kOverlap = Getter{}().overlap>
__global__ void __launch_bounds__(Getter{}().num_warps * 32, 1)
    prefill_sm90_kernel(const PrefillArgs a, const __grid_constant__ Sm90PrefillMaps maps, const PrefillPagedKV kv,
                        const Sm90Scheduler sched) {
#if MUH_SM90A_PTX
  prefill_sm90_body<Getter, DT, D, Src, kOverlap>(a, maps, kv, sched);
#endif
}

}  // namespace muh::kernels
