// kernels/cache_write.cuh — reshape_and_cache / reshape_and_cache_flash: the new tokens' key and
// value written into the paged cache at the slots slot_mapping gives (the per-token steps are
// cache_write.hpp's, shared with the CPU tests): copied bitwise (kv_cache_dtype "auto",
// cache_write_kernel) or quantised to fp8 codes (cache_write_fp8_kernel).
//
// One CTA per token; its threads stride over the token's num_kv_heads · head_dim / kVec chunks.
// 128 threads: one pass over 8 KV heads × head_dim 128 in 16-byte chunks (128 chunks), the
// serving shape; the seed's 1 KV head × 256 takes 32 chunks, so a quarter of the CTA idles on a
// kernel that moves 1 KB per token — memory-bound either way. The fp8 kernel runs kv_quant.hpp's
// float_to_fp8 per element (the host's own function, so device and host codes agree bit for bit:
// a few dozen instructions, two of them fp32 divisions) where CUDA's __nv_cvt_float_to_fp8 is one
// cvt per two elements on sm_89+.
#pragma once

#include <cstdint>

#include "muh/kernels/cache_write.hpp"

namespace muh::kernels::cache_write {

inline constexpr int kThreads = 128;

// Step 1 of both kernels: the token's slot. Padding is skipped; an out-of-range slot is skipped and
// counted. False: nothing to write.
__device__ __forceinline__ bool slot_to_write(const CacheWriteArgs& a, int token, std::int64_t* slot) {
  *slot = a.slot_mapping[token];
  const Slot kind = classify(*slot, a.num_slots);
  if (kind == Slot::out_of_range && threadIdx.x == 0 && a.bad_slots != nullptr) atomicAdd(a.bad_slots, 1);
  return kind == Slot::write;
}

// The cache holds the key's dtype: E is its bits (uint16_t, uint32_t).
template <class E, int kVec>
__global__ void __launch_bounds__(kThreads) cache_write_kernel(const CacheWriteArgs a) {
  const int token = blockIdx.x;
  std::int64_t slot;
  if (!slot_to_write(a, token, &slot)) return;
  // 2. Its key and value, chunk by chunk.
  const int chunks = chunks_per_token(a, kVec);
  for (int c = threadIdx.x; c < chunks; c += kThreads) write_chunk<E, kVec>(a, token, slot, c);
}

// An fp8 cache of kind Kv, written from In (fp16 or bf16) key and value.
template <DType In, KVDType Kv, int kVec>
__global__ void __launch_bounds__(kThreads) cache_write_fp8_kernel(const CacheWriteArgs a) {
  const int token = blockIdx.x;
  std::int64_t slot;
  if (!slot_to_write(a, token, &slot)) return;
  const int chunks = chunks_per_token(a, kVec);
  for (int c = threadIdx.x; c < chunks; c += kThreads) write_chunk_fp8<In, Kv, kVec>(a, token, slot, c);
}

}  // namespace muh::kernels::cache_write
