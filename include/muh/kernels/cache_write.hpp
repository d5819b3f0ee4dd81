// kernels/cache_write.hpp — what the cache-write kernel (cache_write.cuh) does for one token,
// host and device: the slot's meaning, where (slot, head, dim) lands in each cache, and the copy of
// one chunk of a token's key and value. The CPU tests run these same functions over host buffers
// (tests/cpu/test_cache_write.cpp).
//
//   key, value   [num_tokens, num_kv_heads, head_dim] with a token stride and a head stride (the
//                dims packed): vLLM passes slices of its fused qkv projection
//   key_cache    NHD [num_pages, page_size, num_kv_heads, head_dim] or
//                vLLM [num_blocks, num_kv_heads, head_dim / x, block_size, x]
//   value_cache  NHD as key_cache, or vLLM [num_blocks, num_kv_heads, head_dim, block_size]
//   slot_mapping int64 [num_tokens]: slot = page · page_size + offset; −1 = padding
// Within a page the layout is muh/paged_kv.hpp's PagedKVShape (one place for the rule); between
// pages a page stride (vLLM V1 interleaves K and V pages: [num_blocks, 2, block_size, heads, d]).
// The copy is bitwise (kv_cache_dtype "auto": the cache holds the key's dtype), so the kernel is
// instantiated per element size, not per dtype.
#pragma once

#include <cstdint>

#include "muh/host_device.hpp"
#include "muh/kernels/pack.hpp"
#include "muh/paged_kv.hpp"

namespace muh::kernels::cache_write {

// A slot_mapping entry: a slot to write, padding (−1, skipped as vLLM skips it), or out of range
// (< −1 or ≥ num_pages · page_size: skipped, never written outside the cache, and counted).
enum class Slot : unsigned char { write, padding, out_of_range };

MUH_HOST_DEVICE MUH_FORCEINLINE Slot classify(std::int64_t slot, std::int64_t num_slots) {
  if (slot == -1) return Slot::padding;
  if (slot < -1 || slot >= num_slots) return Slot::out_of_range;
  return Slot::write;
}

struct CacheWriteArgs {
  const void* key = nullptr;
  const void* value = nullptr;
  void* key_cache = nullptr;
  void* value_cache = nullptr;
  const std::int64_t* slot_mapping = nullptr;
  int* bad_slots = nullptr;  // optional: += 1 per out-of-range slot
  PagedKVShape shape;        // layout, page_size, num_kv_heads, head_dim, x
  int num_tokens = 0;
  std::int64_t num_slots = 0;  // num_pages · page_size
  // Strides in elements.
  std::int64_t key_token_stride = 0, key_head_stride = 0;
  std::int64_t value_token_stride = 0, value_head_stride = 0;
  std::int64_t key_page_stride = 0, value_page_stride = 0;
};

// Element offsets of (slot, head, dim) in the caches: the page's start, then PagedKVShape's
// offset within a page (its page 0).
MUH_HOST_DEVICE MUH_FORCEINLINE std::int64_t key_at(const CacheWriteArgs& a, std::int64_t slot, int head, int dim) {
  const std::int64_t page = slot / a.shape.page_size;
  const int offset = static_cast<int>(slot - page * a.shape.page_size);
  return page * a.key_page_stride + a.shape.k_offset(0, offset, head, dim);
}
MUH_HOST_DEVICE MUH_FORCEINLINE std::int64_t value_at(const CacheWriteArgs& a, std::int64_t slot, int head, int dim) {
  const std::int64_t page = slot / a.shape.page_size;
  const int offset = static_cast<int>(slot - page * a.shape.page_size);
  return page * a.value_page_stride + a.shape.v_offset(0, offset, head, dim);
}

// Chunks of kVec elements per token: a token's num_kv_heads · head_dim elements, kVec at a time
// (kVec divides head_dim, and x in the vLLM layout).
MUH_HOST_DEVICE MUH_FORCEINLINE int chunks_per_token(const CacheWriteArgs& a, int vec) {
  return a.shape.num_kv_heads * (a.shape.head_dim / vec);
}

// Copies chunk `c` of token `token`'s key and value into slot `slot` (a Slot::write slot).
// E: the element's bits (uint16_t for fp16/bf16, uint32_t for fp32). kVec = 16 B / sizeof(E)
// when every pointer and stride allows 16-byte accesses, else 1 (the launcher decides).
template <class E, int kVec>
MUH_HOST_DEVICE MUH_FORCEINLINE void write_chunk(const CacheWriteArgs& a, int token, std::int64_t slot, int c) {
  const int per_head = a.shape.head_dim / kVec;
  const int head = c / per_head;
  const int dim = (c - head * per_head) * kVec;
  const E* k = static_cast<const E*>(a.key) + token * a.key_token_stride + head * a.key_head_stride + dim;
  const E* v = static_cast<const E*>(a.value) + token * a.value_token_stride + head * a.value_head_stride + dim;
  E* kc = static_cast<E*>(a.key_cache);
  E* vc = static_cast<E*>(a.value_cache);
  const Pack<E, kVec> kp = load_pack<E, kVec>(k);
  const Pack<E, kVec> vp = load_pack<E, kVec>(v);
  // Key: kVec consecutive dims are consecutive in both layouts (NHD along the head dim; vLLM
  // within one group of x, which kVec divides).
  store_pack<E, kVec>(kc + key_at(a, slot, head, dim), kp);
  // Value: consecutive in NHD; in vLLM's layout the head dim is strided by block_size.
  if (a.shape.layout == KVLayout::nhd) {
    store_pack<E, kVec>(vc + value_at(a, slot, head, dim), vp);
  } else {
    for (int i = 0; i < kVec; ++i) vc[value_at(a, slot, head, dim + i)] = vp.v[i];
  }
}

}  // namespace muh::kernels::cache_write
