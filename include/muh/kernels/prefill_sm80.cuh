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
// Tiles, warps and stages come from the policy (Getter); nothing in the body depends on a
// particular head dim or dtype beyond the template parameters.
#pragma once

#include <cmath>
#include <cstdint>

#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/sm80_ptx.cuh"
#include "muh/tuning/policy.hpp"

namespace muh::kernels {

// Element offset of 16-byte chunk c of row r in a [rows][D] tile of 16-bit elements.
// D multiple of 64 (rows of 128·k bytes): chunk ^ (r & 7) — the 8 rows of an ldmatrix start in
// the same bank group, the XOR spreads them over all 8 groups of a 128-byte line.
// D = 96 (192-byte rows, 12 chunks): rows alternate between bank-group offsets 0 and 4, so the
// XOR takes (r >> 1) & 3 within groups of 4 chunks (64 bytes): 8 consecutive rows again land in
// 8 different groups, and the XOR never leaves the row.
template <int D>
struct Sm80Swizzle {
  static constexpr int kChunks = D / 8;
  static_assert(kChunks % 4 == 0, "head_dim must be a multiple of 32");
  static constexpr int kGroup = kChunks % 8 == 0 ? 8 : 4;  // chunks the XOR stays within
  __device__ __forceinline__ static int mask(int r) { return kGroup == 8 ? (r & 7) : ((r >> 1) & 3); }
  __device__ __forceinline__ static int chunk(int r, int c) { return c ^ mask(r); }
  __device__ __forceinline__ static int offset(int r, int c) { return r * D + chunk(r, c) * 8; }
};

// Byte offsets of one lane's ldmatrix row address at every k16 step kk, for a pattern where the
// lane reads row (base + lane_row) — base a multiple of 8, so the swizzle mask depends on the lane
// only — and chunk 2·kk + cbit. Because the XOR touches only the low bits of the chunk index,
//   (2kk + cbit) ^ m = (2kk & ~(G−1)) + ((2·(kk mod G/2) + cbit) ^ m),
// so G/2 registers per pattern hold every offset and the rest is an immediate.
template <int D>
struct Sm80LdmOffsets {
  using Swz = Sm80Swizzle<D>;
  static constexpr int kN = Swz::kGroup / 2;
  std::uint32_t off[kN];
  __device__ __forceinline__ Sm80LdmOffsets(int lane_row, int cbit) {
#pragma unroll
    for (int j = 0; j < kN; ++j)
      off[j] = static_cast<std::uint32_t>((lane_row * D + ((2 * j + cbit) ^ Swz::mask(lane_row)) * 8) * 2);
  }
  // Byte offset of (base_row + lane_row, chunk 2kk + cbit); base_row a multiple of 8.
  __device__ __forceinline__ std::uint32_t at(int base_row, int kk) const {
    return static_cast<std::uint32_t>((base_row * D + ((2 * kk) & ~(Swz::kGroup - 1)) * 8) * 2) + off[kk % kN];
  }
};

// Copies a ROWS × D tile (row r at src + r·ld elements) into swizzled shared memory with cp.async;
// rows >= valid are zero-filled (and not read).
template <int ROWS, int D, int NT, class T>
__device__ __forceinline__ void sm80_load_tile(T* dst, const T* src, long long ld, int valid, int tid) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = ROWS * kChunks;
  // Whole tiles (every row valid: all key tiles but the first one visited, and full Q tiles)
  // take a path without row predicates, FlashAttention-2's copy layout: 8 threads per row, each
  // with chunks c, c + 8, … of it (128 bytes apart in global memory, and in shared memory too:
  // the XOR swizzle touches only the low 3 bits of the chunk index), and rows kRowsPerPass apart
  // (a multiple of 8, so the swizzle mask repeats). One 64-bit pointer per kRowsPerPass rows and
  // immediate offsets for everything else: at 128×64 hd 128 (4 warps) a K or V tile is 8 copies
  // on 4 pointers. The predicated path below (all tiles took it before) computes a 64-bit
  // address, a select and a predicate per copy, ~13 instructions: ncu counted 18 % fewer
  // instructions per launch without them (hd 128, 128×64 w4 ×4), and the agent ran 6–13 %
  // faster on the H200 at seq ≥ 4k (hd128 327/277/334/324 → 352/314/356/347 TFLOP/s at 4k /
  // 4k causal / 16k / 16k causal, hd256 128×64 w8 295/276/304/307 → 319/302/334/325; FA2 in
  // the same process 337/311/341/326 and 310/285/311/295). The first version kept one chunk
  // column per thread (a pointer per row): the same speed within noise.
  constexpr int kRowsPerPass = NT / 8;
  if constexpr (kChunks % 8 == 0 && kRowsPerPass % 8 == 0 && ROWS % kRowsPerPass == 0) {
    if (valid >= ROWS) {
      const int c = tid % 8, r0 = tid / 8;
      const char* g = reinterpret_cast<const char*>(src + r0 * ld + c * 8);
      const long long gstep = kRowsPerPass * ld * static_cast<long long>(sizeof(T));  // bytes between passes
      const std::uint32_t d = sm80::smem_addr(dst + Sm80Swizzle<D>::offset(r0, c));
#pragma unroll
      for (int p = 0; p < ROWS / kRowsPerPass; ++p) {
#pragma unroll
        for (int j = 0; j < kChunks / 8; ++j)
          sm80::cp_async_16(d + static_cast<std::uint32_t>((p * kRowsPerPass * D + j * 64) * sizeof(T)), g + j * 128);
        g += gstep;
      }
      return;
    }
  }
  if constexpr (NT % kChunks == 0) {
    // Each thread keeps one chunk column and steps down the rows: one pointer, one stride.
    constexpr int kRowStep = NT / kChunks;
    const int c = tid % kChunks, r0 = tid / kChunks;
    // A runtime-bounded loop on purpose: fully unrolled, ptxas hoists every copy address of the
    // tile into registers and the 128×64 hd-128 kernel spills 108 bytes (measured with -Xptxas -v).
    for (int r = r0; r < ROWS; r += kRowStep) {
      const bool ok = r < valid;
      sm80::cp_async_16(sm80::smem_addr(dst + Sm80Swizzle<D>::offset(r, c)), ok ? src + r * ld + c * 8 : src, ok);
    }
  } else {
#pragma unroll
    for (int i = 0; i < (kTotal + NT - 1) / NT; ++i) {
      const int idx = tid + i * NT;
      if (kTotal % NT == 0 || idx < kTotal) {
        const int r = idx / kChunks, c = idx % kChunks;
        const bool ok = r < valid;
        sm80::cp_async_16(sm80::smem_addr(dst + Sm80Swizzle<D>::offset(r, c)), ok ? src + r * ld + c * 8 : src, ok);
      }
    }
  }
}

