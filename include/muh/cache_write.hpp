// cache_write.hpp — writing new tokens' key and value into the paged KV cache: vLLM's
// reshape_and_cache (its 5-D key / 4-D value layout) and reshape_and_cache_flash (NHD), one entry
// point with the layout as a field.
//
//   key, value   [num_tokens, num_kv_heads, head_dim], dims packed; token and head strides free
//                (0 = packed), so slices of a fused qkv buffer need no copy
//   key_cache    NHD [num_pages, page_size, num_kv_heads, head_dim] or
//                vLLM [num_pages, num_kv_heads, head_dim / x, page_size, x]
//                (x = 16 B / cache element: 8 for fp16/bf16, 4 for fp32, 16 for fp8)
//   value_cache  NHD as key_cache, or vLLM [num_pages, num_kv_heads, head_dim, page_size]
//                Within a page the caches are packed (muh/paged_kv.hpp); between pages a stride
//                (0 = one page: vLLM V1's [num_blocks, 2, ...] K/V interleave has 2 pages).
//   slot_mapping int64 [num_tokens]: slot = page · page_size + offset; −1 = padding (skipped).
// The cache's element type is kv.dtype (muh/kv_quant.hpp), vLLM's kv_cache_dtype:
//   same      ("auto") the caches hold the key's dtype and the copy is bitwise; the scales are not
//             read
//   fp8_e4m3, fp8_e5m2 ("fp8" / "fp8_e4m3", "fp8_e5m2") the caches hold 1-byte codes:
//             key_cache element = float_to_fp8(float(key element) / kv.k_scale, kv.dtype), the
//             value with kv.v_scale — one fp32 division, then kv_quant.hpp's rounding (to nearest,
//             ties to even; saturating to the largest finite value; NaN stays NaN). fp16 or bf16
//             key and value only; k_scale and v_scale finite and > 0. The cache strides and the
//             page-size rule count 1-byte elements.
//
// A slot outside [−1, num_pages · page_size) is a device-side value: with
// RunOptions::debug_checks, slot_mapping is copied to the host (a stream sync) and such a slot
// fails the call before the launch; without, the kernel skips the token (nothing outside the
// cache is written) and, when bad_slots is given, adds 1 to *bad_slots for it.
#pragma once

#include <cstdint>

#include "muh/attention.hpp"  // RunOptions
#include "muh/dtype.hpp"
#include "muh/kv_quant.hpp"
#include "muh/paged_kv.hpp"
#include "muh/status.hpp"

namespace muh {

struct CacheWriteParams {
  DType dtype = DType::bf16;  // of key and value (and of the caches when kv.dtype is same)
  KVLayout layout = KVLayout::nhd;
  KVQuant kv;  // the caches' element type and, for fp8, the scales (kv_quant.hpp)
  const void* key = nullptr;
  const void* value = nullptr;
  void* key_cache = nullptr;
  void* value_cache = nullptr;
  const std::int64_t* slot_mapping = nullptr;
  int* bad_slots = nullptr;  // optional device int: += 1 per out-of-range slot skipped
  int num_tokens = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int page_size = 16;
  int num_pages = 0;
  // Strides in elements (of key / value; of the caches for the page strides: bytes for fp8);
  // 0 = packed.
  std::int64_t key_token_stride = 0, key_head_stride = 0;
  std::int64_t value_token_stride = 0, value_head_stride = 0;
  std::int64_t key_cache_page_stride = 0, value_cache_page_stride = 0;
};

// Validates (no CUDA call before every host check passed, no launch on a failure), then writes.
// num_tokens 0 is a no-op.
Status reshape_and_cache(const CacheWriteParams& p, const RunOptions& opt = {});

// The host checks alone (dtypes, kv dtype and scales, shape, strides, pointers): what
// reshape_and_cache() checks before it touches the device.
Status check_cache_write(const CacheWriteParams& p);

}  // namespace muh
