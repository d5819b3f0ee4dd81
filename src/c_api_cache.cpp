// c_api_cache.cpp — the cache-write and state-merge entry points of the C ABI (muh.h): C ints
// range-checked, then muh::reshape_and_cache() / muh::merge_attn_states(), which validate the rest.
#include <cuda_runtime_api.h>

#include <string>

#include "c_api_common.hpp"
#include "muh/cache_write.hpp"
#include "muh/merge_states.hpp"


extern "C" int muh_reshape_and_cache(int dtype, int layout, const void* key, const void* value, void* key_cache,
                                     void* value_cache, const int64_t* slot_mapping, int num_tokens, int num_kv_heads,
                                     int head_dim, int page_size, int num_pages, int64_t key_token_stride,
                                     int64_t value_token_stride, int debug_checks, void* stream) {
  using namespace muh;
  CacheWriteParams p;
  Status s = capi::dtype_of(dtype, "reshape_and_cache: ", &p.dtype);
  if (!s.ok()) return capi::report(s);
  s = capi::layout_of(layout, "reshape_and_cache: ", &p.layout);
  if (!s.ok()) return capi::report(s);
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