// The sm75 agent's copies (no cp.async before sm_80): a ROWS × D tile goes global → registers
// (fetch: all of a thread's 16-byte loads issued back to back; rows >= valid become zeros and are
// not read) → swizzled shared memory in sm80_load_tile's layout (deposit). Fully unrolled, so the
// tile is kPer uint4 registers per thread (64 keys × hd 128 over 128 threads: 8, i.e. 32 registers).
template <int ROWS, int D, int NT, class T>
struct Sm75TileStage {
  static constexpr int kChunks = D / 8, kTotal = ROWS * kChunks, kPer = (kTotal + NT - 1) / NT;
  uint4 v[kPer];
  __device__ __forceinline__ void fetch(const T* src, long long ld, int valid, int tid) {
    if constexpr (NT % kChunks == 0) {
      // One chunk column per thread, one pointer stepped down the rows: with a row address per
      // load, ptxas keeps kPer 64-bit offsets live across the loop (hd 128, 64×64: 20 bytes of
      // spills on sm_90; with the stepped pointer none — -Xptxas -v).
      constexpr int kRowStep = NT / kChunks;
      const int r0 = tid / kChunks;
      const T* p = src + r0 * ld + (tid % kChunks) * 8;
#pragma unroll
      for (int i = 0; i < kPer; ++i, p += kRowStep * ld) {
        v[i] = make_uint4(0, 0, 0, 0);
        if (r0 + i * kRowStep < valid) v[i] = *reinterpret_cast<const uint4*>(p);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int idx = tid + i * NT, r = idx / kChunks, c = idx % kChunks;
        v[i] = make_uint4(0, 0, 0, 0);
        if ((kTotal % NT == 0 || idx < kTotal) && r < valid) v[i] = *reinterpret_cast<const uint4*>(src + r * ld + c * 8);
      }
    }
  }
  __device__ __forceinline__ void deposit(T* dst, int tid) const {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int idx = tid + i * NT;
      if (kTotal % NT == 0 || idx < kTotal)
        *reinterpret_cast<uint4*>(dst + Sm80Swizzle<D>::offset(idx / kChunks, idx % kChunks)) = v[i];
    }
  }
};

