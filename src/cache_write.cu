// cache_write.cu — muh::reshape_and_cache(): validate on the host (no CUDA call before every check
// passed), then launch kernels/cache_write.cuh with 16-byte chunks (a copy) or 16-byte loads and
// 8-byte stores of codes (fp8) where every pointer and stride allows them.
//
// What is checked, in order (each failure is one line and no launch): dtype, layout and kv dtype
// in range; for an fp8 kv dtype, fp16 or bf16 key and value (fp32: unsupported) and k_scale,
// v_scale finite and > 0 (a `same` cache reads neither); num_tokens >= 0; num_kv_heads, head_dim,
// page_size, num_pages >= 1; head_dim a multiple of x (vLLM layout; x = 16 B / cache element);
// strides >= 0, the cache page strides at least one page (pages must not overlap: they are
// written); with work, the pointers: non-null, key and value aligned to their element, the caches
// to theirs (1 byte for fp8), slot_mapping to 8 B, bad_slots to 4 B. Then the device (no device →
// no_device) and, with RunOptions::debug_checks, every slot in [−1, num_pages · page_size).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kv_quant_check.hpp"
#include "pointer_checks.hpp"
#include "muh/cache_write.hpp"
#include "muh/hardware.hpp"
#include "muh/kernels/cache_write.cuh"
#include "muh/kernels/launch_status.hpp"

