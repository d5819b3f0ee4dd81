// prefill.cu — muh::prefill(): validate on the host (no CUDA call before every check passed),
// pick the dispatch target, and call the (dtype, head_dim) instance that launches its policy.
//
// What is checked, in order (each failure is one line and no launch):
//   dtype, head_dim (supported, then compiled into this build), heads (>= 1, q a multiple of
//   kv), sizes (>= 0, max lengths consistent with the totals), softmax_scale (finite, >= 0),
//   pointers (non-null where something is read or written, 16-byte aligned tensors, 4-byte
//   aligned lse and cu_seqlens), the forced target (compiled into this build), the workspace
//   (16-byte aligned; non-null when workspace_bytes > 0).
// Only then the device: no device → no_device; a forced target newer than the device →
// unsupported. cu_seqlens live on the device, so they are checked only with
// RunOptions::debug_checks: one device→host copy of both arrays (a stream sync), then
// cu[0] == 0, non-decreasing, cu[batch] == total_q / total_k, and every length <= max_seqlen_q/k.
// Zero-length sequences are valid (they produce nothing); a batch of 0 or total_q of 0 launches
// nothing and returns ok. Then the tail split (prefill_plan.hpp): a split the plan chooses needs
// p.workspace (without one the tiles run whole); a workspace smaller than the split's, or a forced
// split without one, is an error.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/prefill_instance.cuh"
#include "muh/kernels/prefill_launch.cuh"
#include "muh/prefill_plan.hpp"
#include "muh/shapes.hpp"
#include "muh/tuning/selectors.hpp"
#include "pointer_checks.hpp"

