// merge_states.cu — muh::merge_attn_states(): validate on the host, then launch
// kernels/merge_states.cuh with 16-byte chunks where every pointer and stride allows them.
//
// What is checked, in order (each failure is one line and no launch): dtype in range; num_tokens
// >= 0; num_heads, head_dim >= 1; token strides 0 (packed) or at least a token's
// num_heads · head_dim elements; with work, the pointers: non-null (output_lse may be), aligned
// to the element (the lse to 4 B); output either the very prefix_output or suffix_output (same
// pointer and stride: in place) or apart from both; output_lse apart from both input lse (its
// row is written while the row's other threads read theirs). Then the device (no_device).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "pointer_checks.hpp"
#include "muh/hardware.hpp"
#include "muh/kernels/launch_status.hpp"
#include "muh/kernels/merge_states.cuh"
#include "muh/merge_states.hpp"

namespace muh {
namespace {

constexpr const char* kWho = "merge_attn_states: ";

std::string num(long long v) { return std::to_string(v); }

std::int64_t packed_or(std::int64_t stride, const MergeStatesParams& p) {
  return stride ? stride : static_cast<std::int64_t>(p.num_heads) * p.head_dim;
}

// Byte ranges [begin, end) of an output-like tensor and an lse.
struct Range {
  std::uintptr_t begin, end;
};
Range rows_range(const void* base, std::int64_t token_stride, const MergeStatesParams& p) {
  const std::uintptr_t b = reinterpret_cast<std::uintptr_t>(base);
  const std::int64_t elems = (p.num_tokens - 1) * token_stride + static_cast<std::int64_t>(p.num_heads) * p.head_dim;
  return {b, b + static_cast<std::uintptr_t>(elems) * dtype_size(p.dtype)};
}
Range lse_range(const float* base, const MergeStatesParams& p) {
  const std::uintptr_t b = reinterpret_cast<std::uintptr_t>(base);
  return {b, b + static_cast<std::uintptr_t>(p.num_tokens) * p.num_heads * sizeof(float)};
}
bool overlap(Range a, Range b) { return a.begin < b.end && b.begin < a.end; }

template <class T>
Status launch(const MergeStatesParams& p, cudaStream_t stream) {
  using namespace kernels::merge_states;
  MergeStatesArgs a;
  a.out = p.output;
  a.out_lse = p.output_lse;
  a.prefix = p.prefix_output;
  a.prefix_lse = p.prefix_lse;
  a.suffix = p.suffix_output;
  a.suffix_lse = p.suffix_lse;
  a.num_tokens = p.num_tokens;
  a.num_heads = p.num_heads;
  a.head_dim = p.head_dim;
  a.out_stride = packed_or(p.output_token_stride, p);
  a.prefix_stride = packed_or(p.prefix_token_stride, p);
  a.suffix_stride = packed_or(p.suffix_token_stride, p);
  constexpr int kVec = 16 / sizeof(T);
  using detail::is_aligned;
  auto whole = [](std::int64_t s) { return s % kVec == 0; };
  const bool wide = p.head_dim % kVec == 0 && is_aligned(a.out, 16) && is_aligned(a.prefix, 16) &&
                    is_aligned(a.suffix, 16) && whole(a.out_stride) && whole(a.prefix_stride) && whole(a.suffix_stride);
  const int vec = wide ? kVec : 1;
  const std::int64_t threads = static_cast<std::int64_t>(p.num_tokens) * p.num_heads * (p.head_dim / vec);
  const std::int64_t blocks = (threads + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return invalid_argument(std::string(kWho) + "the problem needs more than 2^31 - 1 CTAs");
  if (wide)
    merge_states_kernel<T, kVec><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  else
    merge_states_kernel<T, 1><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  return kernels::launch_status("merge_attn_states: launch");
}

}  // namespace

Status check_merge_states(const MergeStatesParams& p) {
  const std::string w = kWho;
  if (static_cast<int>(p.dtype) > static_cast<int>(DType::fp32))
    return invalid_argument(w + "dtype " + num(static_cast<int>(p.dtype)) + " is not fp16, bf16 or fp32");
  if (p.num_tokens < 0) return invalid_argument(w + "num_tokens must be >= 0, got " + num(p.num_tokens));
  if (p.num_heads < 1) return invalid_argument(w + "num_heads must be >= 1, got " + num(p.num_heads));
  if (p.head_dim < 1) return invalid_argument(w + "head_dim must be >= 1, got " + num(p.head_dim));
  const std::int64_t row = static_cast<std::int64_t>(p.num_heads) * p.head_dim;
  const std::pair<const char*, std::int64_t> strides[] = {{"output_token_stride", p.output_token_stride},
                                                          {"prefix_token_stride", p.prefix_token_stride},
                                                          {"suffix_token_stride", p.suffix_token_stride}};
  for (const auto& [name, s] : strides)
    if (s != 0 && s < row)
      return invalid_argument(w + name + " " + num(s) + " must be 0 (packed) or at least num_heads * head_dim = " +
                              num(row));
  if (p.num_tokens == 0) return Status::Ok();  // no pointer is read

  const std::pair<const char*, const void*> ptrs[] = {{"output", p.output},
                                                      {"prefix_output", p.prefix_output},
                                                      {"suffix_output", p.suffix_output},
                                                      {"prefix_lse", p.prefix_lse},
                                                      {"suffix_lse", p.suffix_lse}};
  for (const auto& [name, ptr] : ptrs)
    if (ptr == nullptr) return invalid_argument(w + name + " is null");
  const std::size_t elem = static_cast<std::size_t>(dtype_size(p.dtype));
  for (int i = 0; i < 3; ++i)
    if (!detail::is_aligned(ptrs[i].second, elem))
      return invalid_argument(w + ptrs[i].first + " must be aligned to its " + num(long(elem)) + "-byte element");
  for (int i = 3; i < 5; ++i)
    if (!detail::is_aligned(ptrs[i].second, 4)) return invalid_argument(w + ptrs[i].first + " must be 4-byte aligned");
  if (!detail::is_aligned(p.output_lse, 4)) return invalid_argument(w + "output_lse must be 4-byte aligned");

  const std::int64_t so = packed_or(p.output_token_stride, p);
  const Range out = rows_range(p.output, so, p);
  const std::pair<const char*, std::pair<const void*, std::int64_t>> inputs[] = {
      {"prefix_output", {p.prefix_output, packed_or(p.prefix_token_stride, p)}},
      {"suffix_output", {p.suffix_output, packed_or(p.suffix_token_stride, p)}}};
  for (const auto& [name, in] : inputs) {
    const bool in_place = in.first == p.output && in.second == so;
    if (!in_place && overlap(out, rows_range(in.first, in.second, p)))
      return invalid_argument(w + "output overlaps " + name +
                              " (allowed only in place: the same pointer and token stride)");
  }
  if (p.output_lse != nullptr) {
    const Range ol = lse_range(p.output_lse, p);
    if (overlap(ol, lse_range(p.prefix_lse, p)) || overlap(ol, lse_range(p.suffix_lse, p)))
      return invalid_argument(w + "output_lse overlaps prefix_lse or suffix_lse (a row's lse is read by all its "
                              "threads while one writes output_lse)");
    if (overlap(ol, out)) return invalid_argument(w + "output_lse overlaps output");
  }
  return Status::Ok();
}

Status merge_attn_states(const MergeStatesParams& p, const RunOptions& opt) {
  MUH_TRY(check_merge_states(p));
  if (p.num_tokens == 0) return Status::Ok();  // nothing to write
  HardwareCapability hw;
  MUH_TRY(device_profile(-1, &hw));
  switch (p.dtype) {
    case DType::fp16: return launch<__half>(p, opt.stream);
    case DType::bf16: return launch<__nv_bfloat16>(p, opt.stream);
    case DType::fp32: return launch<float>(p, opt.stream);
  }
  return invalid_argument(std::string(kWho) + "dtype not handled");
}

}  // namespace muh
