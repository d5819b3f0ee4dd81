// kernels/decode_common.cuh — what both decode agents share: the launch arguments, the CTA →
// (sequence, KV head, query-head chunk, partition) schedule, the epilogue that writes either the
// final output (V1, or a V2 of one partition) or an (o, lse) partial, and the V2 merge kernel.
//
// Shapes (attention.hpp):
//   q, out      [num_seqs, num_q_heads, head_dim]      lse [num_seqs, num_q_heads] fp32 (optional)
//   block_table [num_seqs, max_blocks] int32            seq_lens [num_seqs] int32
//   k/v cache   NHD or vLLM (muh/paged_kv.hpp)
//   V2 partials part_o [num_seqs, num_splits, num_q_heads, head_dim] fp32 (normalised o),
//               part_lse [num_seqs, num_splits, num_q_heads] fp32 (natural log)
//
// One CTA serves up to kDecodeRows (16) query heads of ONE KV head (GQA: q head h reads KV head
// h / group), so each K/V byte is read from HBM once per sequence; groups larger than 16 take
// ceil(group / 16) CTAs per KV head.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "muh/dtype.hpp"
#include "muh/kernels/input_guard.cuh"
#include "muh/kernels/numeric.cuh"
#include "muh/kernels/online_softmax.hpp"
#include "muh/kernels/warp_tile.cuh"
#include "muh/paged_kv.hpp"
#include "muh/tuning/policy.hpp"  // kDecodeRows