namespace muh {
namespace detail {

// The specialisations the instance files define (one per compiled (dtype, head_dim)).
#define MUH_DECLARE_PREFILL_INSTANCE(t, d) \
  template <>                              \
  Status prefill_instance<DType::t, d>(const kernels::PrefillArgs&, const kernels::PrefillTail&, int, int, cudaStream_t);
MUH_FOR_EACH_INSTANCE(MUH_DECLARE_PREFILL_INSTANCE)
#undef MUH_DECLARE_PREFILL_INSTANCE

using PrefillInstanceFn = Status (*)(const kernels::PrefillArgs&, const kernels::PrefillTail&, int, int, cudaStream_t);

#define MUH_PREFILL_INSTANCE_ENTRY(t, d) InstanceEntry<PrefillInstanceFn>{DType::t, d, &prefill_instance<DType::t, d>},
constexpr InstanceEntry<PrefillInstanceFn> kPrefillInstances[] = {MUH_FOR_EACH_INSTANCE(MUH_PREFILL_INSTANCE_ENTRY)};
#undef MUH_PREFILL_INSTANCE_ENTRY

#define MUH_DECLARE_PREFILL_OCCUPANCY(t, d) \
  template <>                               \
  Status prefill_instance_occupancy<DType::t, d>(int, int*);
MUH_FOR_EACH_INSTANCE(MUH_DECLARE_PREFILL_OCCUPANCY)
#undef MUH_DECLARE_PREFILL_OCCUPANCY

using PrefillOccupancyFn = Status (*)(int, int*);
#define MUH_PREFILL_OCCUPANCY_ENTRY(t, d) \
  InstanceEntry<PrefillOccupancyFn>{DType::t, d, &prefill_instance_occupancy<DType::t, d>},
constexpr InstanceEntry<PrefillOccupancyFn> kPrefillOccupancy[] = {MUH_FOR_EACH_INSTANCE(MUH_PREFILL_OCCUPANCY_ENTRY)};
#undef MUH_PREFILL_OCCUPANCY_ENTRY

// Everything but the pointers (prefill_workspace_size() takes shapes only).
Status validate_prefill_shape(const PrefillParams& p, const RunOptions& opt) {
  const std::string where = "prefill: ";
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16 && p.dtype != DType::fp32)
    return invalid_argument(where + "dtype " + std::to_string(static_cast<int>(p.dtype)) +
                            " is not one of fp16, bf16, fp32");
  if (!is_supported_head_dim(p.head_dim))
    return invalid_argument(where + "head_dim " + std::to_string(p.head_dim) +
                            " is not supported (supported: 64, 96, 128, 256)");
  if (find_instance(kPrefillInstances, p.dtype, p.head_dim) == nullptr)
    return {StatusCode::not_compiled, where + std::string(dtype_name(p.dtype)) + " with head_dim " +
                                          std::to_string(p.head_dim) + " is not compiled into this build (compiled: " +
                                          describe_compiled_instances() + "); rebuild with MUH_DTYPES / MUH_HEAD_DIMS including it"};
  if (p.num_q_heads < 1 || p.num_kv_heads < 1)
    return invalid_argument(where + "num_q_heads (" + std::to_string(p.num_q_heads) + ") and num_kv_heads (" +
                            std::to_string(p.num_kv_heads) + ") must be >= 1");
  if (p.num_q_heads % p.num_kv_heads != 0)
    return invalid_argument(where + "num_q_heads (" + std::to_string(p.num_q_heads) +
                            ") must be a multiple of num_kv_heads (" + std::to_string(p.num_kv_heads) + ")");
  if (p.batch < 0 || p.total_q < 0 || p.total_k < 0 || p.max_seqlen_q < 0 || p.max_seqlen_k < 0)
    return invalid_argument(where + "batch, total_q, total_k, max_seqlen_q and max_seqlen_k must be >= 0");
  if (p.max_seqlen_q > p.total_q || p.max_seqlen_k > p.total_k)
    return invalid_argument(where + "max_seqlen_q (" + std::to_string(p.max_seqlen_q) + ") / max_seqlen_k (" +
                            std::to_string(p.max_seqlen_k) + ") exceed total_q (" + std::to_string(p.total_q) +
                            ") / total_k (" + std::to_string(p.total_k) + ")");
  if (p.batch > 0 && p.total_q > 0 && p.max_seqlen_q == 0)
    return invalid_argument(where + "max_seqlen_q is 0 but total_q is " + std::to_string(p.total_q));
  if (p.batch > 0 && p.total_k > 0 && p.max_seqlen_k == 0)
    return invalid_argument(where + "max_seqlen_k is 0 but total_k is " + std::to_string(p.total_k));
  if (p.batch == 0 && (p.total_q > 0 || p.total_k > 0))
    return invalid_argument(where + "batch is 0 but total_q / total_k are not");
  if (!std::isfinite(p.softmax_scale) || p.softmax_scale < 0.f)
    return invalid_argument(where + "softmax_scale must be finite and > 0 (0 selects 1/sqrt(head_dim))");
  // Indices inside the kernels are 64-bit; the grid is one dimension of at most 2^31 − 1 CTAs.
  if (static_cast<long long>(p.max_seqlen_q) * p.batch * p.num_q_heads > 0x7fffffffLL)
    return invalid_argument(where + "max_seqlen_q × batch × num_q_heads exceeds 2^31 − 1");
  if (opt.force_target < -1)
    return invalid_argument(where + "force_target must be -1 (auto), 0 (portable) or a compute capability");
  if (opt.force_target >= 0 && !is_compiled_target(opt.force_target))
    return {StatusCode::not_compiled, where + "target " + std::to_string(opt.force_target) +
                                          " is not compiled into this build (compiled: " +
                                          describe_targets(compiled_targets::values, compiled_targets::size) +
                                          "); rebuild with MUH_TARGETS including it"};
  if (opt.prefill_tail_chunk < -1)
    return invalid_argument(where + "prefill_tail_chunk must be -1 (auto), 0 (off) or a key-tile count");
  return Status::Ok();
}

Status validate_prefill(const PrefillParams& p, const RunOptions& opt) {
  MUH_TRY(validate_prefill_shape(p, opt));
  const std::string where = "prefill: ";
  const bool work = p.batch > 0 && p.total_q > 0;
  if (work) {
    if (p.q == nullptr || p.out == nullptr) return invalid_argument(where + "q and out must not be null");
    if (p.total_k > 0 && (p.k == nullptr || p.v == nullptr))
      return invalid_argument(where + "k and v must not be null when total_k > 0");
    if (p.cu_seqlens_q == nullptr || p.cu_seqlens_k == nullptr)
      return invalid_argument(where + "cu_seqlens_q and cu_seqlens_k must not be null");
    // 16-byte vector loads and stores of rows; head_dim·elem is a multiple of 16 for every
    // supported head dim, so aligned bases give aligned rows.
    if (!is_aligned(p.q, 16) || !is_aligned(p.out, 16) || (p.k && !is_aligned(p.k, 16)) ||
        (p.v && !is_aligned(p.v, 16)))
      return invalid_argument(where + "q, k, v and out must be 16-byte aligned");
    if (!is_aligned(p.cu_seqlens_q, 4) || !is_aligned(p.cu_seqlens_k, 4) || (p.lse && !is_aligned(p.lse, 4)))
      return invalid_argument(where + "cu_seqlens_q, cu_seqlens_k and lse must be 4-byte aligned");
  }
  if (p.workspace_bytes > 0 && p.workspace == nullptr)
    return invalid_argument(where + "workspace is null but workspace_bytes is " + std::to_string(p.workspace_bytes));
  if (!is_aligned(p.workspace, 16)) return invalid_argument(where + "workspace must be 16-byte aligned");
  return Status::Ok();
}

// The present device as the plan needs it, and the dispatch target the call runs.
Status resolve_device(const RunOptions& opt, HardwareCapability* hw, int* target) {
  int device = 0, count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return {StatusCode::no_device, "prefill: no CUDA device"};
  }
  int major = 0, minor = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&hw->sm_count, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&hw->max_shared_memory_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e != cudaSuccess) return {StatusCode::cuda_error, std::string("prefill: device query: ") + cudaGetErrorString(e)};
  const int cc = major * 10 + minor;
  hw->compute_capability = cc;
  *target = opt.force_target;
  if (*target < 0) {
    *target = best_compiled_target(cc);
    if (*target < 0) *target = 0;  // only the portable agent can run here
  } else if (*target > cc) {
    return unsupported("prefill: target " + std::to_string(*target) + " is newer than the device (sm_" +
                       std::to_string(cc) + ")");
  }
  return Status::Ok();
}

