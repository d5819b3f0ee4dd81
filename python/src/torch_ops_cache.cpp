// torch_ops_cache.cpp — torch.ops.muh's cache writes and state merge, vLLM's torch.ops._C schemas
// argument for argument (csrc/torch_bindings.cpp):
//
//   reshape_and_cache        key/value [num_tokens, num_kv_heads, head_size] into vLLM's cache
//                            (key [num_blocks, num_kv_heads, head_size/x, block_size, x], value
//                            [num_blocks, num_kv_heads, head_size, block_size])
//   reshape_and_cache_flash  the same into NHD caches [num_blocks, block_size, num_kv_heads, head_size]
//   merge_attn_states        (output, output_lse?, prefix_output, prefix_lse, suffix_output,
//                            suffix_lse): _C's order (vllm/_custom_ops.py puts output_lse last;
//                            muh/ops.py's wrapper does too)
//
// The default overloads take vLLM 0.6.3's float k_scale / v_scale, the .tensor_scales overloads
// later vLLM's 0-dim (or 1-element) tensors. kv_cache_dtype:
//   'auto'                  the caches have key's dtype and the copy is bitwise; the scales are not
//                           read (as in vLLM)
//   'fp8', 'fp8_e4m3'       an e4m3 cache ('fp8' is e4m3, vLLM's meaning on CUDA), 'fp8_e5m2' an
//   'fp8_e5m2'              e5m2 one: caches of torch.uint8 (vLLM's fp8 caches) or of the matching
//                           torch.float8_e4m3fn / torch.float8_e5m2, key and value float16 or
//                           bfloat16; each element is stored as the fp8 code of x / scale (k_scale
//                           for key, v_scale for value; finite and > 0), rounded to nearest even and
//                           saturated to ±448 (e4m3) / ±57344 (e5m2), NaN kept (muh/kv_quant.hpp),
//                           and the vLLM layout's x is 16. A tensor scale is read to the host
//                           (Tensor.item()): on a CUDA tensor that is a copy and a stream
//                           synchronisation per call, and under CUDA-graph capture it raises
//                           NotImplementedError — pass float scales (or CPU tensors) there
//                           (torch_ops_common.hpp's kv_quant_of(), the decode ops' rule too).
// Any other kv_cache_dtype raises NotImplementedError naming it. slot_mapping is int64;
// num_tokens is slot_mapping.size(0), which may be less than key.size(0) (vLLM V1 pads key for
// CUDA graphs). key and value may be strided views (slices of a fused qkv buffer): their token
// and head strides go to the kernel; the head dim must be unit-stride. The caches must be packed
// within a block; the block stride is free (vLLM V1's [num_blocks, 2, ...] K/V interleave).
//
// Every op checks devices, dtypes, shapes, strides and scales first and raises ValueError (or
// NotImplementedError for what muh does not do) naming the argument; no kernel runs on bad input.
// They launch on torch's current stream and never synchronise (CUDA-graph capturable), except for
// the read of CUDA tensor scales with an fp8 kv_cache_dtype (above).
// The argument checks and the message builders are torch_ops_common.hpp's, shared with torch_ops.cpp
// (messages are built without c10::str's ostream, for the reason given there).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "muh/cache_write.hpp"
#include "muh/kv_quant.hpp"
#include "muh/merge_states.hpp"
#include "torch_ops_common.hpp"