// One q tile (`linear`, tile_of order): kPiece = false, the whole tile, writing out and lse;
// kPiece = true, its key tiles [kt_lo, kt_hi) (clipped to the keys it sees) as a piece of a split
// tail tile, writing a normalised (o, lse) partial to its workspace slot: piece_o [block_m][D] and
// piece_lse [block_m] fp32 (prefill_common.cuh, PrefillTail). The whole-tile body never sees the
// piece's arguments, so the whole-tile kernel compiles as it did before the split existed.
template <class Getter, DType DT, int D, bool kPiece = false>
__device__ __forceinline__ void prefill_sm80_body(const PrefillArgs& a, long long linear, int kt_lo = 0,
                                                  int kt_hi = 0, float* piece_o = nullptr,
                                                  float* piece_lse = nullptr) {
  using T = storage_t<DT>;
  using Swz = Sm80Swizzle<D>;
  constexpr PrefillPolicy P = Getter{}();
  constexpr int BM = P.block_m, BN = P.block_n, W = P.num_warps, S = P.num_stages;  // S: ring buffers
  constexpr int NT = 32 * W;
  static_assert(DT == DType::fp16 || DT == DType::bf16, "the tensor-core agent takes 16-bit inputs");
  static_assert(P.agent == Agent::sm80 || (P.agent == Agent::sm75 && DT == DType::fp16),
                "tensor-core agents: sm80 (fp16, bf16) and sm75 (fp16: Turing has no bf16 mma)");
  constexpr bool kRegStage = P.agent == Agent::sm75;  // no cp.async: K/V via registers (Sm75TileStage)
  static_assert(BM % (16 * W) == 0, "each warp owns whole m16 tiles: block_m % (16·num_warps) == 0");
  static_assert(BN % 16 == 0 && D % 16 == 0, "block_n and head_dim must be multiples of 16");
  // Warp pairs (policy.hpp, prefill_sm80_warp_pairs): warps 2p and 2p+1 share 32 query rows;
  // in Q Kᵀ each takes half of the key tile, in P V half of the head dim, and they swap row
  // maxima and their halves of P through shared memory (two pair barriers per key tile).
  constexpr bool kPairs = prefill_sm80_warp_pairs(P, D);
  constexpr int WN = kPairs ? 2 : 1;  // warps sharing a row block
  constexpr int RW = BM * WN / W;     // query rows per warp (of its pair)
  constexpr int MT = RW / 16;         // m16 tiles per warp
  constexpr int BNW = BN / WN;        // keys of one warp in Q Kᵀ
  constexpr int NTL = BNW / 8;        // n8 tiles of S per m16 tile
  constexpr int KD = D / 16;          // k16 steps of Q Kᵀ
  constexpr int DW = D / WN;          // head dims of one warp in P V
  constexpr int DTL = DW / 8;         // n8 tiles of O
  constexpr int KH = BNW / 16;        // k16 steps of P V over one warp's own keys
  static_assert(!kPairs || (MT == 2 && BNW % 16 == 0 && (DW / 8) % Swz::kGroup == 0),
                "pairs: 2 m16 tiles per warp, whole k16 steps per half, halves aligned to the swizzle");
  // Q fragments stay in registers when they cost ≤ 32 registers per thread (hd ≤ 128 with one
  // m16 tile per warp); beyond that the O and S accumulators need the registers and Q is re-read
  // from shared memory by ldmatrix at every k16 step (FA2 does the same at hd 256).
  constexpr bool kQInRegs = MT * KD * 4 <= 32;
  // Q tile + a ring of num_stages K-or-V tiles (+ the pairs' exchange): exactly the footprint
  // the tables are checked with.
  constexpr int kXWarpBytes = 32 * BN + 128;  // per warp: its half of P, then its row maxima
  static_assert((BM + S * BN) * D * 2 + (kPairs ? W * kXWarpBytes : 0) + (P.ping_pong ? 16 * S : 0) ==
                    prefill_smem_bytes(P, DT, D),
                "footprint != policy.hpp");
  // Ping-pong (policy.hpp, PrefillPolicy::ping_pong): whole tiles on sm_90 code. Elsewhere (the
  // split's pieces, older archs, where a t90 row never runs) the row takes the CTA-barrier ring.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kPingPong = P.ping_pong && !kPiece && !kRegStage;
#else
  constexpr bool kPingPong = false;
#endif

  extern __shared__ __align__(128) unsigned char prefill_sm80_smem[];
  T* sQ = reinterpret_cast<T*>(prefill_sm80_smem);  // [BM][D]; reused for O in the epilogue
  T* sKV = sQ + BM * D;                             // [S][BN][D]: the ring of K and V tiles
  unsigned char* sX = reinterpret_cast<unsigned char*>(sKV + S * BN * D);  // [W][kXWarpBytes] (pairs)
  // Ping-pong: an mbarrier per ring buffer that completes when its copy has landed (full, one
  // arrival per thread via cp.async) and one that completes when every warp is done reading it
  // (empty, one arrival per thread).
  const std::uint32_t bar_full = sm80::smem_addr(sX + (kPairs ? W * kXWarpBytes : 0));
  const std::uint32_t bar_empty = bar_full + 8 * S;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;  // mma fragment row group and column pair
  const int wm = warp / WN, wn = warp % WN;  // row block of this warp, its half (pairs) or 0
  const TileCoord tc = tile_of(linear, a);
  const int q_off = a.cu_seqlens_q[tc.b], sq = a.cu_seqlens_q[tc.b + 1] - q_off;
  const int m0 = tc.m_block * BM;
  if (m0 >= sq) return;  // a short sequence of a varlen batch: nothing here
  const int k_off = a.cu_seqlens_k[tc.b], sk = a.cu_seqlens_k[tc.b + 1] - k_off;
  const int kvh = tc.h / a.group;
  const long long ldq = static_cast<long long>(a.num_q_heads) * D;
  const long long ldk = static_cast<long long>(a.num_kv_heads) * D;
  const T* gQ = static_cast<const T*>(a.q) + (q_off + m0) * ldq + static_cast<long long>(tc.h) * D;
  const T* gK = static_cast<const T*>(a.k) + k_off * ldk + static_cast<long long>(kvh) * D;
  const T* gV = static_cast<const T*>(a.v) + k_off * ldk + static_cast<long long>(kvh) * D;

  // Key tiles kt_end − 1 down to kt_end − n_tiles (kt_lo for a piece, 0 for a whole tile).
  const int kt_vis = (visible_keys(m0, BM, sq, sk, a.causal) + BN - 1) / BN;
  const int kt_end = kPiece ? (kt_hi < kt_vis ? kt_hi : kt_vis) : kt_vis;
  const int n_tiles = kPiece ? (kt_end > kt_lo ? kt_end - kt_lo : 0) : kt_vis;

  // Pipeline: a ring of S tile buffers fed by cp.async. Loop step i works on key tile
  // kt_end − 1 − i (last to first) and consumes two copy groups: group 2i = K(i) in Q Kᵀ and
  // group 2i+1 = V(i) in P V; group j lives in buffer j % S. Before consuming group c, a step
  // waits for it and syncs the CTA — which also proves group c − 1 consumed by every warp — and
  // then issues group c − 1 + S into the buffer c − 1 freed. So S − 1 groups are in flight
  // during every GEMM (wait_group S − 2). S = 2 is FlashAttention-2's schedule (one K and one V
  // buffer: V(i) loads during Q Kᵀ, K(i+1) during softmax and P V); S = 4 is a double-buffered
  // K/V pair; odd S works too. S = 1 (one buffer for both) serves profiles without cp.async,
  // where the selector forces one stage: synchronous for the sm80 agent; the sm75 agent's rows
  // (below) still overlap each load with a GEMM through their register stage.
  // sm75 (kRegStage): group j was fetched into registers by issue(j − 1) (group 0 before the
  // loop); issue(j) stores it into its buffer and fetches group j + 1, which then loads during
  // the GEMM up to the next issue. The cp.async commit/wait calls find no copy in flight there
  // (an sm_75 build compiles them to nothing).
  Sm75TileStage<BN, D, NT, T> kv_stage;  // unused by the sm80 agent
  auto fetch = [&](int j) {
    const int i = j >> 1;
    if (i < n_tiles) {
      const int n0 = (kt_end - 1 - i) * BN;
      kv_stage.fetch(((j & 1) ? gV : gK) + n0 * ldk, ldk, sk - n0, tid);
    }
  };
  auto issue = [&](int j) {  // copy group j (commits even when past the last tile: uniform counts)
    const int i = j >> 1;
    if constexpr (kRegStage) {
      if (i < n_tiles) kv_stage.deposit(sKV + (j % S) * BN * D, tid);
      fetch(j + 1);
    } else if (i < n_tiles) {
      const int n0 = (kt_end - 1 - i) * BN;
      sm80_load_tile<BN, D, NT>(sKV + (j % S) * BN * D, ((j & 1) ? gV : gK) + n0 * ldk, ldk, sk - n0, tid);
    }
    sm80::cp_async_commit();
    if constexpr (kPingPong) sm80::cp_async_mbarrier_arrive(bar_full + 8 * (j % S));
  };
  auto consume = [&](int c) {  // group c is ready in buffer c % S for every thread after this
    if constexpr (S >= 2) {
      sm80::cp_async_wait<S - 2>();
      __syncthreads();
      issue(c - 1 + S);
    } else {
      __syncthreads();  // every warp is done with the single buffer
      issue(c);
      sm80::cp_async_wait<0>();
      __syncthreads();
    }
  };
  if constexpr (kPingPong) {
    if (tid == 0) {
      for (int b = 0; b < S; ++b) {
        sm80::mbarrier_init(bar_full + 8 * b, NT);
        sm80::mbarrier_init(bar_empty + 8 * b, NT);
      }
    }
    __syncthreads();  // the barriers are initialised before any thread arrives on them
  }
  if constexpr (kRegStage) {
    Sm75TileStage<BM, D, NT, T> q_stage;  // Q's loads and group 0's in flight together
    q_stage.fetch(gQ, ldq, sq - m0, tid);
    fetch(0);
    q_stage.deposit(sQ, tid);
  } else {
    sm80_load_tile<BM, D, NT>(sQ, gQ, ldq, sq - m0, tid);
  }
  if constexpr (S >= 2) {
    for (int j = 0; j + 1 < S; ++j) issue(j);  // Q travels with group 0
  } else {
    sm80::cp_async_commit();
  }

  // Ping-pong. The CTA's two halves (warp groups wg = 0: warps 0–3, 1: warps 4–7; warp w and
  // w + 4 share a scheduler) take turns at the tensor cores: a half runs the MMAs of Q Kᵀ (or of
  // P V) only when the other has finished its own, and does its softmax while the other runs
  // them — the overlap FlashAttention-3 gets from its two consumer warp groups. Turns pass
  // through named barriers 5 (half 0's turn) and 6 (half 1's): the taker syncs on its own, the
  // giver arrives on the other's (128 + 128 threads). Half 1 lets half 0 go first; its last
  // hand-over is skipped, so both barriers see as many arrivals as waits.
  // Ring: group c is waited for on full[c % S] (parity (c / S) & 1) by each half on its own;
  // after reading it a thread arrives on empty[c % S] and refills the buffer of group c − 1 with
  // group c − 1 + S, once empty says both halves are done with c − 1. Half 0 runs one MMA phase
  // ahead of half 1, so half 1 has always finished group c − 1 by then: neither half waits for the
  // other except at the turns. (At hd 256 ptxas keeps one register in local memory across the
  // P V turn: 4 bytes of spills, one store and one load per key tile.)
  const int wg = warp / (W / 2);
  auto wait_full = [&](int c) {
    if constexpr (kPingPong) sm80::mbarrier_wait_parity(bar_full + 8 * (c % S), (c / S) & 1);
  };
  auto take_turn = [&] {
    if constexpr (kPingPong) sm80::named_barrier_sync(5 + wg, NT);
  };
  auto pass_turn = [&] {
    if constexpr (kPingPong) sm80::named_barrier_arrive(6 - wg, NT);
  };
  auto release = [&](int c) {  // this thread is done reading group c
    if constexpr (kPingPong) sm80::mbarrier_arrive(bar_empty + 8 * (c % S));
  };
  auto refill = [&](int c) {  // the buffer of group c − 1 takes group c − 1 + S
    if constexpr (kPingPong) {
      if (c >= 1) sm80::mbarrier_wait_parity(bar_empty + 8 * ((c - 1) % S), ((c - 1) / S) & 1);
      issue(c - 1 + S);
    }
  };
  if constexpr (kPingPong)
    if (wg == 1 && n_tiles > 0) pass_turn();

  const int row0 = wm * RW;  // this warp's first row in the tile
  // Pairs: the two warps of row block wm meet at barrier 1 + wm (64 threads); their exchange
  // areas: P halves as the A fragments each lane holds ([MT][KH][32 lanes] × 16 bytes, so the
  // partner's lane l reads exactly what lane l wrote), then [MT][2][8 rows] fp32 row maxima.
  auto pair_sync = [&] {
    if constexpr (kPairs) sm80::named_barrier_sync(1 + wm, 64);
  };
  unsigned char* const x_own = sX + warp * kXWarpBytes;
  const unsigned char* const x_mate = sX + (warp ^ 1) * kXWarpBytes;
  float* const xm_own = reinterpret_cast<float*>(x_own + 32 * BN);
  const float* const xm_mate = reinterpret_cast<const float*>(x_mate + 32 * BN);

  float o[MT][DTL][4];
  float row_m[MT][2], row_l[MT][2];  // running max (raw score units) and this thread's partial sum
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < DTL; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.f;
    row_m[mt][0] = row_m[mt][1] = -INFINITY;
    row_l[mt][0] = row_l[mt][1] = 0.f;
  }
  std::uint32_t qf[kQInRegs ? MT : 1][kQInRegs ? KD : 1][4];
  // ldmatrix row addresses (see Sm80LdmOffsets): lanes 8i..8i+7 address matrix i.
  //   Q (A operand): matrices rows 0–7 / 8–15 × chunks 2kk / 2kk+1 → a0..a3
  //   K (B of Q Kᵀ): keys 0–7 × chunk 2kk, 0–7 × 2kk+1, 8–15 × 2kk, 8–15 × 2kk+1 → b0,b1 of two n8 tiles
  //   V (B of P V, .trans): keys 0–7 / 8–15 × chunk 2dp, then × 2dp+1 → b0,b1 of two d tiles
  // A warp of a pair starts its K rows at key wn·BNW and its V columns at dim wn·DW (chunk
  // wn·DW/8, a multiple of the swizzle group, so the XOR pattern is the same: a plain offset).
  const std::uint32_t q_base = sm80::smem_addr(sQ);
  const Sm80LdmOffsets<D> q_off_lane(lane & 15, lane >> 4);
  const Sm80LdmOffsets<D> k_off_lane((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const Sm80LdmOffsets<D> v_off_lane((lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);
  const std::uint32_t k_half = static_cast<std::uint32_t>(wn * BNW * D * 2);
  const std::uint32_t v_half = static_cast<std::uint32_t>(wn * DW * 2);

  // The online softmax's rescale slack (see the rescale below): 8 in log2 units, i.e. a factor of
  // 256, as raw-score units (scale > 0 is validated).
  constexpr float kRescaleSlack = 8.f;
  const float rescale_slack = kRescaleSlack / a.scale_log2;

  for (int i = 0; i < n_tiles; ++i) {
    if constexpr (kPingPong) {
      wait_full(2 * i);  // K(i) (and, at i = 0, Q) landed
      take_turn();
    } else {
      consume(2 * i);  // K(i) (and, at i = 0, Q) landed; the buffer P V(i−1) used is refilled
    }
    if constexpr (kQInRegs) {
      if (i == 0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int kk = 0; kk < KD; ++kk)
            sm80::ldmatrix_x4(qf[mt][kk], q_base + q_off_lane.at(row0 + mt * 16, kk));
      }
    }

    // S = Q Kᵀ over this warp's keys of one key tile.
    const int n0 = (kt_end - 1 - i) * BN;
    const std::uint32_t k_base = sm80::smem_addr(sKV) + ((2 * i) % S) * (BN * D * 2) + k_half;
    float s[MT][NTL][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NTL; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
    // The K fragments (and Q's, when they come from shared memory) are double-buffered: the
    // ldmatrix of step (kk, np + 1) is issued before the MMAs of step (kk, np). Written as one
    // fragment per step, the 128×64 hd-128 kernel at 255 registers reused one register quad for
    // K, so each ldmatrix waited for the 4 MMAs before it to read the quad and the next 4 waited
    // ~30 cycles for it: one warp alone issued Q Kᵀ at ~45 % of the tensor pipe (ncu, hd128 4k:
    // 50 % of the warp stall samples on HMMAs, tensor pipe 55 % active; the SASS showed
    // LDSM → 4 HMMA → LDSM on R192..R195). Same registers, no spills, bitwise the same output;
    // A/B on the H200 in one process (2026-11-30, bench/results/h200-2026-11-30-c80d7a6.md): hd 128
    // +5–6 % on every cell (4k 342 → 362, 16k 345 → 366 TFLOP/s), hd 256 +0.4 % (its warp-pair
    // tile already had the loads ahead of the MMAs). The sm75 agent keeps one fragment per step:
    // ahead, its hd-64 kernel spilled 8 bytes on sm_75 (0 before; -Xptxas -v).
    {
      constexpr bool kAhead = !kRegStage;
      constexpr int NP = NTL / 2;  // n16 key pairs of one k16 step: one K ldmatrix.x4 each
      std::uint32_t qa[2][MT][4], kb[2][4];
      auto load_q = [&](std::uint32_t (&dst)[MT][4], int kk) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if constexpr (kQInRegs) {
#pragma unroll
            for (int e = 0; e < 4; ++e) dst[mt][e] = qf[mt][kk][e];
          } else {
            sm80::ldmatrix_x4(dst[mt], q_base + q_off_lane.at(row0 + mt * 16, kk));
          }
        }
      };
      if constexpr (kAhead) {
        load_q(qa[0], 0);
        sm80::ldmatrix_x4(kb[0], k_base + k_off_lane.at(0, 0));
      }
#pragma unroll
      for (int kk = 0; kk < KD; ++kk) {
#pragma unroll
        for (int np = 0; np < NP; ++np) {
          // Matrices: keys np·16+0..7 / +8..15 × d chunks 2kk / 2kk+1 → b0,b1 of n8 tiles 2np, 2np+1.
          const int cur = (kk * NP + np) & 1;
          if constexpr (!kAhead) {
            if (np == 0) load_q(qa[kk & 1], kk);
            sm80::ldmatrix_x4(kb[cur], k_base + k_off_lane.at(np * 16, kk));
          } else if (np + 1 < NP) {
            sm80::ldmatrix_x4(kb[cur ^ 1], k_base + k_off_lane.at((np + 1) * 16, kk));
          } else if (kk + 1 < KD) {
            sm80::ldmatrix_x4(kb[cur ^ 1], k_base + k_off_lane.at(0, kk + 1));
            load_q(qa[(kk + 1) & 1], kk + 1);
          }
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            sm80::mma_k16<P.agent, DT>(s[mt][2 * np], qa[kk & 1][mt], kb[cur][0], kb[cur][1]);
            sm80::mma_k16<P.agent, DT>(s[mt][2 * np + 1], qa[kk & 1][mt], kb[cur][2], kb[cur][3]);
          }
        }
      }
    }

    // With 2 buffers (FA2's layout) the next copy, into K(i)'s buffer, is K(i+1), needed at the
    // next step: wait for V(i) right after Q Kᵀ so that it is issued before the softmax and
    // overlaps it as well as P V (as FA2 does). With more buffers that copy is needed ≥ 1.5
    // steps later, so it waits until after the softmax, where fewer registers are live (issuing
    // early at 128×64, 4 buffers, hd 128 spilled 20 bytes). Warp pairs hold more live registers
    // through the softmax (the exchanged maxima, 2 m16 tiles of S) and issue after it too
    // (issuing early spilled 40 bytes at 128×64 w8, hd 256).
    constexpr bool kIssueBeforeSoftmax = S <= 2 && !kPairs;
    if constexpr (kIssueBeforeSoftmax) consume(2 * i + 1);
    if constexpr (kPingPong) {
      pass_turn();
      release(2 * i);
    }

    // Mask: only tiles crossing the sequence end or the causal diagonal.
    if (tile_needs_mask(n0, BN, m0, sq, sk, a.causal)) {
      // The row limits below are loop-invariant; hoisted out of the loop they held 2·MT
      // registers through it and spilled 8 bytes at 128×64 hd 128 (4 buffers). An opaque copy
      // of the first row keeps them here, on the ≤ 2 masked tiles of a CTA.
      int row_first = m0 + row0 + g;
      asm volatile("" : "+r"(row_first));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          // Row qi sees keys j < limit; in tile coordinates, column nt·8 + (e & 1) of this lane
          // is key n0 + wn·BNW + 2t + nt·8 + (e & 1).
          const int qi = row_first + mt * 16 + hr * 8;
          const int limit = a.causal ? min(sk, (sk - sq) + qi + 1) : sk;
          const int lim = limit - n0 - wn * BNW - 2 * t;
#pragma unroll
          for (int nt = 0; nt < NTL; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (nt * 8 + e >= lim) s[mt][nt][2 * hr + e] = -INFINITY;
        }
    }

    // Online softmax, per row (lane holds rows g and g+8 of each m16 tile; a row's 2·NTL values
    // per lane, the rest in the other 3 lanes of the quad — and, with pairs, in the mate warp).
    float mx[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float m = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NTL; ++nt) m = fmaxf(m, fmaxf(s[mt][nt][2 * hr], s[mt][nt][2 * hr + 1]));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        mx[mt][hr] = m;
        if constexpr (kPairs)
          if (t == 0) xm_own[(mt * 2 + hr) * 8 + g] = m;
      }
    if constexpr (kPairs) {
      pair_sync();  // both halves' maxima written (and, by the CTA barrier above, last tile's P read)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) mx[mt][hr] = fmaxf(mx[mt][hr], xm_mate[(mt * 2 + hr) * 8 + g]);
    }
    // O and l are rescaled only when some row max of the warp grew by more than kRescaleSlack
    // (log2 units; a warp-uniform branch). Otherwise every row keeps its running max m, also one
    // this tile exceeded by less than the slack: its weights p = 2^(s·c − m·c) then reach at
    // most 2^kRescaleSlack = 256, harmless in the fp32 sums and in 16-bit P, and the result is
    // the same softmax (any m works as the stabiliser; l and lse use the same m). Invariant: the
    // true running max stays ≤ m + slack, so no weight or factor exceeds 2^slack. A row's first
    // visible tile always rescales (m = −inf). Skipping rescales only when no max grew at all
    // still rescaled 67 % of the 64-key tiles at seq 4k (ncu: the FMULs' execution count), as
    // a warp's 32 rows see new maxima often; with the slack only the first tiles of a row do,
    // saving DTL·4 FMUL + 4·MT (FFMA + MUFU) per lane and tile (136 at hd 256). Measured on the
    // H200 (same process as FA2, 4k / 4k causal / 16k / 16k causal TFLOP/s): hd128 355/331/366/351
    // → 359/336/366/357, hd256 128×64 w8 313/300/328/319 → 314/304/326/327 (+0–2.5 %).
    bool grew = false;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) grew |= mx[mt][hr] > row_m[mt][hr] + rescale_slack;  // −inf + x = −inf
    const bool rescale = __any_sync(0xffffffffu, grew);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float m_new = rescale ? fmaxf(row_m[mt][hr], mx[mt][hr]) : row_m[mt][hr];
        // A row with nothing visible yet keeps m = −inf; exp2 against 0 then gives p = 0.
        const float m_use = m_new == -INFINITY ? 0.f : m_new * a.scale_log2;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < NTL; ++nt)
