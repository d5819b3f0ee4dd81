// kernels/cache_write.hpp — what the cache-write kernel (cache_write.cuh) does for one token,
// host and device: the slot's meaning, where (slot, head, dim) lands in each cache, and the write
// of one chunk of a token's key and value. The CPU tests run these same functions over host
// buffers (tests/cpu/test_cache_write.cpp).
//
//   key, value   [num_tokens, num_kv_heads, head_dim] with a token stride and a head stride (the
//                dims packed): vLLM passes slices of its fused qkv projection
//   key_cache    NHD [num_pages, page_size, num_kv_heads, head_dim] or
//                vLLM [num_blocks, num_kv_heads, head_dim / x, block_size, x]
//   value_cache  NHD as key_cache, or vLLM [num_blocks, num_kv_heads, head_dim, block_size]
//   slot_mapping int64 [num_tokens]: slot = page · page_size + offset; −1 = padding
// Within a page the layout is muh/paged_kv.hpp's PagedKVShape (one place for the rule); between
// pages a page stride (vLLM V1 interleaves K and V pages: [num_blocks, 2, block_size, heads, d]).
// Two writes:
//   write_chunk       kv_cache_dtype "auto": the cache holds the key's dtype and the copy is
//                     bitwise, so it is instantiated per element size, not per dtype
//   write_chunk_fp8   an fp8 cache (muh/kv_quant.hpp): each fp16 / bf16 element x becomes the
//                     1-byte code float_to_fp8(x / scale) (k_scale for the key, v_scale for the
//                     value); x = 16 in the vLLM layout, strides count bytes
#pragma once

#include <cstdint>

#include "muh/dtype.hpp"
#include "muh/host_device.hpp"
#include "muh/kernels/pack.hpp"
#include "muh/kv_quant.hpp"
#include "muh/paged_kv.hpp"

#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

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
  PagedKVShape shape;        // layout, page_size, num_kv_heads, head_dim, x (16 for fp8)
  int num_tokens = 0;
  std::int64_t num_slots = 0;  // num_pages · page_size
  // An fp8 cache's scales (write_chunk_fp8: code = float_to_fp8(x / scale)); unread by the copy.
  float k_scale = 1.f, v_scale = 1.f;
  // Strides in elements (of key / value for the token and head strides, of the cache for the
  // page strides: bytes for an fp8 cache).
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

// Chunk `c` of a token: its head and first dim (kVec consecutive dims of one head).
struct ChunkAt {
  int head, dim;
};
MUH_HOST_DEVICE MUH_FORCEINLINE ChunkAt chunk_at(const CacheWriteArgs& a, int vec, int c) {
  const int per_head = a.shape.head_dim / vec;
  const int head = c / per_head;
  return {head, (c - head * per_head) * vec};
}

// Copies chunk `c` of token `token`'s key and value into slot `slot` (a Slot::write slot).
// E: the element's bits (uint16_t for fp16/bf16, uint32_t for fp32). kVec = 16 B / sizeof(E)
// when every pointer and stride allows 16-byte accesses, else 1 (the launcher decides).
template <class E, int kVec>
MUH_HOST_DEVICE MUH_FORCEINLINE void write_chunk(const CacheWriteArgs& a, int token, std::int64_t slot, int c) {
  const auto [head, dim] = chunk_at(a, kVec, c);
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

// ---- fp8 caches ----------------------------------------------------------------------------------

// The value of fp16 / bf16 bits, exactly (every 16-bit value is an fp32 value), host and device;
// a NaN keeps its sign (and payload), so quantise() sees the sign the host reference sees.
template <DType T>
MUH_HOST_DEVICE MUH_FORCEINLINE float widen(std::uint16_t h) {
  static_assert(T == DType::fp16 || T == DType::bf16, "an fp8 cache is written from fp16 or bf16");
  std::uint32_t bits;
  if constexpr (T == DType::bf16) {
    bits = static_cast<std::uint32_t>(h) << 16;
  } else {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {  // zero or subnormal: m · 2^−24, exact
      const float f = static_cast<float>(m) * 5.9604644775390625e-08f;
      return sign ? -f : f;
    }
    bits = sign | (e == 0x1f ? 0x7f800000u : (e + 112u) << 23) | (m << 13);  // inf / NaN; normal
  }
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// The code of one element: x / scale in fp32 (one IEEE division, round to nearest: vLLM's
// scaled_convert divides too), then kv_quant.hpp's float_to_fp8 (ties to even, saturating to the
// largest finite value, NaN to the NaN code with x's sign). A NaN x is not divided: the host's
// division returns x itself, the GPU's a NaN without x's sign — undivided, both give one code.
MUH_HOST_DEVICE MUH_FORCEINLINE std::uint8_t quantise(float x, float scale, KVDType t) {
  return float_to_fp8(x != x ? x : x / scale, t);
}

// Chunk `c` of token `token`'s key and value (16-bit elements of dtype In) quantised into an fp8
// cache of kind Kv at slot `slot`. kVec = 8 (16-byte loads of the key and value, 8-byte stores
// of codes) when every pointer and stride allows it, else 1 (the launcher decides); 8 divides
// x = 16, so a chunk of the vLLM key layout stays within one group of x.
template <DType In, KVDType Kv, int kVec>
MUH_HOST_DEVICE MUH_FORCEINLINE void write_chunk_fp8(const CacheWriteArgs& a, int token, std::int64_t slot, int c) {
  static_assert(is_fp8(Kv), "write_chunk_fp8 writes fp8 codes");
  const auto [head, dim] = chunk_at(a, kVec, c);
  const std::uint16_t* k =
      static_cast<const std::uint16_t*>(a.key) + token * a.key_token_stride + head * a.key_head_stride + dim;
  const std::uint16_t* v =
      static_cast<const std::uint16_t*>(a.value) + token * a.value_token_stride + head * a.value_head_stride + dim;
  std::uint8_t* kc = static_cast<std::uint8_t*>(a.key_cache);
  std::uint8_t* vc = static_cast<std::uint8_t*>(a.value_cache);
  const Pack<std::uint16_t, kVec> kp = load_pack<std::uint16_t, kVec>(k);
  const Pack<std::uint16_t, kVec> vp = load_pack<std::uint16_t, kVec>(v);
  Pack<std::uint8_t, kVec> kq, vq;
  for (int i = 0; i < kVec; ++i) {
    kq.v[i] = quantise(widen<In>(kp.v[i]), a.k_scale, Kv);
    vq.v[i] = quantise(widen<In>(vp.v[i]), a.v_scale, Kv);
  }
  store_pack<std::uint8_t, kVec>(kc + key_at(a, slot, head, dim), kq);
  if (a.shape.layout == KVLayout::nhd) {
    store_pack<std::uint8_t, kVec>(vc + value_at(a, slot, head, dim), vq);
  } else {
    for (int i = 0; i < kVec; ++i) vc[value_at(a, slot, head, dim + i)] = vq.v[i];
  }
}

}  // namespace muh::kernels::cache_write
