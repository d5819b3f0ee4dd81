// kernels/prefill_sm80_tile.cuh — the tile shape and the shared-memory layout of the tensor-core
// prefill agents (prefill_sm80.cuh): the shape a policy gives the body (Sm80PrefillShape), the
// XOR swizzle of the tiles in shared memory, the ldmatrix row addresses into them, and the two
// ways a tile gets there — cp.async (sm80_load_tile) and, for the sm75 agent, through registers
// (Sm75TileStage).
#pragma once

#include <cstdint>
#include <type_traits>

#include "muh/kernels/fp8_widen.cuh"
#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/prefill_kv.cuh"
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
    return static_cast<std::uint32_t>((base_row * D + ((2 * kk) & ~(Swz::kGroup - 1)) * 8) * 2) + pick(kk % kN);
  }
  // off[j] by selects, not by an index: a constant j folds to the register, and a j known only at
  // run time (a dim-major V tile's key chunk of the warp's pair half, pv_gemm) stays in registers —
  // indexed, the array went to local memory (16-byte stack frame, 4 LDL a key tile in P V).
  __device__ __forceinline__ std::uint32_t pick(int j) const {
    std::uint32_t o = off[0];
#pragma unroll
    for (int i = 1; i < kN; ++i) o = j == i ? off[i] : o;
    return o;
  }
};

// The same for a chunk-major tile ([D/8][ROWS][8]: chunk c of row r at element (c·ROWS + r)·8, no
// swizzle — 8 consecutive rows of one chunk are 128 contiguous bytes, so an ldmatrix matrix is
// conflict-free as it is): a vLLM K tile (Sm80PrefillShape::kKChunkMajor, sm80_load_k_chunk_major).
template <int ROWS>
struct Sm80ChunkMajorOffsets {
  std::uint32_t off;
  __device__ __forceinline__ Sm80ChunkMajorOffsets(int lane_row, int cbit)
      : off(static_cast<std::uint32_t>((cbit * ROWS + lane_row) * 16)) {}
  __device__ __forceinline__ std::uint32_t at(int base_row, int kk) const {
    return off + static_cast<std::uint32_t>((2 * kk * ROWS + base_row) * 16);
  }
};