#pragma unroll
          for (int e = 2 * hr; e < 2 * hr + 2; ++e) {
            const float p = sm80::exp2_approx(fmaf(s[mt][nt][e], a.scale_log2, -m_use));
            s[mt][nt][e] = p;
            sum += p;
          }
        if (rescale) {
          const float corr = sm80::exp2_approx(row_m[mt][hr] * a.scale_log2 - m_use);  // m_old = −inf → 0
          row_l[mt][hr] = row_l[mt][hr] * corr + sum;
#pragma unroll
          for (int dt = 0; dt < DTL; ++dt) {
            o[mt][dt][2 * hr] *= corr;
            o[mt][dt][2 * hr + 1] *= corr;
          }
        } else {
          row_l[mt][hr] += sum;
        }
        row_m[mt][hr] = m_new;
      }
    }

    // P (16-bit) from the S accumulators: the accumulator layout IS the A fragment layout.
    // Packed for the whole tile before P V (and before a late copy is issued): the S registers
    // die here, which keeps the 128×64 w4 hd-128 kernel within 255 registers (packing per k16
    // step inside the P V loop spilled 12 bytes there).
    std::uint32_t pa[KH][MT][4];
#pragma unroll
    for (int kk = 0; kk < KH; ++kk)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[kk][mt][0] = sm80::pack2<DT>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[kk][mt][1] = sm80::pack2<DT>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[kk][mt][2] = sm80::pack2<DT>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[kk][mt][3] = sm80::pack2<DT>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        if constexpr (kPairs)
          *reinterpret_cast<uint4*>(x_own + ((kk * MT + mt) * 32 + lane) * 16) =
              make_uint4(pa[kk][mt][0], pa[kk][mt][1], pa[kk][mt][2], pa[kk][mt][3]);
      }

    if constexpr (kPingPong) {
      refill(2 * i);  // here, not after Q Kᵀ: the S registers are dead (issuing there spilled)
      wait_full(2 * i + 1);
      take_turn();
    } else if constexpr (!kIssueBeforeSoftmax) {
      consume(2 * i + 1);
    }

    // O += P V over this warp's head dims: first the k16 steps of its own keys (P from
    // registers), then, with pairs, the mate's (P from the exchange). V by ldmatrix.trans.
    const std::uint32_t v_base = sm80::smem_addr(sKV) + ((2 * i + 1) % S) * (BN * D * 2) + v_half;
    auto pv_step = [&](const std::uint32_t (&pk)[MT][4], int key_row) {
#pragma unroll
      for (int dp = 0; dp < DTL / 2; ++dp) {
        // Matrices: keys key_row+0..7 / +8..15 × d chunks 2dp / 2dp+1 → b0,b1 of d tiles 2dp, 2dp+1.
        std::uint32_t vb[4];
        sm80::ldmatrix_x4<true>(vb, v_base + v_off_lane.at(key_row, dp));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          sm80::mma_k16<P.agent, DT>(o[mt][2 * dp], pk[mt], vb[0], vb[1]);
          sm80::mma_k16<P.agent, DT>(o[mt][2 * dp + 1], pk[mt], vb[2], vb[3]);
        }
      }
    };