namespace muh::kernels::decode {

// Four floats → four 16-bit elements in one 8-byte word (round to nearest even).
template <class E>
__device__ __forceinline__ uint2 pack4(float4 o) {
  alignas(8) E e[4] = {from_float<E>(o.x), from_float<E>(o.y), from_float<E>(o.z), from_float<E>(o.w)};
  return *reinterpret_cast<const uint2*>(e);
}

// Element types and the base-2 softmax constants (kLog2e, kLn2) come from kernels/numeric.cuh
// (the constants from online_softmax.hpp, through it).
inline constexpr int kRows = kDecodeRows;  // query heads per CTA (the MMA's 16 rows)

// One decode launch, as src/decode.cu validated it and the plan shaped it.
struct DecodeArgs {
  const void* q = nullptr;          // [num_seqs, num_q_heads, D]
  const void* k_cache = nullptr;    // NHD [pages, page_size, Hkv, D] / vLLM [pages, Hkv, D/x, page_size, x]
  const void* v_cache = nullptr;    // NHD [pages, page_size, Hkv, D] / vLLM [pages, Hkv, D, page_size]
  void* out = nullptr;              // [num_seqs, num_q_heads, D]
  float* lse = nullptr;             // [num_seqs, num_q_heads] or nullptr
  const int* block_table = nullptr; // [num_seqs, max_blocks]
  const int* seq_lens = nullptr;    // [num_seqs]
  float* part_o = nullptr;          // [num_seqs, num_splits, num_q_heads, D]   (V2 only)
  float* part_lse = nullptr;        // [num_seqs, num_splits, num_q_heads]      (V2 only)
  int num_seqs = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int group = 1;                    // num_q_heads / num_kv_heads
  int head_chunks = 1;              // ceil(group / kRows): CTAs per KV head
  int page_size = 16;               // power of two
  int page_shift = 4;               // log2(page_size)
  int max_blocks = 0;
  int num_splits = 1;               // 1: V1, the CTA writes out/lse itself
  int partition_tokens = 0;         // tokens per partition (multiple of 16) when num_splits > 1
  int l2_evict_first = 1;           // sm80 agent: K/V copies with an L2 evict-first policy (DecodePlan)
  float scale_log2 = 0.f;           // softmax_scale · log2(e)
  int num_pages = 0;                // pages of the cache (the extent of the sm80 agent's TMA maps; the guard's bound)
  float v_scale = 1.f;              // an fp8 cache's v_scale (muh/kv_quant.hpp; its k_scale is in scale_log2)
};
// The attention kernels also take `int* input_errors` ([kInputErrorWords] flags, input_errors.hpp,
// or nullptr) as a parameter of its own: as a field it grew DecodeArgs past 128 bytes, and with
// that alone ptxas gave the sm90 vLLM-layout kernel 228 registers instead of 174.

// ---- The guard of the device-side inputs (issue 19; muh/input_errors.hpp) ----------------------
// A sequence is computed as one of length 0 (out = 0, lse = −inf) when its seq_len lies outside
// [0, max_blocks · page_size] — past its block-table row — or when its block-table row holds,
// within seq_len, an id outside [0, num_pages): nothing is read through either, and the kind is
// flagged. Dropping the whole sequence rather than the bad page's tokens costs one compare and
// select per page the agents load anyway (the bad page is read as page 0, then the CTA's result
// is replaced at the end, one CTA-wide vote through the barrier the epilogue has anyway), and the
// result does not depend on the plan: a V2 partition that met a bad id writes kPoisonedLse as
// its partial lse, and the merge drops the sequence when it reads one.
// The flags are the kernels' `input_errors` parameter (nullptr: not flagged).
// kGuard = false compiles the agents without it: today's kernels, for the A/B of the guard's cost
// (`muh bench decode --guard-ab`); the library runs kGuard = true only.
//
// The partial lse of a poisoned partition: a NaN with a payload no arithmetic produces (the
// device's NaN results are the canonical 0x7fffffff), so a NaN input stays a NaN output.
inline constexpr unsigned kPoisonedLseBits = 0x7fc0de19u;
__device__ __forceinline__ bool is_poisoned_lse(float lse) { return __float_as_uint(lse) == kPoisonedLseBits; }

__device__ __forceinline__ bool seq_len_in_range(const DecodeArgs& a, int len) {
  return len >= 0 && static_cast<long long>(len) <= (static_cast<long long>(a.max_blocks) << a.page_shift);
}
__device__ __forceinline__ bool block_id_in_range(const DecodeArgs& a, int page) {
  return static_cast<unsigned>(page) < static_cast<unsigned>(a.num_pages);
}
// A block id read from the table, as the agents use it: itself, or (out of range) page 0 with
// `bad` set — one compare and one select.
template <bool kGuard>
__device__ __forceinline__ int guarded_page(const DecodeArgs& a, int page, bool& bad) {
  if constexpr (kGuard) {
    const bool ok = block_id_in_range(a, page);
    bad |= !ok;
    return ok ? page : 0;
  } else {
    return page;
  }
}

// The CTA's vote at the end of its K/V loop, on the barrier the epilogue needs anyway: did any
// thread meet a bad block id (`bad_page`)? Then its thread 0 flags it and the CTA's rows are
// stored as poisoned (combine_and_store). Without the guard: the plain barrier.
template <bool kGuard>
__device__ __forceinline__ bool cta_poisoned(bool bad_page, int* input_errors) {
  if constexpr (kGuard) {
    const bool poisoned = __syncthreads_or(bad_page);
    if (poisoned && threadIdx.x == 0) flag_input_error(input_errors, InputError::block_id);
    return poisoned;
  } else {
    __syncthreads();
    return false;
  }
}

// The work of one CTA. Grid: x = kv_head · head_chunks + chunk, y = partition, z = sequence —
// the CTAs of one (sequence, partition) for all heads are neighbours and read the same pages.
struct CtaWork {
  int seq;
  int kv_head;
  int head0;     // first query head of this CTA
  int rows;      // query heads of this CTA (1..16)
  int split;
  int kv_begin;  // token range [kv_begin, kv_end) of this CTA
  int kv_end;
  bool idle;     // a partition past the end of its sequence: nothing to do, nothing to write
};

// A seq_len as the CTA uses it: itself, or (outside the range) 0, flagged by the CTA's thread 0.
__device__ __forceinline__ int guarded_seq_len(const DecodeArgs& a, int len, int* input_errors) {
  if (seq_len_in_range(a, len)) return len;
  if (threadIdx.x == 0) flag_input_error(input_errors, InputError::seq_len);
  return 0;
}
template <bool kGuard>
__device__ __forceinline__ CtaWork cta_work(const DecodeArgs& a, int* input_errors) {
  CtaWork w;
  const int chunk = blockIdx.x % a.head_chunks;
  w.kv_head = blockIdx.x / a.head_chunks;
  w.head0 = w.kv_head * a.group + chunk * kRows;
  w.rows = min(kRows, a.group - chunk * kRows);
  w.split = blockIdx.y;
  w.seq = blockIdx.z;
  const int len = kGuard ? guarded_seq_len(a, a.seq_lens[w.seq], input_errors) : a.seq_lens[w.seq];
  if (a.num_splits == 1) {
    w.kv_begin = 0;
    w.kv_end = len;
    w.idle = false;  // V1 writes even an empty sequence: out = 0, lse = −inf
  } else {
    w.kv_begin = w.split * a.partition_tokens;
    // The last partition takes any tail beyond num_splits · partition_tokens, so a seq_len
    // above the planned max_seq_len is still computed right (only slower).
    w.kv_end = w.split == a.num_splits - 1 ? len : min(len, w.kv_begin + a.partition_tokens);
    w.idle = w.kv_begin >= len;  // the merge reads only used_splits(); len 0 → out 0, lse −inf
  }
  return w;
}

// Partitions that hold tokens of a sequence of `len` tokens (what the merge reads).
__device__ __forceinline__ int used_splits(const DecodeArgs& a, int len) {
  if (len <= 0) return 0;
  return min(a.num_splits, (len + a.partition_tokens - 1) / a.partition_tokens);
}

// ---- Row stores: where a row's (o, lse) goes, and the stores. Each writer composes them in its
// own order (the decode merge and combine_and_store: o then lse per case; the portable agent:
// o by case, then the lse computed by the d == 0 thread alone).

// The final output row of query head h of sequence seq, and its lse.
template <class E>
__device__ __forceinline__ E* out_row(const DecodeArgs& a, int seq, int h, int D) {
  return static_cast<E*>(a.out) + (static_cast<std::int64_t>(seq) * a.num_q_heads + h) * D;
}
__device__ __forceinline__ float* lse_slot(const DecodeArgs& a, int seq, int h) {
  return a.lse + static_cast<std::int64_t>(seq) * a.num_q_heads + h;
}
// The V2 partial of query head h from this CTA's partition: row of part_o, slot of part_lse.
__device__ __forceinline__ std::int64_t part_row(const DecodeArgs& a, const CtaWork& w, int h) {
  return (static_cast<std::int64_t>(w.seq) * a.num_splits + w.split) * a.num_q_heads + h;
}

// N = 1 or 4 consecutive floats → dst as one store (fp32, or converted to E, round to nearest).
template <class E, int N>
__device__ __forceinline__ void store_elems(E* dst, const float (&o)[N]) {
  static_assert(N == 1 || N == 4, "one element or four");
  if constexpr (N == 1) {
    *dst = from_float<E>(o[0]);
  } else if constexpr (sizeof(E) == 4) {
    *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
  } else {
    *reinterpret_cast<uint2*>(dst) = pack4<E>(make_float4(o[0], o[1], o[2], o[3]));
  }
}

// Elements d..d+N−1 of the final row of (seq, h), and its lse (by the thread with d == 0).
template <class E, int N>
__device__ __forceinline__ void store_out(const DecodeArgs& a, int seq, int h, int d, int D, const float (&o)[N],
                                          float lse) {
  store_elems<E, N>(out_row<E>(a, seq, h, D) + d, o);
  if (d == 0 && a.lse != nullptr) *lse_slot(a, seq, h) = lse;
}
// The same for this CTA's V2 partial of head h (fp32, normalised o).
template <int N>
__device__ __forceinline__ void store_partial(const DecodeArgs& a, const CtaWork& w, int h, int d, int D,
                                              const float (&o)[N], float lse) {
  const std::int64_t r = part_row(a, w, h);
  store_elems<float, N>(a.part_o + r * D + d, o);
  if (d == 0) a.part_lse[r] = lse;
}

// V2 merge: one CTA of kMergeThreads per (query head, sequence), over the sequence's used
// partitions, with online_softmax.hpp's OnlineSoftmax:
//   0. thread groups of D/4 threads (four elements each) take every G-th partition and issue
//      the loads of their first kMergeAhead partials (o_i and lse_i) before anything waits;
//   1. merged lse: each thread folds a strided subset of the partials' lse, then the threads'
//      states are folded pairwise (shuffles, then the warps through shared memory) — while the
//      loads of step 0 are in flight;
//   2. o = Σ_i exp(lse_i − lse) · o_i over the group's partitions: the prefetched ones, then the
//      rest (more than G · kMergeAhead partitions) four loads at a time;
//   3. the G group sums are added in a fixed order (deterministic).
// Why: the merge is a chain of L2 round trips after the attention kernel, and at batch 1 that
// chain was 6–25 % of the call. Measured on the H200 (muh bench decode, cold L2, the merge not
// launched at all against the merge of 128 threads, 2 groups at head_dim 256, four loads in
// flight per thread, lse first): hd128 batch 1 × 32k 45.7 against 48.8 µs (16 partitions),
// hd256 46.8 against 52.4 (32 partitions: 16 per group, four round trips) — i.e. the merge cost
// 3.1 and 5.6 µs. With 256 threads and the loads ahead: hd256 50.6–51.3 µs at 32k and 22.0–22.4
// against 24.0 at 8k; hd128 unchanged (its ~3 µs are the kernel boundary and two dependent
// round trips, seq_lens then the partials — hence the seq_lens read before the wait). A serial
// chain of dependent loads per partition cost ~0.4 µs each.
inline constexpr int kMergeThreads = 256;
inline constexpr int kMergeAhead = 8;  // partials per thread in flight before the lse is known

__device__ __forceinline__ float lse_fold(float a, float b) {  // log(e^a + e^b), −inf the identity
  OnlineSoftmax m;
  float w;
  m.add(a, w);
  m.add(b, w);
  return m.lse();
}

template <class E, int D, bool kGuard = true>
__global__ void __launch_bounds__(kMergeThreads) decode_merge_kernel(const DecodeArgs a) {
  constexpr int Q = D / 4;                  // threads per group (four elements each)
  constexpr int G = kMergeThreads / Q;      // groups: 16 (D 64), 10 (96), 8 (128), 4 (256)
  __shared__ float warp_lse[kMergeThreads / tile32::kLanes];  // one per 32-lane tile
  __shared__ float4 group_sum[G][Q];
  const int h = blockIdx.x, seq = blockIdx.y, tid = threadIdx.x;
  // seq_lens is an input, not written by the attention kernel: read before the wait below, so
  // that its round trip overlaps the attention kernel's end instead of preceding the partials'.
  int len = a.seq_lens[seq];
  if constexpr (kGuard) len = seq_len_in_range(a, len) ? len : 0;  // as cta_work: length 0 (flagged there)
  const int n = used_splits(a, len);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched with programmatic stream serialization where the device allows it: wait until the
  // attention kernel has finished and its partials are visible.
  cudaGridDependencySynchronize();
#endif
  const std::int64_t row0 = static_cast<std::int64_t>(seq) * a.num_splits * a.num_q_heads + h;  // partition 0
  const std::int64_t step = a.num_q_heads;                                                      // next partition

  // 0. This thread's first kMergeAhead partials: partitions g, g + G, …
  const int g = tid / Q, q = tid % Q;
  const bool grouped = g < G;  // D = 96: 240 of the 256 threads form groups
  float4 po[kMergeAhead];
  float pl[kMergeAhead];
#pragma unroll
  for (int k = 0; k < kMergeAhead; ++k) {
    const int i = g + k * G;
    po[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    pl[k] = -INFINITY;
    if (grouped && i < n) {
      const std::int64_t r = row0 + i * step;
      po[k] = *reinterpret_cast<const float4*>(a.part_o + r * D + q * 4);
      pl[k] = a.part_lse[r];
    }
  }

  // 1. Merged lse (guard: and whether a partition met a bad block id).
  OnlineSoftmax mg;
  bool poisoned = false;
  for (int i = tid; i < n; i += kMergeThreads) {
    float w;
    const float lse_i = a.part_lse[row0 + i * step];
    if constexpr (kGuard) poisoned |= is_poisoned_lse(lse_i);
    mg.add(lse_i, w);
  }
  float lse = mg.lse();
  lse = tile32::reduce(lse, [](float x, float y) { return lse_fold(x, y); });
  if (tile32::lane(tid) == 0) warp_lse[tile32::index(tid)] = lse;
  if constexpr (kGuard) {
    if (__syncthreads_or(poisoned)) {  // the sequence is dropped: out = 0, lse = −inf
      if (tid < Q) store_out<E, 4>(a, seq, h, tid * 4, D, {0.f, 0.f, 0.f, 0.f}, -INFINITY);
      return;
    }
  } else {
    __syncthreads();
  }
  lse = warp_lse[0];
#pragma unroll
  for (int i = 1; i < kMergeThreads / tile32::kLanes; ++i) lse = lse_fold(lse, warp_lse[i]);

  // 2. Weighted sum of the partial o in partition order: the prefetched partials, then the rest.
  if (grouped) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    auto add = [&](float lse_i, const float4& o) {
      const float w = NaturalUnits{}.weight(lse_i, lse);  // exp(lse_i − lse)
      acc.x += w * o.x;
      acc.y += w * o.y;
      acc.z += w * o.z;
      acc.w += w * o.w;
    };
#pragma unroll
    for (int k = 0; k < kMergeAhead; ++k)
      if (g + k * G < n) add(pl[k], po[k]);  // n ≥ 1 here, so lse is finite
#pragma unroll 4
    for (int i = g + kMergeAhead * G; i < n; i += G) {
      const std::int64_t r = row0 + i * step;
      add(a.part_lse[r], *reinterpret_cast<const float4*>(a.part_o + r * D + q * 4));
    }
    group_sum[g][q] = acc;
  }
  __syncthreads();

  // 3. Sum the groups in order and store (n = 0, an empty sequence: o = 0, lse = −inf).
  if (tid < Q) {
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < G; ++k) {
      o.x += group_sum[k][tid].x;
      o.y += group_sum[k][tid].y;
      o.z += group_sum[k][tid].z;
      o.w += group_sum[k][tid].w;
    }
    store_out<E, 4>(a, seq, h, tid * 4, D, {o.x, o.y, o.z, o.w}, lse);
  }
}