PrefillSplit plan_split(const PrefillParams& p, const RunOptions& opt, const HardwareCapability& hw, int target) {
  return plan_prefill_split(p, prefill_policy(target, p.dtype, p.head_dim), hw, opt.prefill_tail_chunk);
}

// debug_checks: both cu_seqlens arrays to the host, checked against the totals and max lengths.
Status check_cu_seqlens(const PrefillParams& p, cudaStream_t stream) {
  std::vector<int> cq(p.batch + 1), ck(p.batch + 1);
  cudaError_t e = cudaMemcpyAsync(cq.data(), p.cu_seqlens_q, sizeof(int) * cq.size(), cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(ck.data(), p.cu_seqlens_k, sizeof(int) * ck.size(), cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess)
    return {StatusCode::cuda_error, std::string("prefill: reading cu_seqlens: ") + cudaGetErrorString(e)};
  auto check = [&](const std::vector<int>& cu, int total, int max_len, const char* name) -> Status {
    if (cu[0] != 0) return invalid_argument(std::string("prefill: ") + name + "[0] is " + std::to_string(cu[0]) + ", not 0");
    for (int b = 0; b < p.batch; ++b) {
      const int len = cu[b + 1] - cu[b];
      if (len < 0)
        return invalid_argument(std::string("prefill: ") + name + " is not monotonic at " + std::to_string(b + 1));
      if (len > max_len)
        return invalid_argument(std::string("prefill: sequence ") + std::to_string(b) + " has length " +
                                std::to_string(len) + " in " + name + ", above its max_seqlen " + std::to_string(max_len));
    }
    if (cu[p.batch] != total)
      return invalid_argument(std::string("prefill: ") + name + "[batch] is " + std::to_string(cu[p.batch]) +
                              ", not the total " + std::to_string(total));
    return Status::Ok();
  };
  MUH_TRY(check(cq, p.total_q, p.max_seqlen_q, "cu_seqlens_q"));
  return check(ck, p.total_k, p.max_seqlen_k, "cu_seqlens_k");
}

}  // namespace detail