#pragma unroll
    for (int kk = 0; kk < KH; ++kk) pv_step(pa[kk], wn * BNW + kk * 16);
    if constexpr (kPairs) {
      pair_sync();  // the mate's half of P is written
#pragma unroll
      for (int kk = 0; kk < KH; ++kk) {
        std::uint32_t pm[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const uint4 v = *reinterpret_cast<const uint4*>(x_mate + ((kk * MT + mt) * 32 + lane) * 16);
          pm[mt][0] = v.x, pm[mt][1] = v.y, pm[mt][2] = v.z, pm[mt][3] = v.w;
        }
        pv_step(pm, (wn ^ 1) * BNW + kk * 16);
      }
    }
    if constexpr (kPingPong) {
      if (wg == 0 || i + 1 < n_tiles) pass_turn();
      release(2 * i + 1);
      refill(2 * i + 1);
    }
  }
  sm80::cp_async_wait<0>();
  __syncthreads();  // every copy into sQ has landed (also when there was no key tile at all)

  // Epilogue: O / l (0 for a row that saw no key), lse = scale·m + ln l (−inf then). O goes
  // through this warp's own rows (and, with pairs, head dims) of sQ so that global stores are
  // whole 16-byte chunks. With pairs each warp's l covers its half of the keys: the halves are
  // added through the exchange (both warps used the same maxima, so the sums share one scale).
  float l_row[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float l = row_l[mt][hr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      l_row[mt][hr] = l;
      if constexpr (kPairs)
        if (t == 0) xm_own[(mt * 2 + hr) * 8 + g] = l;
    }
  if constexpr (kPairs) {
    pair_sync();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) l_row[mt][hr] += xm_mate[(mt * 2 + hr) * 8 + g];
  }
  if constexpr (kPiece) {
    // A piece of a split tail tile: o / l and lse, fp32, straight from the fragments into its
    // workspace slot (4 lanes write 32 contiguous bytes of a row), for the merge kernel.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float l = l_row[mt][hr];
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int r = row0 + mt * 16 + g + hr * 8;
        if (m0 + r >= sq) continue;
        if (t == 0 && wn == 0) piece_lse[r] = l > 0.f ? row_m[mt][hr] * a.scale + logf(l) : -INFINITY;
#pragma unroll
        for (int dt = 0; dt < DTL; ++dt)
          *reinterpret_cast<float2*>(piece_o + r * D + wn * DW + dt * 8 + 2 * t) =
              make_float2(o[mt][dt][2 * hr] * inv, o[mt][dt][2 * hr + 1] * inv);
      }
  } else {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float l = l_row[mt][hr];
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int r = row0 + mt * 16 + g + hr * 8;
        if (a.lse != nullptr && t == 0 && wn == 0 && m0 + r < sq)
          a.lse[static_cast<long long>(tc.h) * a.total_q + q_off + m0 + r] =
              l > 0.f ? row_m[mt][hr] * a.scale + logf(l) : -INFINITY;
#pragma unroll
        for (int dt = 0; dt < DTL; ++dt)
          *reinterpret_cast<std::uint32_t*>(sQ + Swz::offset(r, wn * DTL + dt) + 2 * t) =
              sm80::pack2<DT>(o[mt][dt][2 * hr] * inv, o[mt][dt][2 * hr + 1] * inv);
      }
    }
    __syncwarp();
    T* gO = static_cast<T*>(a.out) + (q_off + m0) * ldq + static_cast<long long>(tc.h) * D;
#pragma unroll
    for (int idx = lane; idx < RW * DTL; idx += 32) {
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

template <class Getter, DType DT, int D>
__global__ void __launch_bounds__(Getter{}().num_warps * 32)
    prefill_sm80_tail_kernel(const PrefillArgs a, const PrefillTail t) {
  if constexpr (sm80::agent_has_ptx(Getter{}().agent)) {
    constexpr int kBM = Getter{}().block_m;
    const int j = static_cast<int>(blockIdx.x);
    long long it = static_cast<long long>(j) * t.tail_chunk;
    const long long end = tail_end(t, j);
    for (bool first = true; it < end; first = false) {
      if (!first) __syncthreads();  // the previous piece's warps are done with shared memory
      const TailSegment seg = tail_segment(t, j, it);
      prefill_sm80_body<Getter, DT, D, true>(a, seg.linear, seg.kt_lo, seg.kt_hi,
                                             t.ws_o + static_cast<long long>(seg.slot) * kBM * D,
                                             t.ws_lse + static_cast<long long>(seg.slot) * kBM);
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

}  // namespace muh::kernels