namespace muh {
namespace {

constexpr const char* kWho = "reshape_and_cache: ";

std::string num(long long v) { return std::to_string(v); }

// Bytes of one cache element: the key's dtype, or 1 for fp8.
int cache_elem_size(const CacheWriteParams& p) { return kv_elem_size(p.kv.dtype, dtype_size(p.dtype)); }

// The x of vLLM's key layout: cache elements per 16 bytes.
int elems_per_16_bytes(const CacheWriteParams& p) { return 16 / cache_elem_size(p); }

kernels::cache_write::CacheWriteArgs make_args(const CacheWriteParams& p) {
  kernels::cache_write::CacheWriteArgs a;
  a.key = p.key;
  a.value = p.value;
  a.key_cache = p.key_cache;
  a.value_cache = p.value_cache;
  a.slot_mapping = p.slot_mapping;
  a.bad_slots = p.bad_slots;
  a.shape.layout = p.layout;
  a.shape.page_size = p.page_size;
  a.shape.num_kv_heads = p.num_kv_heads;
  a.shape.head_dim = p.head_dim;
  a.shape.x = elems_per_16_bytes(p);
  a.num_tokens = p.num_tokens;
  a.num_slots = static_cast<std::int64_t>(p.num_pages) * p.page_size;
  const std::int64_t row = static_cast<std::int64_t>(p.num_kv_heads) * p.head_dim;
  a.key_head_stride = p.key_head_stride ? p.key_head_stride : p.head_dim;
  a.value_head_stride = p.value_head_stride ? p.value_head_stride : p.head_dim;
  a.key_token_stride = p.key_token_stride ? p.key_token_stride : row;
  a.value_token_stride = p.value_token_stride ? p.value_token_stride : row;
  a.key_page_stride = p.key_cache_page_stride ? p.key_cache_page_stride : a.shape.page_elems();
  a.value_page_stride = p.value_cache_page_stride ? p.value_cache_page_stride : a.shape.page_elems();
  a.k_scale = p.kv.k_scale;
  a.v_scale = p.kv.v_scale;
  return a;
}

// Chunks of vec elements need the bases aligned to a chunk (vec · in_bytes for key and value,
// vec · out_bytes for the caches) and strides that are whole chunks (then every chunk of both
// layouts is aligned: head_dim and x are multiples of vec). The copy: 16 bytes in, 16 out; fp8:
// 16 bytes of 16-bit elements in, 8 bytes of codes out.
bool can_vectorize(const kernels::cache_write::CacheWriteArgs& a, int vec, std::size_t in_bytes,
                   std::size_t out_bytes) {
  using detail::is_aligned;
  auto whole = [vec](std::int64_t s) { return s % vec == 0; };
  const std::size_t in = vec * in_bytes, out = vec * out_bytes;
  return a.shape.head_dim % vec == 0 && is_aligned(a.key, in) && is_aligned(a.value, in) &&
         is_aligned(a.key_cache, out) && is_aligned(a.value_cache, out) && whole(a.key_token_stride) &&
         whole(a.key_head_stride) && whole(a.value_token_stride) && whole(a.value_head_stride) &&
         whole(a.key_page_stride) && whole(a.value_page_stride);
}

template <class E>
Status launch(const kernels::cache_write::CacheWriteArgs& a, cudaStream_t stream) {
  using namespace kernels::cache_write;
  constexpr int kVec = 16 / sizeof(E);
  const dim3 grid(a.num_tokens), block(kThreads);
  if (can_vectorize(a, kVec, sizeof(E), sizeof(E)))
    cache_write_kernel<E, kVec><<<grid, block, 0, stream>>>(a);
  else
    cache_write_kernel<E, 1><<<grid, block, 0, stream>>>(a);
  return kernels::launch_status("reshape_and_cache: launch");
}

template <DType In, KVDType Kv>
Status launch_fp8(const kernels::cache_write::CacheWriteArgs& a, cudaStream_t stream) {
  using namespace kernels::cache_write;
  constexpr int kVec = 8;  // 16 bytes of key / value, 8 bytes of codes
  const dim3 grid(a.num_tokens), block(kThreads);
  if (can_vectorize(a, kVec, 2, 1))
    cache_write_fp8_kernel<In, Kv, kVec><<<grid, block, 0, stream>>>(a);
  else
    cache_write_fp8_kernel<In, Kv, 1><<<grid, block, 0, stream>>>(a);
  return kernels::launch_status("reshape_and_cache: launch");
}

// The launch for a checked call: a copy per element size, or fp8 per (dtype, kind).
Status launch_for(const CacheWriteParams& p, const kernels::cache_write::CacheWriteArgs& a, cudaStream_t stream) {
  if (!is_fp8(p.kv.dtype))
    return dtype_size(p.dtype) == 2 ? launch<std::uint16_t>(a, stream) : launch<std::uint32_t>(a, stream);
  const bool e4m3 = p.kv.dtype == KVDType::fp8_e4m3;
  if (p.dtype == DType::fp16)
    return e4m3 ? launch_fp8<DType::fp16, KVDType::fp8_e4m3>(a, stream)
                : launch_fp8<DType::fp16, KVDType::fp8_e5m2>(a, stream);
  return e4m3 ? launch_fp8<DType::bf16, KVDType::fp8_e4m3>(a, stream)
              : launch_fp8<DType::bf16, KVDType::fp8_e5m2>(a, stream);
}

// debug_checks: slot_mapping to the host; every slot in [−1, num_slots).
Status check_slots(const CacheWriteParams& p, cudaStream_t stream) {
  std::vector<std::int64_t> slots(p.num_tokens);
  cudaError_t e = cudaMemcpyAsync(slots.data(), p.slot_mapping, sizeof(std::int64_t) * slots.size(),
                                  cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return {StatusCode::cuda_error, std::string(kWho) + "reading slot_mapping: " + cudaGetErrorString(e)};
  const std::int64_t num_slots = static_cast<std::int64_t>(p.num_pages) * p.page_size;
  for (int t = 0; t < p.num_tokens; ++t)
    if (kernels::cache_write::classify(slots[t], num_slots) == kernels::cache_write::Slot::out_of_range)
      return invalid_argument(kWho + std::string("slot_mapping[") + num(t) + "] = " + num(slots[t]) +
                              " is outside [-1, num_pages * page_size = " + num(num_slots) + ")");
  return Status::Ok();
}

}  // namespace

Status check_cache_write(const CacheWriteParams& p) {
  const std::string w = kWho;
  if (static_cast<int>(p.dtype) > static_cast<int>(DType::fp32))
    return invalid_argument(w + "dtype " + num(static_cast<int>(p.dtype)) + " is not fp16, bf16 or fp32");
  if (p.layout != KVLayout::nhd && p.layout != KVLayout::vllm)
    return invalid_argument(w + "layout " + num(static_cast<int>(p.layout)) + " is not nhd or vllm");
  MUH_TRY(detail::check_kv_quant_values(p.kv, w));
  if (is_fp8(p.kv.dtype) && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return unsupported(w + "dtype " + std::string(dtype_name(p.dtype)) + " with an " +
                       std::string(kv_dtype_name(p.kv.dtype)) +
                       " cache: an fp8 cache is written from fp16 or bf16 key and value only");
  if (p.num_tokens < 0) return invalid_argument(w + "num_tokens must be >= 0, got " + num(p.num_tokens));
  if (p.num_kv_heads < 1) return invalid_argument(w + "num_kv_heads must be >= 1, got " + num(p.num_kv_heads));
  if (p.head_dim < 1) return invalid_argument(w + "head_dim must be >= 1, got " + num(p.head_dim));
  if (p.page_size < 1) return invalid_argument(w + "page_size must be >= 1, got " + num(p.page_size));
  if (p.num_pages < 1) return invalid_argument(w + "num_pages must be >= 1, got " + num(p.num_pages));
  const int x = elems_per_16_bytes(p);
  const std::string cache_elem(is_fp8(p.kv.dtype) ? kv_dtype_name(p.kv.dtype) : dtype_name(p.dtype));
  if (p.layout == KVLayout::vllm && p.head_dim % x != 0)
    return invalid_argument(w + "head_dim " + num(p.head_dim) + " must be a multiple of x = " + num(x) +
                            " (16 bytes of " + cache_elem + ") in the vllm key layout");
  const std::pair<const char*, std::int64_t> strides[] = {
      {"key_token_stride", p.key_token_stride},          {"key_head_stride", p.key_head_stride},
      {"value_token_stride", p.value_token_stride},      {"value_head_stride", p.value_head_stride},
      {"key_cache_page_stride", p.key_cache_page_stride}, {"value_cache_page_stride", p.value_cache_page_stride}};
  for (const auto& [name, s] : strides)
    if (s < 0) return invalid_argument(w + name + " must be >= 0 (0 = packed), got " + num(s));
  const std::int64_t page = static_cast<std::int64_t>(p.page_size) * p.num_kv_heads * p.head_dim;
  if (p.key_cache_page_stride != 0 && p.key_cache_page_stride < page)
    return invalid_argument(w + "key_cache_page_stride " + num(p.key_cache_page_stride) +
                            " is less than one page (" + num(page) + " elements): pages would overlap");
  if (p.value_cache_page_stride != 0 && p.value_cache_page_stride < page)
    return invalid_argument(w + "value_cache_page_stride " + num(p.value_cache_page_stride) +
                            " is less than one page (" + num(page) + " elements): pages would overlap");
  if (p.num_tokens == 0) return Status::Ok();  // no pointer is read

  const std::pair<const char*, const void*> ptrs[] = {{"key", p.key},
                                                      {"value", p.value},
                                                      {"key_cache", p.key_cache},
                                                      {"value_cache", p.value_cache},
                                                      {"slot_mapping", p.slot_mapping}};
  for (const auto& [name, ptr] : ptrs)
    if (ptr == nullptr) return invalid_argument(w + name + " is null");
  // key and value to their element; the caches to theirs (the key's dtype, or 1 byte: fp8).
  const std::size_t elems[] = {static_cast<std::size_t>(dtype_size(p.dtype)),
                               static_cast<std::size_t>(cache_elem_size(p))};
  for (int i = 0; i < 4; ++i)
    if (!detail::is_aligned(ptrs[i].second, elems[i / 2]))
      return invalid_argument(w + ptrs[i].first + " must be aligned to its " + num(long(elems[i / 2])) +
                              "-byte element");
  if (!detail::is_aligned(p.slot_mapping, 8)) return invalid_argument(w + "slot_mapping must be 8-byte aligned (int64)");
  if (!detail::is_aligned(p.bad_slots, 4)) return invalid_argument(w + "bad_slots must be 4-byte aligned (int)");
  return Status::Ok();
}

Status reshape_and_cache(const CacheWriteParams& p, const RunOptions& opt) {
  MUH_TRY(check_cache_write(p));
  if (p.num_tokens == 0) return Status::Ok();  // nothing to write
  HardwareCapability hw;
  MUH_TRY(device_profile(-1, &hw));
  if (opt.debug_checks) MUH_TRY(check_slots(p, opt.stream));
  return launch_for(p, make_args(p), opt.stream);
}

}  // namespace muh