Status prefill(const PrefillParams& p, const RunOptions& opt) {
  MUH_TRY(detail::validate_prefill(p, opt));
  if (p.batch == 0 || p.total_q == 0) return Status::Ok();  // nothing to compute or write

  // The device: its compute capability bounds the targets that can run; its SMs size the split.
  HardwareCapability hw;
  int target = 0;
  MUH_TRY(detail::resolve_device(opt, &hw, &target));
  PrefillSplit split = detail::plan_split(p, opt, hw, target);
  if (split.split()) {
    if (p.workspace == nullptr && opt.prefill_tail_chunk > 0)
      return invalid_argument("prefill: a forced tail split (prefill_tail_chunk " +
                              std::to_string(opt.prefill_tail_chunk) + ") needs a workspace of " +
                              std::to_string(split.workspace_bytes) + " bytes");
    if (p.workspace != nullptr && p.workspace_bytes < split.workspace_bytes)
      return invalid_argument("prefill: workspace_bytes " + std::to_string(p.workspace_bytes) + " is below the " +
                              std::to_string(split.workspace_bytes) + " this shape needs (prefill_workspace_size)");
    if (p.workspace == nullptr) split = PrefillSplit{};  // no scratch: every tile whole
  }
  if (opt.debug_checks) MUH_TRY(detail::check_cu_seqlens(p, opt.stream));

  const kernels::PrefillArgs a = kernels::make_prefill_args(p);
  kernels::PrefillTail tail;
  if (split.split()) {
    tail.tail_tiles = split.tail_tiles;
    tail.tail_ctas = split.tail_ctas;
    tail.tail_chunk = split.tail_chunk;
    tail.key_tiles = split.key_tiles;
    tail.ws_o = static_cast<float*>(p.workspace);
    tail.ws_lse = tail.ws_o + split.ws_lse_offset;
  }
  return find_instance(detail::kPrefillInstances, p.dtype, p.head_dim)(a, tail, target, hw.compute_capability, opt.stream);
}

Status prefill_workspace_size(const PrefillParams& p, const RunOptions& opt, std::size_t* bytes) {
  if (bytes == nullptr) return invalid_argument("prefill_workspace_size: bytes must not be null");
  *bytes = 0;
  MUH_TRY(detail::validate_prefill_shape(p, opt));
  if (p.batch == 0 || p.total_q == 0) return Status::Ok();
  HardwareCapability hw;
  int target = 0;
  MUH_TRY(detail::resolve_device(opt, &hw, &target));
  *bytes = detail::plan_split(p, opt, hw, target).workspace_bytes;
  return Status::Ok();
}

Status explain_prefill(const PrefillParams& p, const RunOptions& opt, PrefillExplain* out) {
  if (out == nullptr) return invalid_argument("explain_prefill: out must not be null");
  *out = PrefillExplain{};
  MUH_TRY(detail::validate_prefill_shape(p, opt));
  HardwareCapability hw;
  MUH_TRY(detail::resolve_device(opt, &hw, &out->target));
  out->policy = prefill_policy(out->target, p.dtype, p.head_dim);
  out->sm_count = hw.sm_count;
  out->split = detail::plan_split(p, opt, hw, out->target);
  return find_instance(detail::kPrefillOccupancy, p.dtype, p.head_dim)(out->target, &out->device_ctas_per_sm);
}

}  // namespace muh
