// torch_ops_common.hpp — what the torch ops' files share (torch_ops.cpp: attention; torch_ops_cache.cpp:
// the cache writes and the state merge): building error messages, raising muh's Status as
// Python's exception types, and the argument checks, each naming the argument.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Device.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "muh/dtype.hpp"
#include "muh/kv_quant.hpp"
#include "muh/status.hpp"

namespace muh::torch_ops {

// ---- Errors -------------------------------------------------------------------------------------
// TORCH_CHECK_VALUE → Python ValueError; TORCH_CHECK_NOT_IMPLEMENTED → NotImplementedError (a
// RuntimeError); TORCH_CHECK → RuntimeError. Messages read "muh.<op>: <argument> ...".
//
// The message is assembled here (text()/cat() below) and handed to the TORCH_CHECK macros as one
// std::string: on the H200 machine (torch 2.11+cu130) inserting an integer into c10::str's
// ostream from this module crashed (SIGSEGV in basic_ostream::_M_insert<long>, cuda-gdb
// backtrace from check_vllm_unsupported), while string-only messages worked. So no number,
// shape or device goes through an ostream in muh's torch ops.
inline std::string text(const char* s) { return s; }
inline std::string text(const std::string& s) { return s; }
inline std::string text(std::string_view s) { return std::string(s); }
template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
std::string text(I v) { return std::to_string(v); }
inline std::string text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
inline std::string text(c10::IntArrayRef a) {
  std::string s = "[";
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + std::to_string(a[i]);
  return s + "]";
}
inline std::string text(const c10::Device& d) { return d.str(); }
inline std::string text(at::ScalarType t) { return c10::toString(t); }
template <class... T>
std::string cat(const T&... parts) {
  std::string s;
  ((s += text(parts)), ...);
  return s;
}
#define MUH_ARG_CHECK(cond, op, ...) \
  TORCH_CHECK_VALUE(cond, ::muh::torch_ops::cat("muh.", op, ": ", __VA_ARGS__))
#define MUH_NOT_IMPLEMENTED_CHECK(cond, ...) \
  TORCH_CHECK_NOT_IMPLEMENTED(cond, ::muh::torch_ops::cat(__VA_ARGS__))

[[noreturn]] inline void throw_status(const Status& s, const char* op) {
  const std::string m = std::string("muh.") + op + ": " + s.message();
  switch (s.code()) {
    case StatusCode::invalid_argument: TORCH_CHECK_VALUE(false, m);
    case StatusCode::unsupported:
    case StatusCode::not_compiled: TORCH_CHECK_NOT_IMPLEMENTED(false, m);
    default: TORCH_CHECK(false, m + " [" + status_code_name(s.code()) + "]");
  }
  // TORCH_CHECK(false, ...) always throws; this keeps [[noreturn]] honest for the compiler.
  throw std::logic_error(m);
}

inline std::optional<DType> muh_dtype(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return DType::fp16;
    case at::kBFloat16: return DType::bf16;
    case at::kFloat: return DType::fp32;
    default: return std::nullopt;
  }
}

// ---- Argument checks ----------------------------------------------------------------------------
struct Args {
  const char* op;
  c10::Device device;            // the first tensor's: every other must be on it
  const char* anchor = "query";  // what the device messages call that tensor

