// kernels/prefill_sm80_pipeline.cuh — the pipeline schedules of the tensor-core prefill agents
// (prefill_sm80.cuh): how K and V tiles reach their shared-memory ring buffers, and when a warp
// may read one. Two schedules, one interface — the main loop calls, per key tile i,
//   k_ready(i)  Q Kᵀ  k_done(i)  mask, softmax, pack P  v_ready(i)  P V  v_done(i)
// and buffer(c) for the shared-memory address of copy group c:
//   BarrierRing<Sh, Copy>  a ring ordered by CTA barriers; Copy = CpAsyncCopy (sm80) or
//                          RegisterStageCopy (sm75: global → registers → shared memory)
//   PingPongRing<Sh>       per-buffer mbarriers, and the CTA's two halves taking turns at the
//                          tensor cores (sm_90 code, warp-pair rows with policy ping_pong)
//
// Copy groups: loop step i works on key tile kt_end − 1 − i (last to first) and consumes two
// copy groups, group 2i = K(i) in Q Kᵀ and group 2i+1 = V(i) in P V; group j lives in buffer
// j % S. Every thread commits one cp.async group per copy group, empty ones too (past the last
// tile), so that the wait counts are uniform.
#pragma once

#include <cstdint>
#include <type_traits>

#include "muh/kernels/prefill_sm80_tile.cuh"
#include "muh/kernels/sm80_ptx.cuh"

