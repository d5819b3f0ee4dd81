// kernels/prefill_sm90_launch.cuh — the host side of the sm90 prefill agent: its TMA maps and its
// launch (kernels/prefill_sm90.cuh). Included only by the sm_90a instance files
// (src/instances/prefill_sm90_instance.cu.in).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <numeric>
#include <string>

#include "muh/kernels/tma_map.hpp"
#include "muh/kernels/launch_status.hpp"
#include "muh/kernels/prefill_sm90.cuh"
#include "muh/status.hpp"

namespace muh::kernels {

// A [rows, heads, D] tensor as the 3-D map (dims, heads, rows) with boxes of 64 dims × 1 head ×
// box_rows rows and the 128-byte swizzle the agent's descriptors read (sm90_ptx.cuh).
inline bool make_sm90_rows_map(CUtensorMap* map, const void* base, DType dt, int D, int heads, long long rows,
                               int box_rows) {
  if (rows < 1) return false;
  const cuuint64_t dims[3] = {cuuint64_t(D), cuuint64_t(heads), cuuint64_t(rows)};
  const cuuint64_t strides[2] = {cuuint64_t(D) * 2, cuuint64_t(heads) * D * 2};  // bytes, dims 1 and 2
  const cuuint32_t box[3] = {64, 1, cuuint32_t(box_rows)};
  return encode_tma_map(map, base, dt, 3, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// A paged NHD cache [pages, page_size, heads, D] as the 4-D map (dims, heads, slots, pages) with
// boxes of 64 dims × 1 head × box_rows slots × 1 page, swizzled as above. box_rows divides
// page_size, so a box never crosses a page.
inline bool make_sm90_pages_map(CUtensorMap* map, const void* cache, DType dt, int D, int heads, int page_size,
                                long long pages, int box_rows) {
  if (pages < 1 || page_size % box_rows != 0) return false;
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(heads), cuuint64_t(page_size), cuuint64_t(pages)};
  const cuuint64_t strides[3] = {cuuint64_t(D) * 2, cuuint64_t(heads) * D * 2,
                                 cuuint64_t(page_size) * heads * D * 2};  // bytes, dims 1 .. 3
  const cuuint32_t box[4] = {64, 1, cuuint32_t(box_rows), 1};
  return encode_tma_map(map, cache, dt, 4, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// The same cache as the 5-D map (dims, slots, heads, pages, panels) with boxes of 64 dims ×
// box_rows slots × 1 head × 1 page × D/64 panels: one TMA brings a box's rows of every panel, in
// shared memory [panel][box_rows][128 B] (the box dims' order; the panels 128 bytes apart in
// global memory). For V, whose descriptors read such row groups (prefill_sm90.cuh, v_row_offset).
inline bool make_sm90_pages_panels_map(CUtensorMap* map, const void* cache, DType dt, int D, int heads, int page_size,
                                       long long pages, int box_rows) {
  if (pages < 1 || page_size % box_rows != 0) return false;
  const cuuint64_t dims[5] = {64, cuuint64_t(page_size), cuuint64_t(heads), cuuint64_t(pages), cuuint64_t(D / 64)};
  const cuuint64_t strides[4] = {cuuint64_t(heads) * D * 2, cuuint64_t(D) * 2, cuuint64_t(page_size) * heads * D * 2,
                                 128};  // bytes, dims 1 .. 4
  const cuuint32_t box[5] = {64, cuuint32_t(box_rows), 1, 1, cuuint32_t(D / 64)};
  return encode_tma_map(map, cache, dt, 5, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// vLLM's key cache [pages, heads, D/8, page_size, 8] as the 4-D map (64, D/8, page_size/8,
// pages · heads): dim 0 the 128 contiguous bytes of 8 slots × 8 dims, then the dim groups, then
// the 8-slot groups, each box_rows slots of one (page, head) landing unswizzled as
// [box_rows/8][D/8][128 B] — the core matrices of K-major K (prefill_sm90.cuh's qk_issue).
inline bool make_sm90_vllm_keys_map(CUtensorMap* map, const void* cache, DType dt, int D, int heads, int page_size,
                                    long long pages, int box_rows) {
  if (pages < 1 || page_size % box_rows != 0 || box_rows % 8 != 0) return false;
  const cuuint64_t dims[4] = {64, cuuint64_t(D / 8), cuuint64_t(page_size / 8), cuuint64_t(pages) * heads};
  const cuuint64_t strides[3] = {cuuint64_t(page_size) * 16, 128, cuuint64_t(page_size) * D * 2};  // bytes, dims 1 .. 3
  const cuuint32_t box[4] = {64, cuuint32_t(D / 8), cuuint32_t(box_rows / 8), 1};
  return encode_tma_map(map, cache, dt, 4, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// vLLM's value cache [pages, heads, D, page_size] as the 4-D map (16, D, page_size/16, pages ·
// heads): rows of 16 slots (32 bytes) of one dim, box_rows slots landing as [box_rows/16][D][32 B]
// under the 32-byte swizzle — K-major V, a k16 step a row group (pv_issue).
inline bool make_sm90_vllm_values_map(CUtensorMap* map, const void* cache, DType dt, int D, int heads,
                                      int page_size, long long pages, int box_rows) {
  if (pages < 1 || page_size % box_rows != 0 || box_rows % 16 != 0) return false;
  const cuuint64_t dims[4] = {16, cuuint64_t(D), cuuint64_t(page_size / 16), cuuint64_t(pages) * heads};
  const cuuint64_t strides[3] = {cuuint64_t(page_size) * 2, 32, cuuint64_t(page_size) * D * 2};  // bytes, dims 1 .. 3
  const cuuint32_t box[4] = {16, cuuint32_t(D), cuuint32_t(box_rows / 16), 1};
  return encode_tma_map(map, cache, dt, 4, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_32B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// Rows of one paged K/V box: the largest that divides both the page and the key tile (pages are
// multiples of 8 rows for 16-bit elements, prefill_check: so ≥ 8, whole swizzle groups).
constexpr int sm90_page_box_rows(int page_size, int block_n) { return std::gcd(page_size, block_n); }

// Launches the sm90 agent with the policy of Getter over `a` (validated by src/prefill.cu), K/V
// from source Src (contiguous: a.k, a.v; paged: kv), whole q tiles only: one CTA per q tile,
// or with a persistent schedule min(tiles, sched.ctas) CTAs taking the tiles in turn from
// sched.counter, which is zeroed on the stream first.
template <class Getter, DType DT, int D, KVSource Src>
Status launch_prefill_sm90_source(PrefillArgs a, const PrefillPagedKV& kv, PrefillSchedule sched,
                                  cudaStream_t stream) {
  using Sh = Sm90PrefillShape<Getter, DT, D>;
  a.num_m_blocks = (a.max_seqlen_q + Sh::BM - 1) / Sh::BM;
  const long long tiles = prefill_grid_size(a);
  if (tiles == 0) return Status::Ok();
  if (tiles >= (1ll << 31)) return {StatusCode::invalid_argument, "prefill: more q tiles than a grid holds"};
  if (sched.persistent() && sched.counter == nullptr)
    return {StatusCode::invalid_argument, "prefill (sm90 agent): a persistent schedule without its counter (internal)"};
  // (The counter runs to tiles + CTAs − 1: kept within int by going persistent below 2^30 tiles.)
  const bool persistent = sched.persistent() && sched.ctas < tiles && tiles < (1ll << 30);
  const Sm90Scheduler scheduler{persistent ? sched.counter : nullptr, static_cast<int>(tiles)};
  const long long grid = persistent ? sched.ctas : tiles;
  Sm90PrefillMaps maps;
  // (q rows ≥ 2^31 cannot be addressed by the TMA's signed coordinates: check_prefill_call
  // bounds total_q and total_k by int already.)
  bool ok = make_sm90_rows_map(&maps.q, a.q, DT, D, a.num_q_heads, a.total_q, Sh::BM);
  maps.v_rows = Sh::BN;
  maps.kv_box_rows = is_paged(Src) ? sm90_page_box_rows(kv.page_size, Sh::BN) : Sh::BN;
  if constexpr (Src == KVSource::contiguous) {
    ok = ok && make_sm90_rows_map(&maps.k, a.k, DT, D, a.num_kv_heads, a.total_k, Sh::BN) &&
         make_sm90_rows_map(&maps.v, a.v, DT, D, a.num_kv_heads, a.total_k, Sh::BN);
  } else if constexpr (Src == KVSource::paged_vllm) {
    if (!prefill_agent_reads_pages(Agent::sm90, Src, kv.page_size))
      return {StatusCode::invalid_argument, "prefill (sm90 agent): vLLM-layout pages must hold a multiple of 16 slots (internal)"};
    ok = ok &&
         make_sm90_vllm_keys_map(&maps.k, kv.k_cache, DT, D, kv.num_kv_heads, kv.page_size, kv.num_pages,
                                 maps.kv_box_rows) &&
         make_sm90_vllm_values_map(&maps.v, kv.v_cache, DT, D, kv.num_kv_heads, kv.page_size, kv.num_pages,
                                   maps.kv_box_rows);
  } else {
    if (maps.kv_box_rows % 8 != 0)
      return {StatusCode::invalid_argument, "prefill (sm90 agent): page_size must be a multiple of 8 (internal)"};
    ok = ok && make_sm90_pages_map(&maps.k, kv.k_cache, DT, D, kv.num_kv_heads, kv.page_size, kv.num_pages,
                                   maps.kv_box_rows);
    // V a box a TMA where a box is smaller than the tile and holds whole k16 steps (≥ 16 rows):
    // at page 16, 8 TMAs a tile for V instead of 16 at hd 128 (the producer warps issue their
    // lanes' TMAs one after another: prefill_sm90.cuh). Else (or should the driver refuse the
    // 5-D map) a panel a TMA, as K.
    if (maps.kv_box_rows >= 16 && maps.kv_box_rows < Sh::BN &&
        make_sm90_pages_panels_map(&maps.v, kv.v_cache, DT, D, kv.num_kv_heads, kv.page_size, kv.num_pages,
                                   maps.kv_box_rows))
      maps.v_rows = maps.kv_box_rows;
    else
      ok = ok && make_sm90_pages_map(&maps.v, kv.v_cache, DT, D, kv.num_kv_heads, kv.page_size, kv.num_pages,
                                     maps.kv_box_rows);
  }
  if (!ok) return {StatusCode::cuda_error, "prefill (sm90 agent): cuTensorMapEncodeTiled failed for q / k / v"};
  constexpr int smem = prefill_smem_bytes(Sh::kPolicy, DT, D);
  auto kernel = &prefill_sm90_kernel<Getter, DT, D, Src>;
  MUH_TRY(set_max_dynamic_smem(kernel, smem, "prefill (sm90)"));
  if (scheduler.counter != nullptr) {
    const cudaError_t e = cudaMemsetAsync(scheduler.counter, 0, sizeof(int), stream);
    if (e != cudaSuccess)
      return {StatusCode::cuda_error, std::string("prefill (sm90 agent): zeroing the tile counter: ") + cudaGetErrorString(e)};
  }
  kernel<<<static_cast<unsigned>(grid), Sh::kThreads, smem, stream>>>(a, maps, kv, scheduler);
  return launch_status("prefill launch (sm90)");
}

template <class Getter, DType DT, int D>
Status launch_prefill_sm90_policy(const PrefillArgs& a, const PrefillSchedule& sched, cudaStream_t stream) {
  return launch_prefill_sm90_source<Getter, DT, D, KVSource::contiguous>(a, PrefillPagedKV{}, sched, stream);
}

template <class Getter, DType DT, int D>
Status prefill_sm90_policy_occupancy(int* ctas_per_sm) {
  using Sh = Sm90PrefillShape<Getter, DT, D>;
  constexpr int smem = prefill_smem_bytes(Sh::kPolicy, DT, D);
  auto kernel = &prefill_sm90_kernel<Getter, DT, D, KVSource::contiguous>;
  MUH_TRY(set_max_dynamic_smem(kernel, smem, "prefill occupancy (sm90)"));
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, kernel, Sh::kThreads, smem);
  if (e != cudaSuccess) return {StatusCode::cuda_error, std::string("prefill occupancy: ") + cudaGetErrorString(e)};
  return Status::Ok();
}

}  // namespace muh::kernels