// Final combine of per-thread-group partial states into the CTA's rows. Each of `parts` partial
// states (running max m in log2 units, sum l, unnormalised o) of every row lives in shared
// memory: m[p·16 + r], l[p·16 + r], o[(p·16 + r)·D + d]. Threads take four elements at a time.
// poisoned (the guard: the CTA met a bad block id): the rows are stored as a sequence of length
// 0 would be (V1: out = 0, lse = −inf), or as a poisoned partial (V2: o = 0, kPoisonedLse).
// The poison is applied to the stored values only, never to the part count: the sm80 agent's
// `parts` is its compile-time warp count, and a count made run-time by `poisoned ? 0 : W` kept
// the loops below from unrolling — 328 more SASS instructions in the hd-256 kernel, which made
// the guard cost up to +2.6 % on split cells, where this epilogue weighs most (bench/results/
// h200-2026-12-02-fb9d671/README.md, section 2).
// kVScale: the output is scaled by a.v_scale (an fp8 cache's V dequantisation, applied once here).
template <class E, int D, bool kVScale = false>
__device__ __forceinline__ void combine_and_store(const DecodeArgs& a, const CtaWork& w, int parts,
                                                  const float* m, const float* l, const float* o,
                                                  int tid, int nthreads, bool poisoned = false) {
  constexpr Log2Units<> kUnits;
  for (int idx = tid * 4; idx < w.rows * D; idx += nthreads * 4) {
    const int r = idx / D, d = idx % D;
    OnlineSoftmax mg;  // two passes: the parts' max, then their weights
    for (int p = 0; p < parts; ++p) mg.fold_max(m[p * kRows + r]);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (mg.m != -INFINITY) {
      for (int p = 0; p < parts; ++p) {
        const float f = mg.weight(m[p * kRows + r], kUnits);  // an empty part (m = −inf) weighs 0
        mg.accumulate(f * l[p * kRows + r]);
        const float4 op = *reinterpret_cast<const float4*>(o + (p * kRows + r) * D + d);
        acc.x += f * op.x;
        acc.y += f * op.y;
        acc.z += f * op.z;
        acc.w += f * op.w;
      }
    }
    const float inv = kVScale ? mg.inv_l() * a.v_scale : mg.inv_l();
    float lse = mg.lse(kUnits);
    float out[4] = {acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv};
    if (poisoned) {  // selects, not a multiply: what was read as page 0 may hold NaN or Inf
      out[0] = out[1] = out[2] = out[3] = 0.f;
      lse = a.num_splits == 1 ? -INFINITY : __uint_as_float(kPoisonedLseBits);
    }
    if (a.num_splits == 1)
      store_out<E, 4>(a, w.seq, w.head0 + r, d, D, out, lse);
    else
      store_partial<4>(a, w, w.head0 + r, d, D, out, lse);
  }
}

}  // namespace muh::kernels::decode