  void cuda(const at::Tensor& t, const char* name) const {
    MUH_ARG_CHECK(t.defined(), op, name, " is undefined");
    MUH_ARG_CHECK(t.is_cuda(), op, name, " must be a CUDA tensor, got device ", t.device());
    MUH_ARG_CHECK(t.device() == device, op, name, " is on ", t.device(), " but ", anchor, " is on ", device);
  }
  void dtype(const at::Tensor& t, const char* name, at::ScalarType want) const {
    MUH_ARG_CHECK(t.scalar_type() == want, op, name, " must be ", want, ", got ", t.scalar_type());
  }
  void dim(const at::Tensor& t, const char* name, int64_t n, const char* shape) const {
    MUH_ARG_CHECK(t.dim() == n, op, name, " must be ", n, "-D ", shape, ", got shape ", t.sizes());
  }
  void size(const at::Tensor& t, const char* name, int64_t d, int64_t want, const char* what) const {
    MUH_ARG_CHECK(t.size(d) == want, op, name, ".shape[", d, "] (", what, ") must be ", want,
                  ", got ", t.size(d), " (shape ", t.sizes(), ")");
  }
  void contiguous(const at::Tensor& t, const char* name) const {
    MUH_ARG_CHECK(t.is_contiguous(), op, name, " must be contiguous, got shape ", t.sizes(),
                  " with strides ", t.strides());
  }
  // An index tensor: int32, 1-D or 2-D as `shape` says, contiguous, on the first tensor's device.
  void index(const at::Tensor& t, const char* name, int64_t n, const char* shape) const {
    cuda(t, name);
    dim(t, name, n, shape);
    dtype(t, name, at::kInt);
    contiguous(t, name);
  }
  // q/k/v-like input: the last dim must be unit-stride (FlashAttention's and vLLM's rule); other
  // strides are allowed and handled by a contiguous copy (muh's kernels take packed rows).
  at::Tensor rows(const at::Tensor& t, const char* name) const {
    MUH_ARG_CHECK(t.stride(-1) == 1, op, name, " must have a contiguous last dimension, got strides ",
                  t.strides());
    return t.is_contiguous() ? t : t.contiguous();
  }
  DType element(const at::Tensor& t, const char* name) const {
    const auto d = muh_dtype(t.scalar_type());
    MUH_ARG_CHECK(d.has_value(), op, name, " must be float16, bfloat16 or float32, got ", t.scalar_type());
    return *d;
  }
  int to_int(int64_t v, const char* name) const {
    MUH_ARG_CHECK(v >= INT32_MIN && v <= INT32_MAX, op, name, " = ", v, " does not fit in int32");
    return static_cast<int>(v);
  }
  float scale(std::optional<double> s, const char* name) const {
    if (!s) return 0.f;  // muh: 0 → 1/sqrt(head_dim)
    MUH_ARG_CHECK(std::isfinite(*s) && *s > 0, op, name, " must be a finite number > 0, got ", *s);
    return static_cast<float>(*s);
  }
  // A per-head fp32 array of a variant (alibi_slopes, s_aux): CUDA, float32, [num_heads],
  // contiguous; its data pointer, or nullptr when not given.
  const float* per_head(const std::optional<at::Tensor>& t, const char* name, int64_t num_heads) const {
    if (!t.has_value()) return nullptr;
    cuda(*t, name);
    MUH_NOT_IMPLEMENTED_CHECK(t->dim() == 1, "muh.", op, ": ", name, " must be 1-D [num_heads] (one value per q head; "
                              "a per-batch [batch, num_heads] array is not supported), got shape ", t->sizes());
    dtype(*t, name, at::kFloat);
    size(*t, name, 0, num_heads, "num_heads, as q");
    contiguous(*t, name);
    return t->data_ptr<float>();
  }
  // The attention variant of a call (muh/variant.hpp): window_size (left, right) in
  // FlashAttention's convention (-1 = unbounded), softcap (0 = off), ALiBi slopes and sinks
  // (vLLM's s_aux) per q head. Bad values raise ValueError naming the argument.
  Variant variant(int64_t window_left, int64_t window_right, double softcap,
                  const std::optional<at::Tensor>& alibi_slopes, const std::optional<at::Tensor>& s_aux,
                  int64_t num_heads, const char* window_name = "window_size") const {
    MUH_ARG_CHECK(window_left >= -1 && window_right >= -1, op, window_name, " = (", window_left, ", ", window_right,
                  ") must hold -1 (unbounded) or sizes >= 0");
    MUH_ARG_CHECK(std::isfinite(softcap) && softcap >= 0, op, "softcap must be a finite number >= 0 (0 = off), got ",
                  softcap);
    Variant v;
    v.window_left = static_cast<int>(std::min<int64_t>(window_left, INT32_MAX));
    v.window_right = static_cast<int>(std::min<int64_t>(window_right, INT32_MAX));
    v.softcap = static_cast<float>(softcap);
    v.alibi_slopes = per_head(alibi_slopes, "alibi_slopes", num_heads);
    v.use_alibi = v.alibi_slopes != nullptr;
    v.sinks = per_head(s_aux, "s_aux", num_heads);
    v.use_sinks = v.sinks != nullptr;
    return v;
  }
};

// Whether the current stream is capturing a CUDA graph (no synchronisation allowed).
inline bool capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

// vLLM's kv_cache_dtype strings (muh/kv_quant.hpp's parse_kv_dtype): 'auto', 'fp8' (= 'fp8_e4m3',
// vLLM's meaning on CUDA), 'fp8_e4m3', 'fp8_e5m2'; any other raises NotImplementedError naming it.
inline KVDType kv_dtype_of(const char* op, std::string_view kv_cache_dtype) {
  const std::optional<KVDType> kv = parse_kv_dtype(kv_cache_dtype);
  MUH_NOT_IMPLEMENTED_CHECK(kv.has_value(), "muh.", op, ": kv_cache_dtype='", kv_cache_dtype,
                            "' is not supported (muh takes 'auto', 'fp8' (= 'fp8_e4m3'), 'fp8_e4m3' and "
                            "'fp8_e5m2')");
  return *kv;
}

