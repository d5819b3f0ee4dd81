// kernels/cache_write.cuh — reshape_and_cache / reshape_and_cache_flash: the new tokens' key and
// value written into the paged cache at the slots slot_mapping gives (the per-token steps are
// cache_write.hpp's, shared with the CPU tests).
//
// One CTA per token; its threads stride over the token's num_kv_heads · head_dim / kVec chunks.
// 128 threads: one pass over 8 KV heads × head_dim 128 in 16-byte chunks (128 chunks), the
// serving shape; the seed's 1 KV head × 256 takes 32 chunks, so a quarter of the CTA idles on a
// kernel that moves 1 KB per token — memory-bound either way.
#pragma once

#include <cstdint>

#include "muh/kernels/cache_write.hpp"

namespace muh::kernels::cache_write {

inline constexpr int kThreads = 128;

template <class E, int kVec>
__global__ void __launch_bounds__(kThreads) cache_write_kernel(const CacheWriteArgs a) {
  const int token = blockIdx.x;
  // 1. The token's slot: padding is skipped; an out-of-range slot is skipped and counted.
  const std::int64_t slot = a.slot_mapping[token];
  const Slot kind = classify(slot, a.num_slots);
  if (kind == Slot::padding) return;
  if (kind == Slot::out_of_range) {
    if (threadIdx.x == 0 && a.bad_slots != nullptr) atomicAdd(a.bad_slots, 1);
    return;
  }
  // 2. Its key and value, chunk by chunk.
  const int chunks = chunks_per_token(a, kVec);
  for (int c = threadIdx.x; c < chunks; c += kThreads) write_chunk<E, kVec>(a, token, slot, c);
}

}  // namespace muh::kernels::cache_write