namespace muh::kernels {

// The K/V tiles of one q tile as copy groups: group j is K (j even) or V (j odd) of the key tile
// starting at key first_key(j); rows past the sequence's sk keys are zero-filled.
// The pipeline types below are views: they refer to the body's variables, as lambdas capturing
// by reference would (holding copies, the kernels' SASS changed: the copies are uses, and the
// compiler then placed the computations differently).
template <class Sh>
struct KvGroups {
  using T = typename Sh::T;
  const T* const& gK;  // [sk][ldk]: this (sequence, kv head)'s keys
  const T* const& gV;
  const long long& ldk;
  const int& sk;
  const int& kt_end;   // key tiles kt_end − 1 down to kt_end − n_tiles
  const int& n_tiles;
  __device__ __forceinline__ bool has(int j) const { return (j >> 1) < n_tiles; }
  __device__ __forceinline__ int first_key(int j) const { return (kt_end - 1 - (j >> 1)) * Sh::BN; }
  __device__ __forceinline__ const T* src(int j, int n0) const { return ((j & 1) ? gV : gK) + n0 * ldk; }
};

// The same groups over a paged cache (kernels/prefill_kv.cuh): rows through the block table.
// Values, not views: nothing of the contiguous kernels' SASS depends on them. (The vLLM layout:
// sm80 agent only — the sm75 register stage has no transposing fetch.)
template <class Sh>
struct PagedKvGroups {
  using C = typename Sh::C;  // the cache's elements: q's type, or fp8 codes
  PagedKvRows<C, paged_layout(Sh::kSource)> rows;
  int sk;
  int kt_end;
  int n_tiles;
  __device__ __forceinline__ bool has(int j) const { return (j >> 1) < n_tiles; }
  __device__ __forceinline__ int first_key(int j) const { return (kt_end - 1 - (j >> 1)) * Sh::BN; }
  __device__ __forceinline__ const C* base(int j) const { return rows.base(j & 1); }
  // After V of a key tile is issued: the block-table entries of the tile of group j (the next
  // K), fetched into L1 by the first few threads, so that its copies' row addresses wait on an
  // L1 hit rather than on L2 — the entries' latency overlaps the GEMMs in between.
  __device__ __forceinline__ void prefetch_blocks(int j, int tid) const {
    if (!has(j)) return;
    const int n0 = first_key(j);
    const int last = (n0 + Sh::BN < sk ? n0 + Sh::BN : sk) - 1;
    const int first_blk = n0 / rows.page_size;
    if (tid <= last / rows.page_size - first_blk) sm80::prefetch_l1(rows.blocks + first_blk + tid);
  }
};

template <class Sh>
using KvGroupsOf = std::conditional_t<Sh::kPaged, PagedKvGroups<Sh>, KvGroups<Sh>>;

// The sm80 agent's copies: cp.async straight into the buffer.
template <class Sh>
struct CpAsyncCopy {
  using T = typename Sh::T;
  const KvGroupsOf<Sh>& kv;
  T* const& sKV;  // [S][BN][D]: the ring
  const int& tid;
  __device__ __forceinline__ CpAsyncCopy(const KvGroupsOf<Sh>& kv_, T* const& sKV_, const int& tid_,
                                         typename Sh::KvStage&)
      : kv(kv_), sKV(sKV_), tid(tid_) {}
  __device__ __forceinline__ void load_q(T* sQ, const T* gQ, long long ldq, int valid) {
    sm80_load_tile<Sh::BM, Sh::kD, Sh::NT>(sQ, gQ, ldq, valid, tid);
  }
  __device__ __forceinline__ void copy(int j) {
    if (kv.has(j)) {
      const int n0 = kv.first_key(j);
      if constexpr (Sh::kFp8) {
        // Codes into the upper half of each row of the buffer; consume() widens them (widen below).
        const std::uint32_t dst = sm80::smem_addr(sKV + (j % Sh::S) * Sh::BN * Sh::kD);
        if (Sh::kVDimMajor && (j & 1))
          sm80_load_v_codes_dim_major<Sh::BN, Sh::kD, Sh::NT>(dst, kv.rows, n0, kv.sk - n0, tid);
        else
          sm80_load_codes_paged<Sh::BN, Sh::kD, Sh::NT>(dst, kv.base(j), kv.rows, n0, kv.sk - n0, tid);
        if (j & 1) kv.prefetch_blocks(j + 1, tid);
      } else if constexpr (Sh::kPaged) {
        T* dst = sKV + (j % Sh::S) * Sh::BN * Sh::kD;
        if constexpr (Sh::kKChunkMajor) {  // vLLM pages: K chunk-major, V in 16-key runs (their own layouts)
          if (j & 1)
            sm80_load_v_runs<Sh::BN, Sh::kD, Sh::NT>(dst, kv.rows, n0, kv.sk - n0, tid);
          else
            sm80_load_k_chunk_major<Sh::BN, Sh::kD, Sh::NT>(dst, kv.base(j), kv.rows, n0, kv.sk - n0, tid);
        } else {
          sm80_load_tile_paged<Sh::BN, Sh::kD, Sh::NT>(dst, kv.base(j), kv.rows, n0, kv.sk - n0, tid);
        }
        if (j & 1) kv.prefetch_blocks(j + 1, tid);
      } else
        sm80_load_tile<Sh::BN, Sh::kD, Sh::NT>(sKV + (j % Sh::S) * Sh::BN * Sh::kD, kv.src(j, n0), kv.ldk, kv.sk - n0, tid);
    }
  }
  // An fp8 cache: group c's codes, landed, widened in place into its buffer (by every thread;
  // n_tiles is the CTA's, so the barriers inside are reached by all or none).
  __device__ __forceinline__ void widen(int c) {
    if constexpr (Sh::kFp8) {
      if (!kv.has(c)) return;
      T* buf = sKV + (c % Sh::S) * Sh::BN * Sh::kD;
      if (Sh::kVDimMajor && (c & 1))
        sm80_widen_codes<Sh::kKV, T, Sh::kD, Sh::BN, Sh::W>(buf, tid / 32, tid % 32);  // [D][BN]
      else
        sm80_widen_codes<Sh::kKV, T, Sh::BN, Sh::kD, Sh::W>(buf, tid / 32, tid % 32);  // [BN][D]
    }
  }
};

// The sm75 agent's copies (no cp.async): group j was fetched into registers by copy(j − 1)
// (group 0 with Q, before the loop: the body's prologue, prefill_sm80.cuh); copy(j) stores it
// into its buffer and fetches group j + 1, which then loads during the GEMM up to the next copy
// — FlashAttention-1's and CUTLASS's pre-sm_80 pipelines. The cp.async commit/wait calls of the
// ring find no copy in flight (an sm_75 build compiles them to nothing).
template <class Sh>
struct RegisterStageCopy {
  using T = typename Sh::T;
  const KvGroupsOf<Sh>& kv;
  T* const& sKV;
  const int& tid;
  typename Sh::KvStage& stage;  // the next group, fetched ahead (the body's registers)
  __device__ __forceinline__ RegisterStageCopy(const KvGroupsOf<Sh>& kv_, T* const& sKV_, const int& tid_,
                                               typename Sh::KvStage& st)
      : kv(kv_), sKV(sKV_), tid(tid_), stage(st) {}
  __device__ __forceinline__ void fetch(int j) {
    if (kv.has(j)) {
      const int n0 = kv.first_key(j);
      if constexpr (Sh::kPaged) {
        stage.fetch_paged(kv.base(j), kv.rows, n0, kv.sk - n0, tid);
        if (j & 1) kv.prefetch_blocks(j + 1, tid);
      } else
        stage.fetch(kv.src(j, n0), kv.ldk, kv.sk - n0, tid);
    }
  }
  __device__ __forceinline__ void copy(int j) {
    if (kv.has(j)) stage.deposit(sKV + (j % Sh::S) * Sh::BN * Sh::kD, tid);
    fetch(j + 1);
  }
};

// The ring of S buffers ordered by CTA barriers. Before consuming group c, a step waits for it
// and syncs the CTA — which also proves group c − 1 consumed by every warp — and then issues
// group c − 1 + S into the buffer c − 1 freed. So S − 1 groups are in flight during every GEMM
// (wait_group S − 2). S = 2 is FlashAttention-2's schedule (one K and one V buffer: V(i) loads
// during Q Kᵀ, K(i+1) during softmax and P V); S = 4 is a double-buffered K/V pair; odd S works
// too. S = 1 (one buffer for both) serves profiles without cp.async, where the selector forces
// one stage: synchronous for the sm80 agent; the sm75 agent's rows still overlap each load with
// a GEMM through their register stage.
// Where V(i) is waited for (Sh::kIssueBeforeSoftmax): with 2 buffers (FA2's layout) the next
// copy, into K(i)'s buffer, is K(i+1), needed at the next step: wait for V(i) right after Q Kᵀ
// so that it is issued before the softmax and overlaps it as well as P V (as FA2 does). With more
// buffers that copy is needed ≥ 1.5 steps later, so it waits until after the softmax, where
// fewer registers are live (issuing early at 128×64, 4 buffers, hd 128 spilled 20 bytes). Warp
// pairs hold more live registers through the softmax (the exchanged maxima, 2 m16 tiles of S)
// and issue after it too (issuing early spilled 40 bytes at 128×64 w8, hd 256).
template <class Sh, class Copy>
struct BarrierRing {
  Copy copy;
  __device__ __forceinline__ BarrierRing(const KvGroupsOf<Sh>& kv, typename Sh::T* const& sKV, const int& tid,
                                         const std::uint32_t&, const int&, typename Sh::KvStage& st)
      : copy(kv, sKV, tid, st) {}
  __device__ __forceinline__ void issue(int j) {  // copy group j, committed even past the last tile
    copy.copy(j);
    sm80::cp_async_commit();
  }
  __device__ __forceinline__ void consume(int c) {  // group c is ready in buffer c % S for every thread after this
    if constexpr (Sh::S >= 2) {
      sm80::cp_async_wait<Sh::S - 2>();
      __syncthreads();
      issue(c - 1 + Sh::S);
    } else {
      __syncthreads();  // every warp is done with the single buffer
      issue(c);
      sm80::cp_async_wait<0>();
      __syncthreads();
    }
    // An fp8 cache: the codes landed; widened here, the next group's copies already in flight.
    if constexpr (Sh::kFp8) copy.widen(c);
  }
  // Q (rows m0.. of the sequence's sq; the register stage's Q: the body's prologue), then the
  // first S − 1 groups (Q travels with group 0).
  __device__ __forceinline__ void start(typename Sh::T* sQ, const typename Sh::T* gQ, long long ldq, int sq, int m0) {
    if constexpr (!Sh::kRegStage) copy.load_q(sQ, gQ, ldq, sq - m0);
    if constexpr (Sh::S >= 2) {
      for (int j = 0; j + 1 < Sh::S; ++j) issue(j);
    } else {
      sm80::cp_async_commit();
    }
  }
  __device__ __forceinline__ void first_turn() {}
  __device__ __forceinline__ std::uint32_t buffer(int c) const {
    return sm80::smem_addr(copy.sKV) + (c % Sh::S) * (Sh::BN * Sh::kD * 2);
  }
  // K(i) (and, at i = 0, Q) landed; the buffer P V(i−1) used is refilled.
  __device__ __forceinline__ void k_ready(int i) { consume(2 * i); }
  __device__ __forceinline__ void k_done(int i) {
    if constexpr (Sh::kIssueBeforeSoftmax) consume(2 * i + 1);
  }
  __device__ __forceinline__ void v_ready(int i) {
    if constexpr (!Sh::kIssueBeforeSoftmax) consume(2 * i + 1);
  }
  __device__ __forceinline__ void v_done(int) {}
  __device__ __forceinline__ void drain() {  // every copy has landed (also when there was no key tile)
    sm80::cp_async_wait<0>();
    __syncthreads();
  }
};

// Ping-pong. The CTA's two halves (warp groups wg = 0: warps 0–3, 1: warps 4–7; warp w and
// w + 4 share a scheduler) take turns at the tensor cores: a half runs the MMAs of Q Kᵀ (or of
// P V) only when the other has finished its own, and does its softmax while the other runs
// them — the overlap FlashAttention-3 gets from its two consumer warp groups. Turns pass
// through named barriers 5 (half 0's turn) and 6 (half 1's): the taker syncs on its own, the
// giver arrives on the other's (128 + 128 threads). Half 1 lets half 0 go first; its last
// hand-over is skipped, so both barriers see as many arrivals as waits.
// Ring: an mbarrier per buffer that completes when its copy has landed (full, one arrival per
// thread via cp.async) and one that completes when every warp is done reading it (empty, one
// arrival per thread). Group c is waited for on full[c % S] (parity (c / S) & 1) by each half on
// its own; after reading it a thread arrives on empty[c % S] and refills the buffer of group
// c − 1 with group c − 1 + S, once empty says both halves are done with c − 1. Half 0 runs one
// MMA phase ahead of half 1, so half 1 has always finished group c − 1 by then: neither half
// waits for the other except at the turns. (At hd 256 ptxas keeps one register in local memory
// across the P V turn: 4 bytes of spills, one store and one load per key tile.)
template <class Sh>
struct PingPongRing {
  CpAsyncCopy<Sh> copy;
  const std::uint32_t& bar_full;  // [S] mbarriers, then the S empty ones
  const int& warp;
  int wg;  // this thread's half: set by first_turn(), after the prologue (computed before it, the SASS changed)
  __device__ __forceinline__ PingPongRing(const KvGroupsOf<Sh>& kv, typename Sh::T* const& sKV, const int& tid,
                                          const std::uint32_t& bars, const int& warp_, typename Sh::KvStage& st)
      : copy(kv, sKV, tid, st), bar_full(bars), warp(warp_) {}
  __device__ __forceinline__ std::uint32_t bar_empty() const { return bar_full + 8 * Sh::S; }
  __device__ __forceinline__ void issue(int j) {
    copy.copy(j);
    sm80::cp_async_commit();
    sm80::cp_async_mbarrier_arrive(bar_full + 8 * (j % Sh::S));
  }
  __device__ __forceinline__ void start(typename Sh::T* sQ, const typename Sh::T* gQ, long long ldq, int sq, int m0) {
    if (copy.tid == 0) {
      for (int b = 0; b < Sh::S; ++b) {
        sm80::mbarrier_init(bar_full + 8 * b, Sh::NT);
        sm80::mbarrier_init(bar_empty() + 8 * b, Sh::NT);
      }
    }
    __syncthreads();  // the barriers are initialised before any thread arrives on them
    copy.load_q(sQ, gQ, ldq, sq - m0);
    for (int j = 0; j + 1 < Sh::S; ++j) issue(j);  // Q travels with group 0
  }
  __device__ __forceinline__ void first_turn() {
    wg = warp / (Sh::W / 2);
    if (wg == 1 && copy.kv.n_tiles > 0) pass_turn();
  }
  __device__ __forceinline__ void wait_full(int c) {
    sm80::mbarrier_wait_parity(bar_full + 8 * (c % Sh::S), (c / Sh::S) & 1);
  }
  __device__ __forceinline__ void take_turn() { sm80::named_barrier_sync(5 + wg, Sh::NT); }
  __device__ __forceinline__ void pass_turn() { sm80::named_barrier_arrive(6 - wg, Sh::NT); }
  __device__ __forceinline__ void release(int c) {  // this thread is done reading group c
    sm80::mbarrier_arrive(bar_empty() + 8 * (c % Sh::S));
  }
  __device__ __forceinline__ void refill(int c) {  // the buffer of group c − 1 takes group c − 1 + S
    if (c >= 1) sm80::mbarrier_wait_parity(bar_empty() + 8 * ((c - 1) % Sh::S), ((c - 1) / Sh::S) & 1);
    issue(c - 1 + Sh::S);
  }
  __device__ __forceinline__ std::uint32_t buffer(int c) const {
    return sm80::smem_addr(copy.sKV) + (c % Sh::S) * (Sh::BN * Sh::kD * 2);
  }
  __device__ __forceinline__ void k_ready(int i) {  // K(i) (and, at i = 0, Q) landed
    wait_full(2 * i);
    take_turn();
  }
  __device__ __forceinline__ void k_done(int i) {
    pass_turn();
    release(2 * i);
  }
  // Refilled here, not after Q Kᵀ: the S registers are dead (issuing there spilled).
  __device__ __forceinline__ void v_ready(int i) {
    refill(2 * i);
    wait_full(2 * i + 1);
    take_turn();
  }
  __device__ __forceinline__ void v_done(int i) {
    if (wg == 0 || i + 1 < copy.kv.n_tiles) pass_turn();
    release(2 * i + 1);
    refill(2 * i + 1);
  }
  __device__ __forceinline__ void drain() {
    sm80::cp_async_wait<0>();
    __syncthreads();
  }
};

// The schedule of a shape: ping-pong where it takes it, else the barrier ring with its agent's copies.
template <class Sh>
using Sm80Pipeline =
    std::conditional_t<Sh::kPingPong, PingPongRing<Sh>,
                       BarrierRing<Sh, std::conditional_t<Sh::kRegStage, RegisterStageCopy<Sh>, CpAsyncCopy<Sh>>>>;

}  // namespace muh::kernels
