// decode.cu — muh::paged_decode(): validate on the host (no CUDA call before every check passed),
// check the plan against the call, then call the (dtype, head_dim) instance that launches the
// plan's policy (kernels/decode_launch.cuh).
//
// What is checked, in order (each failure is one line and no launch):
//   the call's inputs (decode_check.hpp, check_decode_call: dtype, head_dim supported, layout,
//   heads, page size, lengths, block-table coverage, softmax_scale; then, with work, the instance
//   compiled and the pointers: non-null, 16-byte aligned q, k_cache, v_cache, out; 4-byte aligned
//   lse, block_table, seq_lens); the plan (made, and for this dtype, head_dim, heads and target;
//   num_seqs / max_seq_len equal to the plan's, or within a cuda_graph plan's capacity); the
//   workspace (pointer_checks.hpp: size >= plan.workspace_bytes, 16-byte aligned).
// Only then the device, from its cached profile (hardware.hpp, device_profile(): no attribute
// query per call): no device → no_device; a plan target newer than the device, or a policy that
// needs more shared memory than the device grants → unsupported. With
// RunOptions::debug_checks, seq_lens and the block table are copied to the host (a stream sync)
// and every seq_len must be in [0, max_seq_len] and every block id a sequence uses in
// [0, num_pages). Without them the kernels guard the same inputs themselves (muh/input_errors.hpp):
// a bad seq_len or block id drops its sequence (out = 0, lse = −inf) and is flagged in
// RunOptions::input_errors (the library's flags by default; check_input_errors() reads them).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "decode_check.hpp"
#include "pointer_checks.hpp"
#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/instances.hpp"
#include "muh/kernels/decode_common.cuh"
#include "muh/kernels/decode_instance.cuh"
#include "muh/kernels/variant.cuh"
#include "muh/launch_args.cuh"

