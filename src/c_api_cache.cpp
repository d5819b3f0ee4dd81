// c_api_cache.cpp — the cache-write and state-merge entry points of the C ABI (muh.h): C ints
// range-checked, then muh::reshape_and_cache() / muh::merge_attn_states(), which validate the rest.
// muh_reshape_and_cache is muh_reshape_and_cache_quant with MUH_KV_AUTO (a bitwise copy).
#include <cuda_runtime_api.h>

#include <string>

#include "c_api_common.hpp"
#include "muh/cache_write.hpp"
#include "muh/merge_states.hpp"


namespace {

// muh_reshape_and_cache(_quant)'s ints and pointers as a muh::CacheWriteParams, the enums
// range-checked (a cast could otherwise wrap onto a valid value), then the call.
int reshape_and_cache_c(const char* who, int dtype, int layout, const void* key, const void* value, void* key_cache,
                        void* value_cache, const int64_t* slot_mapping, int num_tokens, int num_kv_heads, int head_dim,
                        int page_size, int num_pages, int64_t key_token_stride, int64_t value_token_stride,
                        int debug_checks, void* stream, int kv_dtype, float k_scale, float v_scale) {
  using namespace muh;
  CacheWriteParams p;
  Status s = capi::dtype_of(dtype, who, &p.dtype);
  if (!s.ok()) return capi::report(s);
  s = capi::layout_of(layout, who, &p.layout);
  if (!s.ok()) return capi::report(s);
  s = capi::kv_dtype_of(kv_dtype, who, "kv_dtype", &p.kv.dtype);
  if (!s.ok()) return capi::report(s);
  p.kv.k_scale = k_scale;
  p.kv.v_scale = v_scale;
  p.key = key;
  p.value = value;
  p.key_cache = key_cache;
  p.value_cache = value_cache;
  p.slot_mapping = slot_mapping;
  p.num_tokens = num_tokens;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.page_size = page_size;
  p.num_pages = num_pages;
  p.key_token_stride = key_token_stride;
  p.value_token_stride = value_token_stride;
  RunOptions opt;
  opt.stream = static_cast<cudaStream_t>(stream);
  opt.debug_checks = debug_checks != 0;
  return capi::report(reshape_and_cache(p, opt));
}

}  // namespace

extern "C" int muh_reshape_and_cache(int dtype, int layout, const void* key, const void* value, void* key_cache,
                                     void* value_cache, const int64_t* slot_mapping, int num_tokens, int num_kv_heads,
                                     int head_dim, int page_size, int num_pages, int64_t key_token_stride,
                                     int64_t value_token_stride, int debug_checks, void* stream) {
  return reshape_and_cache_c("reshape_and_cache: ", dtype, layout, key, value, key_cache, value_cache, slot_mapping,
                             num_tokens, num_kv_heads, head_dim, page_size, num_pages, key_token_stride,
                             value_token_stride, debug_checks, stream, MUH_KV_AUTO, 1.f, 1.f);
}

extern "C" int muh_reshape_and_cache_quant(int dtype, int layout, const void* key, const void* value, void* key_cache,
                                           void* value_cache, const int64_t* slot_mapping, int num_tokens,
                                           int num_kv_heads, int head_dim, int page_size, int num_pages,
                                           int64_t key_token_stride, int64_t value_token_stride, int debug_checks,
                                           void* stream, int kv_dtype, float k_scale, float v_scale) {
  return reshape_and_cache_c("reshape_and_cache: ", dtype, layout, key, value, key_cache, value_cache, slot_mapping,
                             num_tokens, num_kv_heads, head_dim, page_size, num_pages, key_token_stride,
                             value_token_stride, debug_checks, stream, kv_dtype, k_scale, v_scale);
}

extern "C" int muh_merge_attn_states(int dtype, void* output, float* output_lse, const void* prefix_output,
                                     const float* prefix_lse, const void* suffix_output, const float* suffix_lse,
                                     int num_tokens, int num_heads, int head_dim, void* stream) {
  using namespace muh;
  MergeStatesParams p;
  Status s = capi::dtype_of(dtype, "merge_attn_states: ", &p.dtype);
  if (!s.ok()) return capi::report(s);
  p.output = output;
  p.output_lse = output_lse;
  p.prefix_output = prefix_output;
  p.prefix_lse = prefix_lse;
  p.suffix_output = suffix_output;
  p.suffix_lse = suffix_lse;
  p.num_tokens = num_tokens;
  p.num_heads = num_heads;
  p.head_dim = head_dim;
  RunOptions opt;
  opt.stream = static_cast<cudaStream_t>(stream);
  return capi::report(merge_attn_states(p, opt));
}