// The same for a value tile in 16-key runs ([ROWS/16][D][16], sm80_load_v_runs: chunk c of dim d in
// run j at 16-byte slot j·2D + 2d + (c ^ ((d >> 2) & 1))), read by the plain ldmatrix of a
// dim-major V tile (b_ldm_pattern's lanes: dim lane_row, chunk cbit of a k16 step): with
// the dims' base a multiple of 8 the XOR bit is the lane's own, so one register holds the lane's
// part and the rest adds — the 16-key step kr is run kr.
template <int D>
struct Sm80VRunOffsets {
  std::uint32_t off;
  __device__ __forceinline__ Sm80VRunOffsets(int lane_row, int cbit)
      : off(static_cast<std::uint32_t>((2 * lane_row + (cbit ^ ((lane_row >> 2) & 1))) * 16)) {}
  __device__ __forceinline__ std::uint32_t at(int base_dim, int kr) const {
    return off + static_cast<std::uint32_t>((kr * D + base_dim) * 32);
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

// A paged NHD K or V tile (kernels/prefill_kv.cuh): rows n0 .. n0 + ROWS − 1 of the sequence into
// sm80_load_tile's swizzled layout with cp.async, chunk c of row n at page + slot·ldk + 8c (vLLM
// pages keep their own layouts: sm80_load_k_chunk_major, sm80_load_v_runs below);
// rows >= valid are zero-filled and their block-table entries not read. Each thread keeps one
// chunk column and walks its rows with a PageCursor (one division per tile, not per row); the
// page of each row is a block-table read, which the copy of the tile before prefetched into L1
// (PagedKvGroups::prefetch_blocks, prefill_sm80_pipeline.cuh).
// The rows go in groups of kIdGroup: the group's block ids are loaded first, back to back, then
// its copies are issued (row by row, each id load waited for the copy before it: a cp.async is an
// asm with a memory clobber, which no load moves across). Measured, this did not move the paged
// NHD prefill (0.58–0.61× dense, as 0.58–0.64× before: bench/results/h200-2026-12-02-6e546d2/):
// the ids are L1 hits. What costs is the copies' instruction count: ncu on the 8k + 2048 seed cell
// reads 1.08 ms against dense's 0.644 with 4.83 against 6.34 warp cycles per issued instruction
// — ≈ 2.2× the instructions, half the stalls fixed-latency dependencies (the per-row cursor walk
// and 64-bit address math) — and in-order pages run exactly as slowly as random ones (0.601×), so
// it is not the memory system. The next step: fewer instructions per row (power-of-two pages by
// shift and mask, one id per page a thread touches). The groups stay because they spill less: not
// unrolled (the sm80 rows sit at 255 registers), target 80 hd 128 bf16 spills 96 B on sm_90 SASS
// (184 B row by row; on sm_80 SASS 152 against 172 B), target 86 hd 256 none.
inline constexpr int kIdGroup = 4;
template <int ROWS, int D, int NT, class T, class Rows>
__device__ __forceinline__ void sm80_load_tile_paged(T* dst, const T* base, const Rows& kv, int n0, int valid, int tid) {
  static_assert(Rows::kLayout == KVLayout::nhd, "NHD pages");
  constexpr int kChunks = D / 8;
  // Whole tiles (every row valid: all but the last key tile) at head dims of 8k chunks take the
  // dense copy layout (sm80_load_tile): 8 threads per row with chunks c, c + 8, …, rows
  // kRowsPerPass apart. A row costs one FastDiv (its page and slot), one block-id load and one
  // 64-bit address, which its kChunks / 8 copies share with immediate offsets; the path below
  // pays a cursor step, an id load and an address per 16-byte copy.
  constexpr int kRowsPerPass = NT / 8;
  if constexpr (kChunks % 8 == 0 && kRowsPerPass % 8 == 0 && ROWS % kRowsPerPass == 0) {
    if (valid >= ROWS) {
      constexpr int kPasses = ROWS / kRowsPerPass;
      const int c = tid % 8, r0 = tid / 8;
      const int in_row = c * 8;  // chunk c + 8j of a row: 64·j elements on
      // Rows r0 + p·kRowsPerPass keep r0's swizzle mask (kRowsPerPass % 8 == 0) and the XOR
      // touches the chunk's low 3 bits only: every copy is d plus an immediate.
      const std::uint32_t d = sm80::smem_addr(dst + Sm80Swizzle<D>::offset(r0, c));
#pragma unroll
      for (int g = 0; g < kPasses; g += kIdGroup) {
        constexpr int kG = kPasses < kIdGroup ? kPasses : kIdGroup;
        int id[kG], off[kG];
#pragma unroll
        for (int i = 0; i < kG; ++i) {  // 1. the group's block ids, back to back (no copy between)
          if (g + i >= kPasses) break;
          int slot;
          id[i] = kv.blocks[kv.page.divmod(n0 + r0 + (g + i) * kRowsPerPass, &slot)];
          off[i] = slot * static_cast<int>(kv.ldk) + in_row;
        }
#pragma unroll
        for (int i = 0; i < kG; ++i) {  // 2. its rows' copies
          if (g + i >= kPasses) break;
          const T* row = base + static_cast<long long>(id[i]) * kv.page_elems + off[i];
#pragma unroll
          for (int j = 0; j < kChunks / 8; ++j)
            sm80::cp_async_16(d + static_cast<std::uint32_t>(((g + i) * kRowsPerPass * D + j * 64) * sizeof(T)),
                              row + j * 64);
        }
      }
      return;
    }
  }
  if constexpr (NT % kChunks == 0) {
    constexpr int kRowStep = NT / kChunks;
    constexpr int kPer = (ROWS + kRowStep - 1) / kRowStep;  // rows of this thread (the last may be past ROWS)
    const int c = tid % kChunks, r0 = tid / kChunks;
    PageCursor cur(n0 + r0, kv.page_size);
#pragma unroll 1
    for (int g = 0; g < kPer; g += kIdGroup) {
      int id[kIdGroup], slot[kIdGroup];
#pragma unroll
      for (int i = 0; i < kIdGroup; ++i) {  // 1. the group's block ids, no copy in between
        const int r = r0 + (g + i) * kRowStep;
        id[i] = g + i < kPer && r < ROWS && r < valid ? kv.blocks[cur.blk] : 0;
        slot[i] = cur.slot;
        cur.advance(kRowStep, kv.page_size);
      }
#pragma unroll
      for (int i = 0; i < kIdGroup; ++i) {  // 2. its copies
        const int r = r0 + (g + i) * kRowStep;
        if (g + i < kPer && r < ROWS) {
          const bool ok = r < valid;
          const T* src = base;
          if (ok)
            src = base + static_cast<long long>(id[i]) * kv.page_elems + slot[i] * kv.ldk + c * 8;
          sm80::cp_async_16(sm80::smem_addr(dst + Sm80Swizzle<D>::offset(r, c)), src, ok);
        }
      }
    }
  } else {
    constexpr int kTotal = ROWS * kChunks;
    for (int idx = tid; idx < kTotal; idx += NT) {
      const int r = idx / kChunks, c = idx % kChunks;
      const bool ok = r < valid;
      const T* src = base;
      if (ok) {
        int slot;
        const long long page = kv.page_of(n0 + r, &slot);
        src = base + page + slot * kv.ldk + c * 8;
      }
      sm80::cp_async_16(sm80::smem_addr(dst + Sm80Swizzle<D>::offset(r, c)), src, ok);
    }
  }
}

// A paged vLLM key tile, chunk-major ([D/8][ROWS][8], Sm80ChunkMajorOffsets): the pages keep a
// key's 16-byte x groups apart ([page, head, D/8, slot, 8]: chunk c of consecutive slots
// contiguous, chunks page_size · 16 bytes apart), and a cp.async is coalesced only where a quarter
// warp's 8 copies are 128 contiguous bytes on both sides — into the row-major swizzled tile
// (sm80_load_tile_paged) one side is always scattered, and each 16-byte copy took its own shared
// wavefront and its own L2 sector (ncu's source page of the key split's vLLM kernel, H100: 32
// wavefronts an instruction for 4 ideal, 2x the ideal L2 sectors, whichever side the lanes kept
// contiguous; bench/results/2026-12-07-sm80-vllm-copies/, calls 34 and 36). Here lane l of a
// pass takes row l % ROWS, so 8 lanes copy 8 consecutive slots of one chunk (pages of ≥ 8 slots)
// into 128 consecutive bytes of the tile. A thread keeps one row (NT % ROWS == 0): one block id
// and one address a tile, its chunks page_size · 16 · NT / ROWS bytes apart. Rows >= valid are
// zero-filled and their block-table entries not read.
template <int ROWS, int D, int NT, class T, class Rows>
__device__ __forceinline__ void sm80_load_k_chunk_major(T* dst, const T* base, const Rows& kv, int n0, int valid,
                                                        int tid) {
  static_assert(sizeof(T) == 2 && Rows::kLayout == KVLayout::vllm, "16-bit vLLM key pages");
  static_assert(NT % ROWS == 0, "each thread keeps one row");
  constexpr int kChunks = D / 8, kStep = NT / ROWS;  // chunks of a row; chunk step between a thread's copies
  static_assert(kChunks % kStep == 0, "whole passes");
  const int r = tid % ROWS, c0 = tid / ROWS;
  const bool ok = r < valid;
  const T* src = base;
  if (ok) {
    int slot;
    src = base + kv.page_of(n0 + r, &slot) + (static_cast<long long>(c0) * kv.page_size + slot) * 8;
  }
  const long long step = static_cast<long long>(kStep) * kv.page_size * 8;  // elements
  const std::uint32_t d = sm80::smem_addr(dst + (c0 * ROWS + r) * 8);
#pragma unroll
  for (int i = 0; i < kChunks / kStep; ++i)
    sm80::cp_async_16(d + static_cast<std::uint32_t>(i * kStep * ROWS * 16), ok ? src + i * step : src, ok);
}

// A paged vLLM value tile. The pages are token-minor ([page, head, D, slot]), so the tile keeps
// their order — 16-key runs, [ROWS/16][D][16]: run j holds keys n0 + 16j .. + 15 of every dim as a
// page of 16 keeps them (dim d's 16 slots are 32 contiguous bytes, 4 dims a 128-byte line) — and
// P V reads it with a plain ldmatrix (dims on the rows, keys contiguous: the B fragment's own
// layout; Sm80VRunOffsets) instead of ldmatrix.trans. A quarter warp's 8 copies — 4 dims × the two
// 8-key chunks of a run — are then 128 contiguous bytes in global and in shared memory; the
// dim-major tile before ([D][ROWS], one dim's 8 chunks from 4 pages a quarter warp) took 4x the
// ideal shared wavefronts. Measured (call39, H100): the key split on vLLM pages 1.05–1.06x its NHD
// time at pages of 16, was 1.06–1.10x; 2–5 % slower than the dim-major tile at pages of 64, whose
// quarter warp read one page's 128 contiguous bytes (vLLM's CUDA kernels take pages of 8, 16, 32;
// bench/results/2026-12-07-sm80-vllm-copies/ has the history). fp8 caches keep the dim-major tile
// (sm80_load_v_codes_dim_major). Chunk c of dim d within a run is stored at 16-byte slot
// 2d + (c ^ ((d >> 2) & 1)): rows 32 bytes apart put dims d and d + 4 on the same banks, the XOR
// moves one of them, and never leaves the 128-byte line. Any page of whole 8-slot groups is read (a
// chunk is 8 slots of one page). Thread (j, gt) keeps run j = tid / G and chunk gt & 1
// (G = NT / (ROWS/16) threads a run), so it reads one block id a tile, and steps G/2 dims a pass.
// Keys >= valid are zero-filled and their block-table entries not read.
template <int ROWS, int D, int NT, class T, class Rows>
__device__ __forceinline__ void sm80_load_v_runs(T* dst, const Rows& kv, int n0, int valid, int tid) {
  static_assert(sizeof(T) == 2 && Rows::kLayout == KVLayout::vllm, "16-bit vLLM value pages");
  static_assert(ROWS % 16 == 0, "whole 16-key runs");
  constexpr int kRuns = ROWS / 16, kG = NT / kRuns;  // threads a run
  static_assert(NT % kRuns == 0 && kG % 8 == 0, "whole quarter warps a run");
  static_assert((2 * D) % kG == 0, "whole passes over a run's 2·D chunks");
  const int j = tid / kG, gt = tid % kG;
  const int c = gt & 1;
  const int key = j * 16 + c * 8;             // this thread's 8 keys, from n0
  const int n = min(max(valid - key, 0), 8);  // of them in range
  const T* src = kv.v;
  if (n > 0) {
    int slot;
    src = kv.v + kv.page_of(n0 + key, &slot) + slot;
  }
  T* const own = dst + j * D * 16 + c * 8;  // chunk c of dim 0 in run j
  const int other = 8 - 16 * c;              // from chunk c to chunk c ^ 1, in elements
  // Each pass's addresses from d: carried from pass to pass (a pointer stepping (G/2)·page_size)
  // or with the XOR written as one, ptxas 13.0 spilled 80–340 B at the t89 hd-128 row (sm_90 SASS,
  // 255 registers); so, none.
#pragma unroll 1
  for (int d = gt >> 1; d < D; d += kG / 2)
    sm80::cp_async_16_bytes(sm80::smem_addr(own + d * 16 + ((d >> 2) & 1) * other),
                            src + static_cast<long long>(d) * kv.page_size, n * 2);
}

// ---- An fp8 KV cache (muh/kv_quant.hpp; the sm80 agent only: prefill_agent_reads_kv) -----------
// A K/V tile of 1-byte codes lands by cp.async in its 16-bit ring buffer, each row's codes in the
// upper half of the row's own 16-bit bytes (code row r of a tile of COLS columns at byte
// 2·r·COLS + COLS); sm80_widen_codes then widens every row in place into the buffer's 16-bit
// layout, which the tile math reads unchanged. So the rows, their shared memory and the plan are
// those of a 16-bit cache. Measured (H100, the seed's cells, fp16 hd 256 vLLM pages;
// bench/results/h100-2026-12-06-fp8-prefill/): 1.22–1.34× the 16-bit cache's time on the same row —
// this pass and its CTA barrier, and no ping-pong over fp8 (kPingPong below).

// K or NHD V codes, rows n0 .. n0 + ROWS − 1 of the sequence into the buffer at byte address buf
// (rows >= valid zero-filled, their block-table entries not read): NHD chunk c (16 codes) of row n
// at page + slot·ldk + 16c, vLLM K (x = 16 codes) at page + (c·page_size + slot)·16 — a chunk is
// one of its x groups. One chunk a copy, its page looked up per copy: the 16-bit path's tuned
// copy layouts are not repeated here.
template <int ROWS, int D, int NT, class Rows>
__device__ __forceinline__ void sm80_load_codes_paged(std::uint32_t buf, const std::uint8_t* base, const Rows& kv,
                                                      int n0, int valid, int tid) {
  static_assert(D % 16 == 0, "whole 16-code chunks per row");
  constexpr int kChunks = D / 16, kTotal = ROWS * kChunks;
  constexpr bool kNhd = Rows::kLayout == KVLayout::nhd;
#pragma unroll 1
  for (int idx = tid; idx < kTotal; idx += NT) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool ok = r < valid;
    const std::uint8_t* src = base;
    if (ok) {
      int slot;
      const long long page = kv.page_of(n0 + r, &slot);
      src = base + page + (kNhd ? slot * kv.ldk + c * 16 : (static_cast<long long>(c) * kv.page_size + slot) * 16);
    }
    sm80::cp_async_16(buf + static_cast<std::uint32_t>(2 * r * D + D + c * 16), src, ok);
  }
}

// vLLM V codes ([page, head, D, slot]: token-minor), dim-major ([D][ROWS], 16-byte chunks
// XOR-swizzled by Sm80Swizzle<ROWS>; widened in place, then read as Sh::kVDimMajor says): row d
// holds keys n0 .. n0 + ROWS − 1 of dim d, 16 keys (16 bytes of one page:
// page_size is a multiple of 16, checked on the host) a copy; keys >= valid zero-filled.
template <int ROWS, int D, int NT, class Rows>
__device__ __forceinline__ void sm80_load_v_codes_dim_major(std::uint32_t buf, const Rows& kv, int n0, int valid,
                                                            int tid) {
  static_assert(ROWS % 16 == 0, "whole 16-key chunks per dim row");
  constexpr int kGroups = ROWS / 16;
  static_assert(NT % kGroups == 0, "each thread keeps one key group");
  constexpr int kDimStep = NT / kGroups;
  const int g = tid % kGroups, d0 = tid / kGroups;
  const int n = min(max(valid - g * 16, 0), 16);
  const std::uint8_t* src = kv.v;
  if (n > 0) {
    int slot;
    const long long page = kv.page_of(n0 + g * 16, &slot);
    src = kv.v + page + slot;
  }
#pragma unroll 1
  for (int d = d0; d < D; d += kDimStep)
    sm80::cp_async_16_bytes(buf + static_cast<std::uint32_t>(2 * d * ROWS + ROWS + g * 16),
                            src + static_cast<long long>(d) * kv.page_size, n);
}

// Widens the codes of a ROWS × COLS tile (as the loads above leave them) in place into the 16-bit
// tile at buf (row r, 8-code unit u → 16-byte chunk Sm80Swizzle<COLS>::offset(r, u)), by the CTA's
// W warps; every code has landed and is visible to every thread (the ring's wait and barrier). A
// row's codes and its 16-bit chunks share the row's bytes and no other row's, so a warp takes
// whole rows — 32 / (COLS / 8) of them a pass — reads their codes, syncs its lanes, and writes;
// no barrier between warps until the one that makes the widened tile visible to every ldmatrix.
template <KVDType KV, class T, int ROWS, int COLS, int W>
__device__ __forceinline__ void sm80_widen_codes(T* buf, int warp, int lane) {
  constexpr int kUnits = COLS / 8;  // 8 codes → one 16-byte chunk
  static_assert(COLS % 8 == 0 && kUnits <= 32, "a row's units fit one warp");
  constexpr int kRowsPerPass = 32 / kUnits;
  using Swz = Sm80Swizzle<COLS>;
  const int rr = lane / kUnits, u = lane % kUnits;
  const bool active = rr < kRowsPerPass;
#pragma unroll 1
  for (int r0 = warp * kRowsPerPass; r0 < ROWS; r0 += W * kRowsPerPass) {
    const int r = r0 + rr;
    const bool mine = active && r < ROWS;
    uint2 c = make_uint2(0u, 0u);
    if (mine) c = *reinterpret_cast<const uint2*>(reinterpret_cast<const unsigned char*>(buf) + 2 * r * COLS + COLS + u * 8);
    __syncwarp();  // the row's codes read before any of its chunks is written over them
    if (mine) *reinterpret_cast<uint4*>(buf + Swz::offset(r, u)) = widen_fp8x8<KV, T>(c);
    __syncwarp();
  }
  __syncthreads();  // the widened tile, for every warp's ldmatrix
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
  // A paged NHD tile (rows n0 .. of kv, as sm80_load_tile_paged reads them) into the registers.
  template <class Rows>
  __device__ __forceinline__ void fetch_paged(const T* base, const Rows& kv, int n0, int valid, int tid) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) v[i] = make_uint4(0, 0, 0, 0);
    if constexpr (NT % kChunks == 0) {
      constexpr int kRowStep = NT / kChunks;
      const int r0 = tid / kChunks, c = tid % kChunks;
      PageCursor cur(n0 + r0, kv.page_size);
#pragma unroll
      for (int i = 0; i < kPer; ++i, cur.advance(kRowStep, kv.page_size))
        if (r0 + i * kRowStep < valid)
          v[i] = *reinterpret_cast<const uint4*>(base + static_cast<long long>(kv.blocks[cur.blk]) * kv.page_elems +
                                                 cur.slot * kv.ldk + c * 8);
    } else {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int idx = tid + i * NT, r = idx / kChunks, c = idx % kChunks;
        if ((kTotal % NT == 0 || idx < kTotal) && r < valid)
          v[i] = *reinterpret_cast<const uint4*>(base + kv.row_offset(n0 + r) + c * 8);
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

// The tile shape of one policy, and the modes it selects. One CTA computes O for BM query rows;
// each of the W warps owns whole m16 tiles of them.
template <class Getter, DType DT, int D, bool kPiece, KVSource kSrc = KVSource::contiguous,
          KVDType kKv = KVDType::same>
struct Sm80PrefillShape {
  using T = storage_t<DT>;
  // The paged cache's element type (muh/kv_quant.hpp): q's own, or fp8 codes (C, one byte), which
  // the copies land in the ring and widen there (sm80_widen_codes).
  static constexpr KVDType kKV = kKv;
  static constexpr bool kFp8 = is_fp8(kKv);
  using C = std::conditional_t<kFp8, std::uint8_t, T>;
  static constexpr PrefillPolicy P = Getter{}();
  static constexpr KVSource kSource = kSrc;  // where K/V come from (kernels/prefill_kv.cuh)
  static constexpr bool kPaged = is_paged(kSrc);
  // V tiles dim-major — dims on the rows, read by the plain ldmatrix — from vLLM's token-minor
  // value pages: in 16-key runs (kVRuns below) or, an fp8 cache's, [D][BN] (sm80_load_v_codes_dim_major).
  static constexpr bool kVDimMajor = kSrc == KVSource::paged_vllm;
  static_assert(prefill_agent_reads(P.agent, kSrc), "the sm75 agent reads contiguous and paged NHD K/V");
  static_assert(!kFp8 || (is_paged(kSrc) && prefill_agent_reads_kv(P.agent, kKv)),
                "an fp8 cache is a paged one, read by the sm80 agent (prefill_agent_reads_kv)");
  static constexpr Agent kAgent = P.agent;
  static constexpr DType kDType = DT;
  static constexpr int kD = D;
  static constexpr int BM = P.block_m, BN = P.block_n, W = P.num_warps, S = P.num_stages;  // S: ring buffers
  static constexpr int NT = 32 * W;
  static_assert(DT == DType::fp16 || DT == DType::bf16, "the tensor-core agent takes 16-bit inputs");
  static_assert(P.agent == Agent::sm80 || (P.agent == Agent::sm75 && DT == DType::fp16),
                "tensor-core agents: sm80 (fp16, bf16) and sm75 (fp16: Turing has no bf16 mma)");
  static constexpr bool kRegStage = P.agent == Agent::sm75;  // no cp.async: K/V via registers (Sm75TileStage)
  // K tiles chunk-major ([D/8][BN][8]: vLLM's own key layout, sm80_load_k_chunk_major) from 16-bit
  // vLLM pages by cp.async (an fp8 cache's codes are widened into the row-major tile).
  static constexpr bool kKChunkMajor = kSrc == KVSource::paged_vllm && !kFp8 && !kRegStage;
  // Their V tiles in 16-key runs ([BN/16][D][16]: a page of 16's own value layout, sm80_load_v_runs),
  // read as the dim-major tile is (kVDimMajor) with other offsets (an fp8 cache's stay [D][BN]).
  static constexpr bool kVRuns = kKChunkMajor;
  using KvStage = Sm75TileStage<BN, D, NT, T>;  // the sm75 agent's next K/V tile, in registers
  static_assert(BM % (16 * W) == 0, "each warp owns whole m16 tiles: block_m % (16·num_warps) == 0");
  static_assert(BN % 16 == 0 && D % 16 == 0, "block_n and head_dim must be multiples of 16");
  // Warp pairs (policy.hpp, prefill_sm80_warp_pairs): warps 2p and 2p+1 share 32 query rows;
  // in Q Kᵀ each takes half of the key tile, in P V half of the head dim, and they swap row
  // maxima and their halves of P through shared memory (two pair barriers per key tile).
  static constexpr bool kPairs = prefill_sm80_warp_pairs(P, D);
  static constexpr int WN = kPairs ? 2 : 1;  // warps sharing a row block
  static constexpr int RW = BM * WN / W;     // query rows per warp (of its pair)
  static constexpr int MT = RW / 16;         // m16 tiles per warp
  static constexpr int BNW = BN / WN;        // keys of one warp in Q Kᵀ
  static constexpr int NTL = BNW / 8;        // n8 tiles of S per m16 tile
  static constexpr int KD = D / 16;          // k16 steps of Q Kᵀ
  static constexpr int DW = D / WN;          // head dims of one warp in P V
  static constexpr int DTL = DW / 8;         // n8 tiles of O
  static constexpr int KH = BNW / 16;        // k16 steps of P V over one warp's own keys
  static_assert(!kPairs || (MT == 2 && BNW % 16 == 0 && (DW / 8) % Sm80Swizzle<D>::kGroup == 0),
                "pairs: 2 m16 tiles per warp, whole k16 steps per half, halves aligned to the swizzle");
  // Q fragments stay in registers when they cost ≤ 32 registers per thread (hd ≤ 128 with one
  // m16 tile per warp); beyond that the O and S accumulators need the registers and Q is re-read
  // from shared memory by ldmatrix at every k16 step (FA2 does the same at hd 256).
  static constexpr bool kQInRegs = MT * KD * 4 <= 32;
  // Shared memory: the Q tile + a ring of S K-or-V tiles (+ the pairs' exchange, + the
  // ping-pong's mbarriers): exactly the footprint the tables are checked with.
  static constexpr int kXWarpBytes = 32 * BN + 128;  // per warp: its half of P, then its row maxima
  static_assert((BM + S * BN) * D * 2 + (kPairs ? W * kXWarpBytes : 0) + (P.ping_pong ? 16 * S : 0) ==
                    prefill_smem_bytes(P, DT, D),
                "footprint != policy.hpp");
  // Ping-pong (policy.hpp, PrefillPolicy::ping_pong): whole tiles on sm_90 code. Elsewhere (the
  // split's pieces, older archs, where a t90 row never runs) the row takes the CTA-barrier ring.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // (Paged vLLM K/V too, since their V tiles are cp.async copies as well: sm80_load_v_runs.)
  // (Not over an fp8 cache: its tiles are widened by the whole CTA between CTA barriers.)
  static constexpr bool kPingPong = P.ping_pong && !kPiece && !kRegStage && !kFp8;
#else
  static constexpr bool kPingPong = false;
#endif
  // The ring's V(i) copy is waited for right after Q Kᵀ (FA2's 2-buffer schedule) or after the
  // softmax: BarrierRing in prefill_sm80_pipeline.cuh says why.
  static constexpr bool kIssueBeforeSoftmax = S <= 2 && !kPairs;
};

}  // namespace muh::kernels
