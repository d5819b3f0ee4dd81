// paged_kv.hpp — where element (page, slot, kv_head, dim) of K and V lives, for both KV
// cache layouts. Shared by the public API, the CPU reference and the GPU kernels (a shape, not a
// kernel: kernels/ includes it, it includes nothing of theirs).
//
//   NHD:  key and value [num_pages, page_size, num_kv_heads, head_dim]
//   vLLM: key   [num_blocks, num_kv_heads, head_dim / x, block_size, x]   (x = 16 B / elem size)
//         value [num_blocks, num_kv_heads, head_dim, block_size]
#pragma once

#include <cstdint>

#include "muh/host_device.hpp"

namespace muh {

enum class KVLayout : unsigned char { nhd = 0, vllm = 1 };

// Where a prefill call's K and V come from (params.hpp, PrefillParams::kv_source): contiguous
// varlen tensors, or a paged cache in one of the two layouts above.
enum class KVSource : unsigned char { contiguous = 0, paged_nhd = 1, paged_vllm = 2 };

constexpr bool is_paged(KVSource s) { return s != KVSource::contiguous; }
constexpr KVLayout paged_layout(KVSource s) { return s == KVSource::paged_vllm ? KVLayout::vllm : KVLayout::nhd; }
constexpr KVSource paged_source(KVLayout l) { return l == KVLayout::vllm ? KVSource::paged_vllm : KVSource::paged_nhd; }
inline const char* kv_source_name(KVSource s) {
  return s == KVSource::contiguous ? "contiguous" : s == KVSource::paged_nhd ? "paged NHD" : "paged vLLM";
}

struct PagedKVShape {
  KVLayout layout = KVLayout::nhd;
  int page_size = 16;
  int num_kv_heads = 1;
  int head_dim = 128;
  int x = 8;  // vLLM key packing: 16 bytes / element size (8 for 16-bit, 4 for fp32)

  MUH_HOST_DEVICE std::int64_t k_offset(std::int64_t page, int slot, int head, int dim) const {
    if (layout == KVLayout::nhd)
      return ((page * page_size + slot) * num_kv_heads + head) * head_dim + dim;
    return (((page * num_kv_heads + head) * (head_dim / x) + dim / x) * page_size + slot) * x + dim % x;
  }
  MUH_HOST_DEVICE std::int64_t v_offset(std::int64_t page, int slot, int head, int dim) const {
    if (layout == KVLayout::nhd)
      return ((page * page_size + slot) * num_kv_heads + head) * head_dim + dim;
    return ((page * num_kv_heads + head) * head_dim + dim) * page_size + slot;
  }
  // Elements of one page (K or V; both layouts hold the same count).
  MUH_HOST_DEVICE std::int64_t page_elems() const {
    return std::int64_t(page_size) * num_kv_heads * head_dim;
  }
};

}  // namespace muh