namespace muh::torch_ops_cache {
namespace {

using torch_ops::Args;
using torch_ops::text;
using torch_ops::throw_status;

// A row stride for the C++ API, where 0 means packed: a size-1 dim's stride is irrelevant
// (packed); a stride of 0 over several rows (an expanded tensor) is refused.
int64_t row_stride(const Args& a, const at::Tensor& t, const char* arg, int64_t d, int64_t packed) {
  if (t.size(d) <= 1) return packed;
  MUH_ARG_CHECK(t.stride(d) > 0, a.op, arg, ".stride(", d, ") must be > 0, got ", t.stride(d),
                " (an expanded tensor: pass a copy)");
  return t.stride(d);
}

RunOptions on_current_stream(const at::Tensor& t) {
  RunOptions ro;
  ro.stream = at::cuda::getCurrentCUDAStream(t.get_device()).stream();
  return ro;
}

// ---- reshape_and_cache / reshape_and_cache_flash -----------------------------------------------
// ScaleArg: double (vLLM 0.6.3) or const at::Tensor& (0-dim, later vLLM); read only for fp8.
template <class ScaleArg>
void write_cache(const char* name, KVLayout layout, const at::Tensor& key, const at::Tensor& value,
                 at::Tensor& key_cache, at::Tensor& value_cache, const at::Tensor& slot_mapping,
                 std::string_view kv_cache_dtype, ScaleArg k_scale, ScaleArg v_scale) {
  const Args a{name, key.device(), "the first tensor"};
  const KVDType kv = torch_ops::kv_dtype_of(a.op, kv_cache_dtype);
  a.cuda(key, "key");
  a.dim(key, "key", 3, "[num_tokens, num_kv_heads, head_size]");
  const DType t = a.element(key, "key");
  a.cuda(value, "value");
  a.dim(value, "value", 3, "[num_tokens, num_kv_heads, head_size]");
  MUH_ARG_CHECK(value.scalar_type() == key.scalar_type(), a.op, std::string("value must be ") +
                                                               c10::toString(key.scalar_type()) + ", got " +
                                                               c10::toString(value.scalar_type()));
  MUH_ARG_CHECK(value.sizes() == key.sizes(), a.op, "value must have key's shape " + text(key.sizes()) + ", got " +
                                                  text(value.sizes()));
  MUH_ARG_CHECK(key.stride(2) == 1 || key.size(2) == 1, a.op,
                "key must have a contiguous last dimension (head_size), got strides " + text(key.strides()));
  MUH_ARG_CHECK(value.stride(2) == 1 || value.size(2) == 1, a.op,
                "value must have a contiguous last dimension (head_size), got strides " + text(value.strides()));
  const int64_t heads = key.size(1), d = key.size(2);

  a.cuda(slot_mapping, "slot_mapping");
  a.dim(slot_mapping, "slot_mapping", 1, "[num_tokens]");
  MUH_ARG_CHECK(slot_mapping.scalar_type() == at::kLong, a.op,
                std::string("slot_mapping must be int64, got ") + c10::toString(slot_mapping.scalar_type()));
  MUH_ARG_CHECK(slot_mapping.is_contiguous(), a.op, "slot_mapping must be contiguous");
  const int64_t num_tokens = slot_mapping.size(0);
  MUH_ARG_CHECK(num_tokens <= key.size(0), a.op, "slot_mapping has " + std::to_string(num_tokens) +
                                               " entries but key only " + std::to_string(key.size(0)) + " tokens");

  if (is_fp8(kv)) {
    MUH_NOT_IMPLEMENTED_CHECK(t != DType::fp32, "muh.", a.op, ": key is float32 with kv_cache_dtype='",
                              kv_cache_dtype, "': muh writes an fp8 cache from float16 or bfloat16 key and value only");
  }
  const int64_t x = 16 / kv_elem_size(kv, static_cast<int>(key.element_size()));  // 16 for fp8
  a.cuda(key_cache, "key_cache");
  torch_ops::check_kv_cache_dtype(a, key_cache, "key_cache", key, "key", kv, kv_cache_dtype);
  a.cuda(value_cache, "value_cache");
  torch_ops::check_kv_cache_dtype(a, value_cache, "value_cache", key, "key", kv, kv_cache_dtype);
  int64_t num_blocks = 0, block_size = 0;
  if (layout == KVLayout::vllm) {
    a.dim(key_cache, "key_cache", 5, "[num_blocks, num_kv_heads, head_size/x, block_size, x]");
    a.dim(value_cache, "value_cache", 4, "[num_blocks, num_kv_heads, head_size, block_size]");
    num_blocks = key_cache.size(0);
    block_size = key_cache.size(3);
    MUH_ARG_CHECK(d % x == 0, a.op, "key's head_size (" + std::to_string(d) + ") must be a multiple of x = " + std::to_string(x));
    a.size(key_cache, "key_cache", 1, heads, "num_kv_heads, as key");
    a.size(key_cache, "key_cache", 2, d / x, "head_size / x");
    a.size(key_cache, "key_cache", 4, x, "x = 16 / cache element size");
    a.size(value_cache, "value_cache", 0, num_blocks, "num_blocks, as key_cache");
    a.size(value_cache, "value_cache", 1, heads, "num_kv_heads, as key");
    a.size(value_cache, "value_cache", 2, d, "head_size, as key");
    a.size(value_cache, "value_cache", 3, block_size, "block_size, as key_cache");
  } else {
    a.dim(key_cache, "key_cache", 4, "[num_blocks, block_size, num_kv_heads, head_size] (NHD)");
    num_blocks = key_cache.size(0);
    block_size = key_cache.size(1);
    a.size(key_cache, "key_cache", 2, heads, "num_kv_heads, as key");
    a.size(key_cache, "key_cache", 3, d, "head_size, as key");
    MUH_ARG_CHECK(value_cache.sizes() == key_cache.sizes(), a.op, "value_cache must have key_cache's shape " +
                                                                text(key_cache.sizes()) + ", got " +
                                                                text(value_cache.sizes()));
  }
  MUH_ARG_CHECK(num_blocks >= 1 && block_size >= 1, a.op, "key_cache must hold at least one block of >= 1 slot, got shape " +
                                                        text(key_cache.sizes()));
  // Packed within a block; the block stride goes to the kernel.
  MUH_ARG_CHECK(key_cache[0].is_contiguous(), a.op, "key_cache must be packed within a block (key_cache[0] contiguous), "
                                              "got strides " + text(key_cache.strides()));
  MUH_ARG_CHECK(value_cache[0].is_contiguous(), a.op, "value_cache must be packed within a block (value_cache[0] "
                                                "contiguous), got strides " + text(value_cache.strides()));
  const int64_t page = block_size * heads * d;
  const KVQuant quant = torch_ops::kv_quant_of(a, kv, kv_cache_dtype, k_scale, v_scale);  // 'auto': unread
  if (num_tokens == 0) return;

  CacheWriteParams p;
  p.dtype = t;
  p.layout = layout;
  p.kv = quant;
  p.key = key.data_ptr();
  p.value = value.data_ptr();
  p.key_cache = key_cache.data_ptr();
  p.value_cache = value_cache.data_ptr();
  p.slot_mapping = slot_mapping.data_ptr<int64_t>();
  p.num_tokens = a.to_int(num_tokens, "num_tokens");
  p.num_kv_heads = a.to_int(heads, "num_kv_heads");
  p.head_dim = a.to_int(d, "head_size");
  p.page_size = a.to_int(block_size, "block_size");
  p.num_pages = a.to_int(num_blocks, "num_blocks");
  p.key_token_stride = row_stride(a, key, "key", 0, 0);
  p.key_head_stride = row_stride(a, key, "key", 1, 0);
  p.value_token_stride = row_stride(a, value, "value", 0, 0);
  p.value_head_stride = row_stride(a, value, "value", 1, 0);
  p.key_cache_page_stride = row_stride(a, key_cache, "key_cache", 0, page);
  p.value_cache_page_stride = row_stride(a, value_cache, "value_cache", 0, page);
  const c10::cuda::CUDAGuard guard(key.device());
  const Status s = reshape_and_cache(p, on_current_stream(key));
  if (!s.ok()) throw_status(s, a.op);
}

// ScaleArg: double (vLLM 0.6.3) or const at::Tensor& (0-dim, later vLLM); unread with 'auto'.
template <class ScaleArg>
void reshape_and_cache_vllm(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                            at::Tensor& value_cache, const at::Tensor& slot_mapping, c10::string_view kv_cache_dtype,
                            ScaleArg k_scale, ScaleArg v_scale) {
  write_cache<ScaleArg>("reshape_and_cache", KVLayout::vllm, key, value, key_cache, value_cache, slot_mapping,
                        std::string_view(kv_cache_dtype.data(), kv_cache_dtype.size()), k_scale, v_scale);
}

template <class ScaleArg>
void reshape_and_cache_flash(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                             at::Tensor& value_cache, const at::Tensor& slot_mapping, c10::string_view kv_cache_dtype,
                             ScaleArg k_scale, ScaleArg v_scale) {
  write_cache<ScaleArg>("reshape_and_cache_flash", KVLayout::nhd, key, value, key_cache, value_cache, slot_mapping,
                        std::string_view(kv_cache_dtype.data(), kv_cache_dtype.size()), k_scale, v_scale);
}

// ---- merge_attn_states ---------------------------------------------------------------------------
void merge_attn_states(at::Tensor& output, const std::optional<at::Tensor>& output_lse,
                       const at::Tensor& prefix_output, const at::Tensor& prefix_lse,
                       const at::Tensor& suffix_output, const at::Tensor& suffix_lse) {
  const Args a{"merge_attn_states", output.device(), "the first tensor"};
  a.cuda(output, "output");
  a.dim(output, "output", 3, "[num_tokens, num_heads, head_size]");
  const DType t = a.element(output, "output");
  const int64_t n = output.size(0), h = output.size(1), d = output.size(2);
  auto rows = [&](const at::Tensor& o, const char* arg) {
    a.cuda(o, arg);
    MUH_ARG_CHECK(o.scalar_type() == output.scalar_type(), a.op, std::string(arg) + " must be " +
                                                               c10::toString(output.scalar_type()) + ", got " +
                                                               c10::toString(o.scalar_type()));
    MUH_ARG_CHECK(o.sizes() == output.sizes(), a.op, std::string(arg) + " must have output's shape " +
                                                   text(output.sizes()) + ", got " + text(o.sizes()));
    MUH_ARG_CHECK((o.stride(2) == 1 || d == 1) && (o.stride(1) == d || h == 1), a.op,
                  std::string(arg) + " must have its heads packed (strides [*, head_size, 1]), got strides " +
                      text(o.strides()));
    return row_stride(a, o, arg, 0, 0);
  };
  auto lse = [&](const at::Tensor& l, const char* arg) {
    a.cuda(l, arg);
    MUH_ARG_CHECK(l.scalar_type() == at::kFloat, a.op, std::string(arg) + " must be float32, got " + c10::toString(l.scalar_type()));
    MUH_ARG_CHECK(l.dim() == 2 && l.size(0) == h && l.size(1) == n, a.op,
                  std::string(arg) + " must be [num_heads, num_tokens] = " + text(c10::IntArrayRef{h, n}) + ", got shape " +
                      text(l.sizes()));
    MUH_ARG_CHECK(l.is_contiguous(), a.op, std::string(arg) + " must be contiguous, got strides " + text(l.strides()));
  };
  const int64_t so = rows(output, "output");
  const int64_t sp = rows(prefix_output, "prefix_output");
  const int64_t ss = rows(suffix_output, "suffix_output");
  lse(prefix_lse, "prefix_lse");
  lse(suffix_lse, "suffix_lse");
  if (output_lse.has_value()) lse(*output_lse, "output_lse");
  if (n == 0) return;

  MergeStatesParams p;
  p.dtype = t;
  p.output = output.data_ptr();
  p.output_lse = output_lse.has_value() ? output_lse->data_ptr<float>() : nullptr;
  p.prefix_output = prefix_output.data_ptr();
  p.prefix_lse = prefix_lse.data_ptr<float>();
  p.suffix_output = suffix_output.data_ptr();
  p.suffix_lse = suffix_lse.data_ptr<float>();
  p.num_tokens = a.to_int(n, "num_tokens");
  p.num_heads = a.to_int(h, "num_heads");
  p.head_dim = a.to_int(d, "head_size");
  p.output_token_stride = so;
  p.prefix_token_stride = sp;
  p.suffix_token_stride = ss;
  const c10::cuda::CUDAGuard guard(output.device());
  const Status s = muh::merge_attn_states(p, on_current_stream(output));
  if (!s.ok()) throw_status(s, a.op);
}

}  // namespace
}  // namespace muh::torch_ops_cache

