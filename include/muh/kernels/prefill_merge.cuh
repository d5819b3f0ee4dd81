// kernels/prefill_merge.cuh — the merge of a split prefill tail (prefill_common.cuh, TailSegment):
// the pieces of one tail tile, each a normalised (o, lse) partial in the workspace, combined by
// the split-KV merge of online_softmax.hpp into out (storage dtype) and lse.
//
// One warp per query row (kPrefillMergeWarps rows per CTA, grid = tail tiles × ceil(block_m / 8));
// lane l holds dims l, l + 32, … of the row (head_dim % 32 == 0 for every supported head dim).
// The pieces' lse are read first (independent loads: lane i takes piece i, i + 32, …) and
// reduced across the warp to the max m and Σ exp(lse_i − m); then every piece's o is added with
// its weight exp(lse_i − m) / Σ, the loads of successive pieces again independent. The first
// version folded the pieces one by one through LseMerger — each piece a dependent L2 round trip
// — with a warp walking 16 rows: at 4 tail tiles of 31 pieces (hd 256, 3968 tokens, chunk 2) the
// split ran 2 % slower than the unsplit call instead of ~5 % faster (bench/prefill_waves.py).
// lse = m + log Σ exp(lse_i − m), o = Σ exp(lse_i − m) o_i / Σ — online_softmax.hpp's merge of all
// pieces at once — summed in a fixed order: the same on every run.
#pragma once

#include <cuda_runtime.h>

#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/prefill_kv.cuh"