// An fp8 cache's k_scale / v_scale: a float (the default overloads, vLLM 0.6.3) or a 0-dim /
// 1-element floating tensor (the .tensor_scales overloads, vLLM >= 0.6.4's layer._k_scale).
// muh takes the scales as host floats (KVQuant), so a tensor is read to the host with
// Tensor.item(): free for a CPU tensor; for a CUDA tensor a device-to-host copy on the current
// stream and a synchronisation of it on every call — the one place where these ops synchronise.
// A CUDA graph capture refuses that read, so there it raises NotImplementedError instead: pass
// float scales (or CPU tensors) to a captured call.
inline float kv_scale(const Args& /*a*/, double s, const char* /*name*/) { return static_cast<float>(s); }
inline float kv_scale(const Args& a, const at::Tensor& s, const char* name) {
  MUH_ARG_CHECK(s.defined(), a.op, name, " is undefined");
  MUH_ARG_CHECK(s.numel() == 1, a.op, name, " must hold one value (a 0-dim or 1-element tensor), got shape ",
                s.sizes());
  const at::ScalarType st = s.scalar_type();
  MUH_ARG_CHECK(st == at::kFloat || st == at::kDouble || st == at::kHalf || st == at::kBFloat16, a.op, name,
                " must be a float32 tensor (or float64 / float16 / bfloat16), got ", st);
  MUH_NOT_IMPLEMENTED_CHECK(!(s.is_cuda() && capturing()), "muh.", a.op, ": ", name,
                            " is a CUDA tensor: an fp8 kv_cache_dtype reads it to the host (a copy and a "
                            "synchronisation), which CUDA-graph capture refuses; pass float scales (the "
                            "default overload) or CPU tensors to a captured call");
  return s.item<float>();
}

// The KVQuant of a call: KVQuant{} for 'auto' (the scales are not read, as in vLLM), else the fp8
// kind and its scales, finite and > 0 as float32. ScaleArg: double or at::Tensor, as the ops'.
template <class ScaleArg>
KVQuant kv_quant_of(const Args& a, KVDType kv, std::string_view kv_cache_dtype, ScaleArg k_scale, ScaleArg v_scale) {
  if (!is_fp8(kv)) return KVQuant{};
  const KVQuant q{kv, kv_scale(a, k_scale, "k_scale"), kv_scale(a, v_scale, "v_scale")};
  MUH_ARG_CHECK(std::isfinite(q.k_scale) && q.k_scale > 0.f, a.op, "k_scale must be finite and > 0 with "
                "kv_cache_dtype='", kv_cache_dtype, "' (as a float32), got ", static_cast<double>(q.k_scale));
  MUH_ARG_CHECK(std::isfinite(q.v_scale) && q.v_scale > 0.f, a.op, "v_scale must be finite and > 0 with "
                "kv_cache_dtype='", kv_cache_dtype, "' (as a float32), got ", static_cast<double>(q.v_scale));
  return q;
}

// A KV cache's element type under vLLM's kv_cache_dtype (muh/kv_quant.hpp): with 'auto' that of
// `ref` (the query of a decode, the key of a cache write; ref_name names it) — another dtype would
// be a quantised cache 'auto' does not name; with fp8, 1-byte codes as torch.uint8 (vLLM's storage
// for fp8 caches) or the kind's torch.float8_e4m3fn / float8_e5m2. The ops' one rule for it.
inline void check_kv_cache_dtype(const Args& a, const at::Tensor& cache, const char* name, const at::Tensor& ref,
                                 const char* ref_name, KVDType kv, std::string_view kv_cache_dtype) {
  if (!is_fp8(kv)) {
    MUH_NOT_IMPLEMENTED_CHECK(cache.scalar_type() == ref.scalar_type(), "muh.", a.op, ": ", name, " dtype ",
                              cache.scalar_type(), " differs from ", ref_name, " dtype ", ref.scalar_type(),
                              " with kv_cache_dtype='", kv_cache_dtype, "' (an fp8 cache is uint8 or float8 with "
                              "kv_cache_dtype 'fp8', 'fp8_e4m3' or 'fp8_e5m2'; muh has no other quantised cache)");
    return;
  }
  const at::ScalarType fp8 = kv == KVDType::fp8_e4m3 ? at::kFloat8_e4m3fn : at::kFloat8_e5m2;
  MUH_ARG_CHECK(cache.scalar_type() == at::kByte || cache.scalar_type() == fp8, a.op, name, " must be uint8 or ",
                fp8, " (1-byte ", kv_dtype_name(kv), " codes) with kv_cache_dtype='", kv_cache_dtype, "', got ",
                cache.scalar_type());
}

}  // namespace muh::torch_ops