// The .tensor_scales overloads first (as torch_ops.cpp orders paged_attention's): a call tries the
// overloads in order, and a 0-dim tensor would also convert to a float through a device sync.
TORCH_LIBRARY_FRAGMENT(muh, m) {
  m.def(
      "reshape_and_cache.tensor_scales(Tensor key, Tensor value, Tensor! key_cache, Tensor! value_cache, "
      "Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> ()");
  m.def(
      "reshape_and_cache_flash.tensor_scales(Tensor key, Tensor value, Tensor! key_cache, Tensor! value_cache, "
      "Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> ()");
  m.def(
      "reshape_and_cache(Tensor key, Tensor value, Tensor! key_cache, Tensor! value_cache, "
      "Tensor slot_mapping, str kv_cache_dtype, float k_scale, float v_scale) -> ()");
  m.def(
      "reshape_and_cache_flash(Tensor key, Tensor value, Tensor! key_cache, Tensor! value_cache, "
      "Tensor slot_mapping, str kv_cache_dtype, float k_scale, float v_scale) -> ()");
  m.def(
      "merge_attn_states(Tensor! output, Tensor!? output_lse, Tensor prefix_output, Tensor prefix_lse, "
      "Tensor suffix_output, Tensor suffix_lse) -> ()");
}

// CPU inputs reach the same kernels only to be told what is wrong ("key must be a CUDA tensor").
#define MUH_CACHE_OPS_IMPL(m)                                                                              \
  m.impl("reshape_and_cache", &muh::torch_ops_cache::reshape_and_cache_vllm<double>);                     \
  m.impl("reshape_and_cache.tensor_scales", &muh::torch_ops_cache::reshape_and_cache_vllm<const at::Tensor&>); \
  m.impl("reshape_and_cache_flash", &muh::torch_ops_cache::reshape_and_cache_flash<double>);               \
  m.impl("reshape_and_cache_flash.tensor_scales",                                                          \
         &muh::torch_ops_cache::reshape_and_cache_flash<const at::Tensor&>);                               \
  m.impl("merge_attn_states", &muh::torch_ops_cache::merge_attn_states);
TORCH_LIBRARY_IMPL(muh, CUDA, m) { MUH_CACHE_OPS_IMPL(m) }
TORCH_LIBRARY_IMPL(muh, CPU, m) { MUH_CACHE_OPS_IMPL(m) }
#undef MUH_CACHE_OPS_IMPL

// No outputs to differentiate: the ops go straight to the kernels below autograd.
TORCH_LIBRARY_IMPL(muh, Autograd, m) {
  for (const char* op : {"reshape_and_cache", "reshape_and_cache.tensor_scales", "reshape_and_cache_flash",
                         "reshape_and_cache_flash.tensor_scales", "merge_attn_states"})
    m.impl(op, torch::CppFunction::makeFallthrough());
}