namespace muh::kernels {

inline constexpr int kPrefillMergeWarps = 8;

// The merge of tail tile blockIdx.x. pkv: the paged cache of a paged launch (null: contiguous
// K/V), whose guard (paged_sequence_ok: seqused_k and the block ids, which the pieces checked
// before they wrote anything) is evaluated again here, by every thread before any returns.
// kContext: a context launch (prefill_sm80_context_tail_kernel) — the tile's pieces are t's (the
// prefix part, over pkv) and then ct's (the chunk part, contiguous K/V of ca, whose guard is
// evaluated here too), merged as one list; the tile order is a's (the same as ca's: the plan
// fuses only then).
template <DType DT, int D, bool kPaged = false, bool kContext = false>
__device__ __forceinline__ void prefill_tail_merge(const PrefillArgs& a, const PrefillTail& t, int block_m,
                                                   const PrefillPagedKV* pkv = nullptr,
                                                   const PrefillArgs* ca = nullptr, const PrefillTail* ct = nullptr) {
  static_assert(D % 32 == 0, "one warp covers a row in whole strides of 32 dims");
  using T = storage_t<DT>;
  constexpr int kPer = D / 32;
  const int u = static_cast<int>(blockIdx.x);  // tail tile
  const int lane = threadIdx.x & 31;
  const int r = static_cast<int>(blockIdx.y) * kPrefillMergeWarps + (threadIdx.x >> 5);  // row in the tile
  const TileCoord tc = tile_of(static_cast<long long>(t.main_tiles) + u, a);
  bool seq_ok = prefill_sequence_ok<!kPaged>(a, tc.b);  // the input guard: its pieces wrote nothing then
  if constexpr (kPaged) seq_ok = paged_sequence_ok(*pkv, tc.b, a.max_seqlen_k, a.input_errors) && seq_ok;
  if constexpr (kContext) seq_ok = prefill_sequence_ok<true>(*ca, tc.b) && seq_ok;
  const int q_off = a.cu_seqlens_q[tc.b], sq = a.cu_seqlens_q[tc.b + 1] - q_off;  // inputs: before the wait
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched dependent on the tail kernel where the device allows: wait for its partials.
  cudaGridDependencySynchronize();
#endif
  const int m0 = tc.m_block * block_m;
  // After the wait, so that the merge never ends before the tail kernel (prefill_launch.cuh).
  if (!seq_ok || r >= block_m || m0 + r >= sq) return;  // the pieces wrote nothing there either
  const TailPieces tp = tail_pieces(t, u);
  const int pieces = tp.count;
  const long long row0 = static_cast<long long>(tp.first + u) * block_m + r;  // piece i: row0 + i·block_m
  // (kContext) the chunk part's pieces of the tile, in ct's workspace
  [[maybe_unused]] int pieces_c = 0;
  [[maybe_unused]] long long row0_c = 0;
  if constexpr (kContext) {
    const TailPieces tpc = tail_pieces(*ct, u);
    pieces_c = tpc.count;
    row0_c = static_cast<long long>(tpc.first + u) * block_m + r;
  }

  // Two passes over the pieces' lse (online_softmax.hpp): their max, then Σ exp(lse_i − max).
  constexpr NaturalUnits kUnits;
  OnlineSoftmax mg;
  for (int i = lane; i < pieces; i += 32) mg.fold_max(t.ws_lse[row0 + static_cast<long long>(i) * block_m]);
  if constexpr (kContext)
    for (int i = lane; i < pieces_c; i += 32) mg.fold_max(ct->ws_lse[row0_c + static_cast<long long>(i) * block_m]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mg.fold_max(__shfl_xor_sync(0xffffffffu, mg.m, o));
  if (mg.m != -INFINITY) {
    for (int i = lane; i < pieces; i += 32)
      mg.accumulate(mg.weight(t.ws_lse[row0 + static_cast<long long>(i) * block_m], kUnits));
    if constexpr (kContext)
      for (int i = lane; i < pieces_c; i += 32)
        mg.accumulate(mg.weight(ct->ws_lse[row0_c + static_cast<long long>(i) * block_m], kUnits));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mg.accumulate(__shfl_xor_sync(0xffffffffu, mg.l, o));
  const float inv = mg.inv_l();

  float acc[kPer];
#pragma unroll
  for (int e = 0; e < kPer; ++e) acc[e] = 0.f;
#pragma unroll 4
  for (int i = 0; i < pieces; ++i) {
    const long long row = row0 + static_cast<long long>(i) * block_m;
    const float lse = t.ws_lse[row];
    const float w = lse == -INFINITY ? 0.f : mg.weight(lse, kUnits) * inv;  // an empty piece adds nothing
    const float* const po = t.ws_o + row * D + lane;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[e] += w * po[e * 32];
  }
  if constexpr (kContext) {
#pragma unroll 4
    for (int i = 0; i < pieces_c; ++i) {
      const long long row = row0_c + static_cast<long long>(i) * block_m;
      const float lse = ct->ws_lse[row];
      const float w = lse == -INFINITY ? 0.f : mg.weight(lse, kUnits) * inv;
      const float* const po = ct->ws_o + row * D + lane;
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[e] += w * po[e * 32];
    }
  }
  const long long ldq = static_cast<long long>(a.num_q_heads) * D;
  T* const gO = static_cast<T*>(a.out) + (q_off + m0 + r) * ldq + static_cast<long long>(tc.h) * D;
#pragma unroll
  for (int e = 0; e < kPer; ++e) gO[lane + e * 32] = from_float<T>(acc[e]);
  if (a.lse != nullptr && lane == 0)
    *lse_slot(a, tc.h, q_off, m0, r) = mg.lse();
}

template <DType DT, int D>
__global__ void __launch_bounds__(kPrefillMergeWarps * 32)
    prefill_tail_merge_kernel(const PrefillArgs a, const PrefillTail t, int block_m) {
  prefill_tail_merge<DT, D>(a, t, block_m);
}

// The same after a paged launch's tail (prefill_sm80_paged_tail_kernel).
template <DType DT, int D>
__global__ void __launch_bounds__(kPrefillMergeWarps * 32)
    prefill_paged_tail_merge_kernel(const PrefillArgs a, const PrefillPagedKV pkv, const PrefillTail t, int block_m) {
  prefill_tail_merge<DT, D, true>(a, t, block_m, &pkv);
}

// The merge of a context launch (prefill_sm80_context_tail_kernel): each tile's prefix pieces
// (a over pkv, t) and chunk pieces (c, tc) into a.out (= c.out) and a.lse.
template <DType DT, int D>
__global__ void __launch_bounds__(kPrefillMergeWarps * 32)
    prefill_context_merge_kernel(const PrefillArgs a, const PrefillPagedKV pkv, const PrefillTail t,
                                 const PrefillArgs c, const PrefillTail tc, int block_m) {
  prefill_tail_merge<DT, D, true, true>(a, t, block_m, &pkv, &c, &tc);
}

}  // namespace muh::kernels