namespace muh {
namespace detail {

// The specialisations the instance files define (one per compiled (dtype, head_dim)).
#define MUH_DECLARE_DECODE_INSTANCE(t, d)                                                     \
  template <>                                                                                 \
  Status decode_instance<DType::t, d>(const kernels::decode::DecodeArgs&, KVLayout, int, int, \
                                      cudaStream_t, int*);
MUH_FOR_EACH_INSTANCE(MUH_DECLARE_DECODE_INSTANCE)
#undef MUH_DECLARE_DECODE_INSTANCE
#define MUH_DECLARE_DECODE_WIDE_INSTANCE(t, d)                                                     \
  template <>                                                                                      \
  Status decode_wide_instance<DType::t, d>(const kernels::decode::DecodeArgs&, KVLayout, int, int, \
                                           cudaStream_t, int*, bool*);
MUH_FOR_EACH_INSTANCE(MUH_DECLARE_DECODE_WIDE_INSTANCE)
#undef MUH_DECLARE_DECODE_WIDE_INSTANCE
#define MUH_DECLARE_DECODE_FP8_INSTANCE(k, t, d)                                                          \
  template <>                                                                                           \
  Status decode_fp8_instance<KVDType::k, DType::t, d>(const kernels::decode::DecodeArgs&,                \
                                                      const kernels::VariantArgs*, KVLayout, int, int, \
                                                      cudaStream_t, int*);
MUH_FOR_EACH_FP8_INSTANCE(MUH_DECLARE_DECODE_FP8_INSTANCE)
#undef MUH_DECLARE_DECODE_FP8_INSTANCE
#if MUH_VARIANT_GENERAL
#define MUH_DECLARE_DECODE_GENERAL_INSTANCE(t, d)                                                              \
  template <>                                                                                                \
  Status decode_general_instance<DType::t, d>(const kernels::decode::DecodeArgs&, const kernels::VariantArgs&, \
                                              KVLayout, int, int, cudaStream_t, int*);
MUH_FOR_EACH_GENERAL_INSTANCE(MUH_DECLARE_DECODE_GENERAL_INSTANCE)
#undef MUH_DECLARE_DECODE_GENERAL_INSTANCE
#endif

namespace {
#if MUH_VARIANT_GENERAL
using DecodeGeneralInstanceFn = Status (*)(const kernels::decode::DecodeArgs&, const kernels::VariantArgs&, KVLayout,
                                           int, int, cudaStream_t, int*);
#define MUH_DECODE_GENERAL_INSTANCE_ENTRY(t, d) \
  InstanceEntry<DecodeGeneralInstanceFn>{DType::t, d, &decode_general_instance<DType::t, d>},
constexpr InstanceEntry<DecodeGeneralInstanceFn> kDecodeGeneralInstances[] = {
    MUH_FOR_EACH_GENERAL_INSTANCE(MUH_DECODE_GENERAL_INSTANCE_ENTRY) {DType::fp32, 0, nullptr}};  // (sentinel)
#undef MUH_DECODE_GENERAL_INSTANCE_ENTRY
#endif

using DecodeInstanceFn = Status (*)(const kernels::decode::DecodeArgs&, KVLayout, int, int, cudaStream_t, int*);

// The fp8 KV-cache instances (kernels/decode_instance.cuh), looked up by (fp8 type, dtype, head_dim).
using DecodeFp8InstanceFn = Status (*)(const kernels::decode::DecodeArgs&, const kernels::VariantArgs*, KVLayout, int,
                                       int, cudaStream_t, int*);
#define MUH_DECODE_FP8_INSTANCE_ENTRY(k, t, d) \
  Fp8InstanceEntry<DecodeFp8InstanceFn>{KVDType::k, DType::t, d, &decode_fp8_instance<KVDType::k, DType::t, d>},
constexpr Fp8InstanceEntry<DecodeFp8InstanceFn> kDecodeFp8Instances[] = {
    MUH_FOR_EACH_FP8_INSTANCE(MUH_DECODE_FP8_INSTANCE_ENTRY){KVDType::same, DType::fp32, 0, nullptr}};  // (sentinel)
#undef MUH_DECODE_FP8_INSTANCE_ENTRY

#define MUH_DECODE_INSTANCE_ENTRY(t, d) InstanceEntry<DecodeInstanceFn>{DType::t, d, &decode_instance<DType::t, d>},
constexpr InstanceEntry<DecodeInstanceFn> kDecodeInstances[] = {MUH_FOR_EACH_INSTANCE(MUH_DECODE_INSTANCE_ENTRY)};
#undef MUH_DECODE_INSTANCE_ENTRY
using DecodeWideInstanceFn = Status (*)(const kernels::decode::DecodeArgs&, KVLayout, int, int, cudaStream_t, int*,
                                        bool*);
#define MUH_DECODE_WIDE_INSTANCE_ENTRY(t, d) \
  InstanceEntry<DecodeWideInstanceFn>{DType::t, d, &decode_wide_instance<DType::t, d>},
constexpr InstanceEntry<DecodeWideInstanceFn> kDecodeWideInstances[] = {
    MUH_FOR_EACH_INSTANCE(MUH_DECODE_WIDE_INSTANCE_ENTRY)};
#undef MUH_DECODE_WIDE_INSTANCE_ENTRY

Status check_plan(const DecodeParams& p, const DecodePlan& plan) {
  const std::string w = "paged_decode: ";
  auto num = [](long long v) { return std::to_string(v); };
  if (plan.target < 0) return invalid_argument(w + "the plan is empty (make it with plan_decode())");
  if (plan.dtype != p.dtype || plan.head_dim != p.head_dim || plan.num_q_heads != p.num_q_heads ||
      plan.num_kv_heads != p.num_kv_heads)
    return invalid_argument(w + "the plan was made for " + std::string(dtype_name(plan.dtype)) + ", head_dim " +
                            num(plan.head_dim) + ", " + num(plan.num_q_heads) + "/" + num(plan.num_kv_heads) +
                            " heads; the call has " + std::string(dtype_name(p.dtype)) + ", head_dim " +
                            num(p.head_dim) + ", " + num(p.num_q_heads) + "/" + num(p.num_kv_heads));
  if (plan.cuda_graph) {
    if (p.num_seqs > plan.num_seqs || p.max_seq_len > plan.max_seq_len)
      return invalid_argument(w + "num_seqs " + num(p.num_seqs) + " / max_seq_len " + num(p.max_seq_len) +
                              " exceed the cuda_graph plan's capacity (" + num(plan.num_seqs) + " / " +
                              num(plan.max_seq_len) + ")");
  } else if (p.num_seqs != plan.num_seqs || p.max_seq_len != plan.max_seq_len) {
    return invalid_argument(w + "the plan was made for num_seqs " + num(plan.num_seqs) + ", max_seq_len " +
                            num(plan.max_seq_len) + "; the call has " + num(p.num_seqs) + ", " +
                            num(p.max_seq_len) + " (re-plan, or plan with cuda_graph for a capacity)");
  }
  if (plan.num_splits < 1 || (plan.num_splits > 1 && (plan.partition_tokens < 16 || plan.partition_tokens % 16)) ||
      plan.use_v2 != (plan.num_splits > 1) || plan.num_splits > 65535)
    return invalid_argument(w + "the plan is inconsistent (num_splits " + num(plan.num_splits) +
                            ", partition_tokens " + num(plan.partition_tokens) + ")");
  if (plan.wide ? !has_decode_wide_policy(plan.target, plan.dtype, plan.head_dim) ||
                      !(plan.policy == decode_wide_policy(plan.target, plan.dtype, plan.head_dim))
                : !(plan.policy == decode_policy(plan.target, plan.dtype, plan.head_dim)))
    return invalid_argument(w + "the plan's policy is not target " + num(plan.target) + "'s " +
                            (plan.wide ? "wide " : "") + "decode policy");
  if (plan.kv_dtype != p.kv.dtype)
    return invalid_argument(w + "the plan was made for a KV cache of " + std::string(kv_dtype_name(plan.kv_dtype)) +
                            " and the call's is " + std::string(kv_dtype_name(p.kv.dtype)) + "; re-plan for this call");
  if (plan.variant != variant_kind(p.variant))
    return invalid_argument(w + "the plan was made for the " + variant_kind_name(plan.variant) +
                            " variant kind and the call is of the " + variant_kind_name(variant_kind(p.variant)) +
                            " kind (variant: " + describe_variant(p.variant) + "); re-plan for this call");
  return Status::Ok();
}

// debug_checks: seq_lens and the block table to the host; every length and used block id in range.
Status check_device_tables(const DecodeParams& p, cudaStream_t stream) {
  std::vector<int> lens(p.num_seqs), table(static_cast<std::size_t>(p.num_seqs) * p.max_blocks_per_seq);
  cudaError_t e = cudaMemcpyAsync(lens.data(), p.seq_lens, sizeof(int) * lens.size(), cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(table.data(), p.block_table, sizeof(int) * table.size(), cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess)
    return {StatusCode::cuda_error, std::string("paged_decode: reading seq_lens / block_table: ") + cudaGetErrorString(e)};
  for (int s = 0; s < p.num_seqs; ++s) {
    const int len = lens[s];
    if (len < 0 || len > p.max_seq_len)
      return invalid_argument("paged_decode: seq_lens[" + std::to_string(s) + "] = " + std::to_string(len) +
                              " is outside [0, max_seq_len = " + std::to_string(p.max_seq_len) + "]");
    const int used = (len + p.page_size - 1) / p.page_size;
    for (int b = 0; b < used; ++b) {
      const int id = table[static_cast<std::size_t>(s) * p.max_blocks_per_seq + b];
      if (id < 0 || id >= p.num_pages)
        return invalid_argument("paged_decode: block_table[" + std::to_string(s) + "][" + std::to_string(b) +
                                "] = " + std::to_string(id) + " is outside [0, num_pages = " +
                                std::to_string(p.num_pages) + ")");
    }
  }
  return Status::Ok();
}

int log2_int(int x) {
  int s = 0;
  while ((1 << s) < x) ++s;
  return s;
}

// params.hpp's qk_scale of the call — for both the kernels' scale_log2 (make_decode_args) and the
// variant hooks' raw-score constants (v_scale: DecodeArgs::v_scale).
float qk_scale(const DecodeParams& p) { return muh::qk_scale(p.softmax_scale, p.head_dim, p.kv); }

// The general variant kind's kernel argument of a call: its window sides are bounded by every
// length the kernels accept (the block table's reach; a seq_len may exceed max_seq_len).
kernels::VariantArgs decode_variant_args(const DecodeParams& p) {
  return kernels::make_variant_args(
      p.variant, qk_scale(p), true, 1,
      static_cast<int>(std::min<long long>(static_cast<long long>(p.max_blocks_per_seq) * p.page_size, 1 << 30)));
}

}  // namespace
}  // namespace detail

Status paged_decode(const DecodeParams& p, const DecodePlan& plan, void* workspace, std::size_t workspace_bytes,
                    const RunOptions& opt) {
  MUH_TRY(detail::check_decode_call(p));
  return detail::paged_decode_unchecked(p, plan, workspace, workspace_bytes, opt);
}

Status detail::paged_decode_unchecked(const DecodeParams& p, const DecodePlan& plan, void* workspace,
                                      std::size_t workspace_bytes, const RunOptions& opt) {
  MUH_TRY(detail::check_plan(p, plan));
  if (p.num_seqs == 0) return Status::Ok();  // nothing to compute or write
  // (An fp8 cache's plan is its own, and may take more partitions than the 16-bit cache's.)
  MUH_TRY(detail::check_workspace("paged_decode: ",
                                  is_fp8(plan.kv_dtype) ? "V2 partials of an fp8 cache's plan: size the workspace for "
                                                          "the cache type (muh_decode_workspace_size_quant)"
                                                        : "V2 partials",
                                  plan.workspace_bytes, workspace, workspace_bytes));

  // ---- The device, from its cached profile --------------------------------------------------
  HardwareCapability hw;
  MUH_TRY(device_profile(-1, &hw));
  const int cc = hw.compute_capability;
  if (!profile_runs_target(hw, plan.target))
    return unsupported("paged_decode: the plan's target " + target_name(plan.target) +
                       " does not run on the device (sm_" + std::to_string(cc) + ")");
  const int smem = decode_smem_bytes(plan.policy, p.dtype, p.head_dim);
  if (smem > hw.smem_limit())
    return unsupported("paged_decode: the policy needs " + std::to_string(smem) + " B of shared memory; the device grants " +
                       std::to_string(hw.smem_limit()) + " B");
  if (opt.debug_checks) MUH_TRY(detail::check_device_tables(p, opt.stream));

  int* flags = opt.input_errors;  // the kernels' guard flags here (muh/input_errors.hpp)
  if (flags == nullptr) MUH_TRY(detail::library_input_errors(&flags));
  const kernels::decode::DecodeArgs a = detail::make_decode_args(p, plan, workspace);
  if (is_fp8(p.kv.dtype)) {
    const auto fn = find_fp8_instance(detail::kDecodeFp8Instances, p.kv.dtype, p.dtype, p.head_dim);
    if (fn == nullptr)  // (check_decode_call refused it already)
      return {StatusCode::not_compiled, "paged_decode: this fp8 KV-cache instance is not compiled"};
    if (plan.variant == VariantKind::general) {
      const kernels::VariantArgs v = detail::decode_variant_args(p);
      return fn(a, &v, p.layout, plan.target, cc, opt.stream, flags);
    }
    return fn(a, nullptr, p.layout, plan.target, cc, opt.stream, flags);
  }
  if (plan.variant == VariantKind::general) {
#if MUH_VARIANT_GENERAL
    const auto fn = find_instance(detail::kDecodeGeneralInstances, p.dtype, p.head_dim);
    if (fn == nullptr)  // (check_decode_call refused it already: check_variant_compiled)
      return {StatusCode::not_compiled, "paged_decode: the general variant kind is not compiled for this instance"};
    return fn(a, detail::decode_variant_args(p), p.layout, plan.target, cc, opt.stream, flags);
#else
    return {StatusCode::not_compiled, "paged_decode: the general variant kind is not compiled into this build"};
#endif
  }
  if (plan.wide) {  // (a 16-bit cache, the plain kind: check_plan matched both to the call)
    bool launched = false;
    MUH_TRY(find_instance(detail::kDecodeWideInstances, p.dtype, p.head_dim)(a, p.layout, plan.target, cc, opt.stream,
                                                                            flags, &launched));
    if (launched) return Status::Ok();
    // A call the wide row's kernels do not take (a graph plan replayed over other pages, a map
    // that would not encode): the target's own row, the same results.
  }
  return find_instance(detail::kDecodeInstances, p.dtype, p.head_dim)(a, p.layout, plan.target, cc, opt.stream, flags);
}

namespace detail {

kernels::decode::DecodeArgs make_decode_args(const DecodeParams& p, const DecodePlan& plan, void* workspace) {
  kernels::decode::DecodeArgs a;
  a.q = p.q;
  a.k_cache = p.k_cache;
  a.v_cache = p.v_cache;
  a.out = p.out;
  a.lse = p.lse;
  a.block_table = p.block_table;
  a.seq_lens = p.seq_lens;
  a.num_seqs = p.num_seqs;
  a.num_q_heads = p.num_q_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.group = p.num_q_heads / p.num_kv_heads;
  a.head_chunks = (a.group + kernels::decode::kRows - 1) / kernels::decode::kRows;
  a.page_size = p.page_size;
  a.page_shift = log2_int(p.page_size);
  a.max_blocks = p.max_blocks_per_seq;
  a.num_pages = p.num_pages;
  a.num_splits = plan.num_splits;
  a.partition_tokens = plan.partition_tokens;
  a.l2_evict_first = plan.l2_evict_first ? 1 : 0;
  a.scale_log2 = qk_scale(p) * kernels::kLog2e;
  if (is_fp8(p.kv.dtype)) a.v_scale = p.kv.v_scale;  // an fp8 cache's V dequantisation, at the output
  if (plan.num_splits > 1) {
    // Partials laid out for the plan's capacity: o [plan.num_seqs, splits, Hq, D], then lse.
    a.part_o = static_cast<float*>(workspace);
    a.part_lse = a.part_o + static_cast<std::size_t>(plan.num_seqs) * plan.num_splits * p.num_q_heads * p.head_dim;
  }
  return a;
}

}  // namespace detail

}  // namespace muh
