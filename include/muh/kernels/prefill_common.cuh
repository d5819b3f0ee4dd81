// kernels/prefill_common.cuh — what every prefill agent shares: the launch arguments, the element
// types, the CTA → (q tile, sequence, head) schedule and the causal key range.
//
// Shapes (FlashAttention's varlen convention, see attention.hpp):
//   q, out [total_q, num_q_heads, head_dim]   k, v [total_k, num_kv_heads, head_dim]
//   lse    [num_q_heads, total_q] fp32         cu_seqlens_q / cu_seqlens_k [batch + 1] int32
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "muh/dtype.hpp"
#include "muh/kernels/input_guard.cuh"
#include "muh/kernels/numeric.cuh"

namespace muh::kernels {

// Element types and the base-2 softmax constants (kLog2e, kLn2) come from kernels/numeric.cuh
// (the constants from online_softmax.hpp, through it).

// One prefill launch, as src/prefill.cu validated and filled it.
struct PrefillArgs {
  const void* q = nullptr;     // [total_q, num_q_heads, head_dim]
  const void* k = nullptr;     // [total_k, num_kv_heads, head_dim]
  const void* v = nullptr;     // [total_k, num_kv_heads, head_dim]
  void* out = nullptr;         // [total_q, num_q_heads, head_dim]
  float* lse = nullptr;        // [num_q_heads, total_q] or nullptr
  const int* cu_seqlens_q = nullptr;  // [batch + 1]
  const int* cu_seqlens_k = nullptr;  // [batch + 1]
  int batch = 0;
  int total_q = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int group = 1;               // num_q_heads / num_kv_heads (GQA: q head h reads kv head h / group)
  int max_seqlen_q = 0;        // longest q sequence (sizes the grid)
  int num_m_blocks = 0;        // ceil(max_seqlen_q / block_m): set by launch_prefill from its policy
  float scale = 0.f;           // softmax scale (natural-log units, for lse)
  float scale_log2 = 0.f;      // scale · log2(e): p = exp2(s · scale_log2 − m · scale_log2)
  bool causal = false;         // bottom-right aligned: query i sees keys j <= i + len_k − len_q
  // The bounds the input guard holds cu_seqlens to (prefill_sequence_ok), and where it flags.
  int total_k = 0;
  int max_seqlen_k = 0;
  int* input_errors = nullptr;  // [kInputErrorWords] flags (muh/input_errors.hpp) or nullptr
};

// The tail split of a launch (prefill_plan.hpp chooses it; tail_tiles = 0: none), a kernel
// argument of its own so that the whole-tile kernel's arguments stay as they were. The first
// main_tiles q tiles (tile_of order) run whole, one CTA each; then tail_ctas CTAs (a second
// launch, prefill_sm80.cuh says why) share the last tail_tiles tiles by key range: the key tiles
// of those tiles, laid end to end (key_tiles per tile), are dealt out tail_chunk per CTA
// (tail_segment below). Each piece writes a normalised (o, lse) partial to its workspace slot,
// (CTA + tile) — unique, see tail_segment — and prefill_tail_merge_kernel combines a tile's
// pieces into out and lse.
struct PrefillTail {
  int main_tiles = 0;          // set by launch_prefill: grid tiles − tail_tiles
  int tail_tiles = 0;
  int tail_ctas = 0;
  int tail_chunk = 0;          // key tiles per tail CTA, 1 ≤ tail_chunk ≤ key_tiles
  int key_tiles = 0;           // key tiles of each tail tile: ceil(max_seqlen_k / block_n)
  float* ws_o = nullptr;       // [slots][block_m][head_dim] fp32, slots = tail_ctas + tail_tiles − 1
  float* ws_lse = nullptr;     // [slots][block_m] fp32
};

// The persistent schedule of a launch (prefill_plan.hpp chooses it; ctas = 0: none, one CTA per
// q tile): ctas CTAs take the q tiles in turn from a counter in the plan's workspace, zeroed on
// the stream before the launch (the sm90 agent: prefill_sm90.cuh's Sm90Scheduler).
struct PrefillSchedule {
  int ctas = 0;
  int* counter = nullptr;  // one int, 16-byte aligned
  bool persistent() const { return ctas > 0; }
};

// CTAs of one launch: num_m_blocks × batch × num_q_heads.
inline long long prefill_grid_size(const PrefillArgs& a) {
  return static_cast<long long>(a.num_m_blocks) * a.batch * a.num_q_heads;
}

// The work of one CTA. The linear block index runs over q tiles fastest, in chunks of
// kPrefillChunk tiles (all of them without a causal mask), then heads, then sequences, then
// chunks. CTAs that run together thus read the K/V of a few (sequence, head) pairs, which stay in
// L2 (FlashAttention-2's grid has q tiles fastest for the same reason): with heads fastest, the
// 132 CTAs of a wave at hd 256, seq 4k (64 sequence-heads × 32 tiles) read 64 different 4 MB K/V
// streams — 256 MB against a 50 MB L2 — two CTAs per stream. Within a chunk, and chunk by chunk,
// tiles go from the LAST one down: under a causal mask the tiles that see the most keys start
// first and the last wave is made of short tiles rather than long ones; chunking keeps that
// order global enough that the tail is short tiles only. Measured together with the skipped O
// rescale (prefill_sm80.cuh) on the H200, `muh bench prefill`, seq 4k / 4k causal / 16k / 16k
// causal (two runs of one session): hd128 128×64 w4 +5.9/+4.1/+4.6/+1.7 %, hd256 128×64 w8
// +2.9/+3.0/+2.7/+2.8 %; the 64×64 w4 hd-256 row read 256/256/288/293 TFLOP/s in the earlier
// session's sweep and 290/279/293/285 after (the gain at 4k, where heads-fastest shared each
// stream between 2–4 CTAs; at 16k it already shared one among ~8).
inline constexpr int kPrefillChunk = 8;

struct TileCoord {
  int m_block;
  int b;
  int h;
};

__host__ __device__ __forceinline__ TileCoord tile_of(long long linear, const PrefillArgs& a) {
  const int nm = a.num_m_blocks;
  const long long bh_count = static_cast<long long>(a.batch) * a.num_q_heads;
  const int chunk = a.causal && nm > kPrefillChunk ? kPrefillChunk : nm;
  const long long full = nm / chunk;  // whole chunks, from the top tiles down; then the rest
  const long long in_full = full * chunk * bh_count;
  long long bh;
  int m_from_top;
  if (linear < in_full) {
    const long long c = linear / (chunk * bh_count), r = linear % (chunk * bh_count);
    bh = r / chunk;
    m_from_top = static_cast<int>(c * chunk + r % chunk);
  } else {
    const int rem = nm - static_cast<int>(full) * chunk;  // > 0 here
    const long long r = linear - in_full;
    bh = r / rem;
    m_from_top = static_cast<int>(full) * chunk + static_cast<int>(r % rem);
  }
  // Heads fastest within (sequence, head): the q heads of one GQA group are neighbours.
  return {nm - 1 - m_from_top, static_cast<int>(bh / a.num_q_heads), static_cast<int>(bh % a.num_q_heads)};
}

// One piece of a tail CTA's work: key tiles [kt_lo, kt_hi) of q tile `linear`, its partial
// going to workspace slot `slot`; `next` is the iteration after it (the CTA goes on while
// next < its end). CTA j takes iterations [j·c, min((j+1)·c, tail_tiles·key_tiles)); with
// c ≤ key_tiles it touches at most two tiles. Slot j + u (tile u of the tail) is unique: CTA j+1
// starts where CTA j ends, so its first tile is at least CTA j's last one.
struct TailSegment {
  long long linear;
  int kt_lo, kt_hi;
  int slot;
  long long next;
};

__host__ __device__ __forceinline__ long long tail_end(const PrefillTail& t, int j) {
  const long long end = static_cast<long long>(j + 1) * t.tail_chunk;
  const long long all = static_cast<long long>(t.tail_tiles) * t.key_tiles;
  return end < all ? end : all;
}

__host__ __device__ __forceinline__ TailSegment tail_segment(const PrefillTail& t, int j, long long it) {
  const int u = static_cast<int>(it / t.key_tiles);
  const long long tile_begin = static_cast<long long>(u) * t.key_tiles;
  const long long end = tail_end(t, j);
  TailSegment s;
  s.linear = static_cast<long long>(t.main_tiles) + u;
  s.kt_lo = static_cast<int>(it - tile_begin);
  s.kt_hi = static_cast<int>((end < tile_begin + t.key_tiles ? end : tile_begin + t.key_tiles) - tile_begin);
  s.slot = j + u;
  s.next = tile_begin + t.key_tiles;
  return s;
}

// The pieces of tail tile u, as the merge reads them: CTAs first .. first + count − 1 (those whose
// iterations [j·c, (j+1)·c) meet the tile's [u·nk, (u+1)·nk)) wrote them, piece i into slot
// first + i + u.
struct TailPieces {
  int first;
  int count;
};

__host__ __device__ __forceinline__ TailPieces tail_pieces(const PrefillTail& t, int u) {
  const long long first_it = static_cast<long long>(u) * t.key_tiles;
  const int first = static_cast<int>(first_it / t.tail_chunk);
  return {first, static_cast<int>((first_it + t.key_tiles - 1) / t.tail_chunk) - first + 1};
}

// The lse slot of query row q of head h, lse [num_q_heads, total_q] fp32, for every prefill
// writer (the agents and the tail merge; a.lse may be nullptr: not asked for). q is given as its
// parts (q_off, the tile's first row, the row in the tile), summed in 64 bits in that order.
template <class... Q>
__device__ __forceinline__ float* lse_slot(const PrefillArgs& a, int h, Q... q) {
  return a.lse + ((static_cast<long long>(h) * a.total_q) + ... + q);
}

// ---- The guard of cu_seqlens (issue 19; muh/input_errors.hpp) ---------------------------------
// The offsets [lo, hi) of sequence b of `batch` in a cu_seqlens array over `total` rows, as one
// CTA sees them: the errors they show (InputError bits; `first` is the kind of <x>_start, the
// others follow it in InputError's order). The first and last sequences also check cu[0] == 0 and
// cu[batch] == total, so every bad array is flagged by some CTA.
__host__ __device__ __forceinline__ std::uint32_t seqlens_errors(int lo, int hi, int b, int batch, int total,
                                                                 int max_len, InputError first) {
  const int k = static_cast<int>(first);
  std::uint32_t e = 0;
  if (b == 0 && lo != 0) e |= 1u << k;                            // <x>_start
  if (hi < lo) e |= 1u << (k + 1);                                // <x>_order
  if (b == batch - 1 && hi != total) e |= 1u << (k + 2);          // <x>_end
  if (static_cast<unsigned>(lo) > static_cast<unsigned>(total) ||
      static_cast<unsigned>(hi) > static_cast<unsigned>(total))
    e |= 1u << (k + 3);                                           // <x>_range (total >= 0)
  else if (hi - lo > max_len) e |= 1u << (k + 4);                 // seqlen_<x>_max
  return e;
}

// Called first by every prefill CTA (and the tail merge) for its sequence b: true when its
// offsets in cu_seqlens_q and cu_seqlens_k are good; otherwise the CTA writes nothing (its rows
// could lie outside q/k/out, or past the rows the grid covers: max_seqlen_q sizes it) and its
// thread 0 flags what it saw. Four loads the CTA makes anyway (the same addresses, read again
// right after) and ten compares. kContiguousK = false (K/V from a paged cache: no cu_seqlens_k;
// paged_sequence_ok in prefill_kv.cuh guards seqused_k and the block ids) checks cu_seqlens_q only.
#if defined(__CUDACC__)  // (device code: the CPU tests include this header for the schedule)
template <bool kContiguousK = true>
__device__ __forceinline__ bool prefill_sequence_ok(const PrefillArgs& a, int b) {
  std::uint32_t e = seqlens_errors(a.cu_seqlens_q[b], a.cu_seqlens_q[b + 1], b, a.batch, a.total_q,
                                   a.max_seqlen_q, InputError::cu_seqlens_q_start);
  if constexpr (kContiguousK)
    e |= seqlens_errors(a.cu_seqlens_k[b], a.cu_seqlens_k[b + 1], b, a.batch, a.total_k, a.max_seqlen_k,
                        InputError::cu_seqlens_k_start);
  if (e == 0) return true;
  if (threadIdx.x == 0) flag_input_errors(a.input_errors, e);
  return false;
}
#endif
static_assert(static_cast<int>(InputError::seqlen_q_max) == static_cast<int>(InputError::cu_seqlens_q_start) + 4 &&
                  static_cast<int>(InputError::seqlen_k_max) == static_cast<int>(InputError::cu_seqlens_k_start) + 4,
              "seqlens_errors: start, order, end, range, max in InputError's order");

// Keys [0, result) that any query row of [m0, m0 + rows) may see.
__host__ __device__ __forceinline__ int visible_keys(int m0, int rows, int sq, int sk, bool causal) {
  if (!causal) return sk;
  const long long hi = static_cast<long long>(m0) + rows + sk - sq;  // row m0+rows−1 sees j < hi
  return hi <= 0 ? 0 : (hi < sk ? static_cast<int>(hi) : sk);
}

// Does the key tile [n0, n0 + bn) need a per-element mask for query rows [m0, ...)? Yes when it
// runs past the sequence's keys, or (causal) its last key lies beyond what row m0 may see.
__host__ __device__ __forceinline__ bool tile_needs_mask(int n0, int bn, int m0, int sq, int sk, bool causal) {
  return n0 + bn > sk || (causal && static_cast<long long>(n0) + bn - 1 > static_cast<long long>(m0) + sk - sq);
}

// Is key j hidden from query i (both sequence-relative)?
__host__ __device__ __forceinline__ bool key_masked(int i, int j, int sq, int sk, bool causal) {
  return j >= sk || (causal && static_cast<long long>(j) > static_cast<long long>(i) + sk - sq);
}

}  // namespace muh::kernels
