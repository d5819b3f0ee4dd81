// kernels/prefill_kv.cuh — where the K/V rows of one (sequence, kv head) of a prefill call live,
// for K/V read from a paged cache (paged_kv.hpp): the kernel argument of a paged call and the row
// accessor the agents' copies read through. One kernel body per agent; the K/V source is its
// template parameter (KVSource) and only the copies differ:
//   contiguous  key n of the sequence at k + (k_off + n)·ldk (the varlen layout, as before)
//   paged NHD   key n in page blocks[n / page_size], slot n % page_size: its row of head_dim
//               elements at page·page_elems + slot·ldk (ldk = num_kv_heads·head_dim)
//   paged vLLM  key   [page, head, D / x, slot, x]: 16-byte vector v of key n at
//                     page·page_elems + (v·page_size + slot)·x   (x = 16 B / element)
//               value [page, head, D, slot]: token-minor, 16 bytes are x slots of one dim
// The head's offset inside a page is folded into the base pointers k and v.
#pragma once

#include <cstdint>

#include "muh/kernels/fast_div.hpp"
#include "muh/kernels/input_guard.cuh"
#include "muh/paged_kv.hpp"

namespace muh::kernels {

// The paged K/V of one launch, as src/prefill.cu validated and filled it: a kernel argument of
// its own (as PrefillTail), so that the contiguous kernels' arguments stay as they were.
struct PrefillPagedKV {
  const void* k_cache = nullptr;     // in the launch's layout
  const void* v_cache = nullptr;
  const int* block_table = nullptr;  // [batch, max_blocks_per_seq]
  const int* seqused_k = nullptr;    // [batch]
  int page_size = 0;                 // a multiple of 16 B / element (checked on the host)
  int max_blocks_per_seq = 0;
  int num_kv_heads = 0;
  int num_pages = 0;                 // pages in the cache: block ids are guarded against it
  FastDiv page_div;                  // FastDiv::make(page_size): key n's page and slot (launch_args.cuh)
  float v_scale = 1.f;               // an fp8 cache (muh/kv_quant.hpp): V = code · v_scale, applied to O
};

// Keys of sequence b: seqused_k[b], never beyond what its block-table row covers (a caller's
// seqused_k past max_blocks_per_seq · page_size is refused with debug_checks; without them the
// kernel still reads no block-table entry outside the row).
__device__ __forceinline__ int paged_kv_len(const PrefillPagedKV& p, int b) {
  const int n = p.seqused_k[b];
  const long long cap = static_cast<long long>(p.max_blocks_per_seq) * p.page_size;
  return n < 0 ? 0 : (n > cap ? static_cast<int>(cap) : n);
}

#if defined(__CUDACC__)
// The input guard of a paged call (issue 19; muh/input_errors.hpp), after prefill_sequence_ok
// and before any K/V read, by every thread of the CTA (it ends in a barrier): sequence b's
// seqused_k in [0, max_seqlen_k] (max_seqlen_k <= max_blocks_per_seq · page_size, a host check)
// and every block id it reads, ids 0 .. ceil(seqused_k / page_size) − 1 of its row, in
// [0, num_pages). Otherwise the CTA writes nothing and flags it (block_id / seq_len) — so a bad id
// never makes it read another request's pages or outside the cache. The ids are shared out over
// the CTA's threads: 6,250 at 100k keys and page 16, 49 L2-resident loads for each of 128 threads,
// against the 100 MB of K/V that CTA then reads.
// paged_ids_bad is this thread's share: ids first, first + stride, ... of the row (n keys).
__device__ __forceinline__ bool paged_ids_bad(const PrefillPagedKV& p, int b, int n, int first, int stride) {
  const int* row = p.block_table + static_cast<long long>(b) * p.max_blocks_per_seq;
  const int used = (n + p.page_size - 1) / p.page_size;
  bool bad_id = false;
  for (int i = first; i < used; i += stride) bad_id |= static_cast<unsigned>(row[i]) >= static_cast<unsigned>(p.num_pages);
  return bad_id;
}

__device__ __forceinline__ bool paged_sequence_ok(const PrefillPagedKV& p, int b, int max_seqlen_k, int* errors) {
  const int n = p.seqused_k[b];
  const bool len_ok = n >= 0 && n <= max_seqlen_k;
  const bool bad_id = len_ok && paged_ids_bad(p, b, n, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
  if (__syncthreads_or(bad_id) == 0 && len_ok) return true;
  if (threadIdx.x == 0) flag_input_error(errors, len_ok ? InputError::block_id : InputError::seq_len);
  return false;
}
// (The same guard by one warp alone: kernels/prefill_sm90.cuh's paged_sequence_ok_warp.)
#endif

// The K/V rows of one (sequence, kv head) in a paged cache of layout L.
template <class T, KVLayout L>
struct PagedKvRows {
  static constexpr KVLayout kLayout = L;
  static constexpr int kX = 16 / static_cast<int>(sizeof(T));  // elements per 16 bytes (vLLM's x)
  const T* k = nullptr;        // this head's part of page 0
  const T* v = nullptr;
  const int* blocks = nullptr;  // [max_blocks_per_seq]: the sequence's block-table row
  int page_size = 0;
  FastDiv page;                // divides by page_size
  long long page_elems = 0;    // elements of one page (page_size · num_kv_heads · D)
  long long ldk = 0;           // NHD: elements between slots (num_kv_heads · D)

  template <int D>
  __device__ __forceinline__ static PagedKvRows make(const PrefillPagedKV& p, int b, int kvh) {
    PagedKvRows r;
    const long long head = L == KVLayout::nhd ? static_cast<long long>(kvh) * D
                                              : static_cast<long long>(kvh) * D * p.page_size;
    r.k = static_cast<const T*>(p.k_cache) + head;
    r.v = static_cast<const T*>(p.v_cache) + head;
    r.blocks = p.block_table + static_cast<long long>(b) * p.max_blocks_per_seq;
    r.page_size = p.page_size;
    r.page = p.page_div;
    r.page_elems = static_cast<long long>(p.page_size) * p.num_kv_heads * D;
    r.ldk = static_cast<long long>(p.num_kv_heads) * D;
    return r;
  }
  __device__ __forceinline__ const T* base(bool value) const { return value ? v : k; }
  // Element offset of the page holding key n, and n's slot in it.
  __device__ __forceinline__ long long page_of(int n, int* slot) const {
    const int blk = page.divmod(n, slot);
    return static_cast<long long>(blocks[blk]) * page_elems;
  }
  // NHD: element offset of key n's row (add the dim).
  __device__ __forceinline__ long long row_offset(int n) const {
    int slot;
    const long long page = page_of(n, &slot);
    return page + slot * ldk;
  }
};

// A thread's walk down the rows n, n + step, n + 2·step, … of a paged cache (NHD): the block and
// slot are carried from row to row instead of one division per row; step and page_size are
// runtime values (page sizes like 528 are not powers of two).
struct PageCursor {
  int blk;
  int slot;
  __device__ __forceinline__ PageCursor(int n, int page_size) : blk(n / page_size), slot(n - (n / page_size) * page_size) {}
  __device__ __forceinline__ void advance(int step, int page_size) {
    slot += step;
    while (slot >= page_size) {
      slot -= page_size;
      ++blk;
    }
  }
};

}  // namespace muh::kernels
