// prefill.cu — muh::prefill(): check the call against its plan on the host (no CUDA call before
// every check passed), then call the (dtype, head_dim) instance that launches the plan's policy.
//
// What is checked, in order (each failure is one line and no launch):
//   the call's inputs (prefill_check.hpp, check_prefill_call: dtype, head_dim, heads, sizes,
//   softmax_scale; then, with work, the (dtype, head_dim) instance compiled into this build and
//   the pointers: non-null where something is read or written, 16-byte aligned tensors, 4-byte
//   aligned lse and cu_seqlens); the plan (made, for exactly this shape, its policy the target's
//   row); the workspace (non-null, 16-byte aligned and at least plan.workspace_bytes when the plan
//   splits or runs the persistent schedule).
// Only then the device, from its cached profile (hardware.hpp, device_profile(): no attribute
// query per call): no device → no_device; a plan target newer than the device, or a policy that
// needs more shared memory than it grants → unsupported. cu_seqlens live on the device, so they
// are checked only with RunOptions::debug_checks: one device→host copy of both arrays (a stream
// sync), then cu[0] == 0, non-decreasing, cu[batch] == total_q / total_k, and every length <=
// max_seqlen_q/k. Without them the kernels guard the same offsets themselves (muh/input_errors.hpp):
// a sequence whose offsets are wrong writes nothing and the error is flagged in
// RunOptions::input_errors (the library's flags by default; check_input_errors() reads them).
// Zero-length sequences are valid (they produce nothing); a batch of 0 or total_q
// of 0 launches nothing and returns ok.
// An fp8 paged cache (PrefillParams::kv): its instance (prefill_paged_fp8_*.cu) runs the plan's
// row (the sm80 or portable agent's), of the plain or the general variant kind; the plan must
// have been made for the cache's type (the selection differs).
// Paged K/V (PrefillParams::kv_source): the same checks (the shape's paged part and the cache
// pointers in check_prefill_call), then, with debug_checks, one device→host copy of
// cu_seqlens_q, seqused_k and the block table (check_paged_tables_host: monotonic cu_seqlens_q
// from 0 to total_q, seqused_k in [q length, max_seqlen_k], every used block id in
// [0, num_pages)); the (dtype, head_dim) paged instance (prefill_paged_*.cu) launches the plan's
// policy with the source's accessor, and a split plan's tail as for contiguous K/V.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "muh/attention.hpp"
#include "muh/build_config.hpp"
#include "muh/instances.hpp"
#include "muh/kernels/prefill_instance.cuh"
#include "muh/launch_args.cuh"
#include "muh/tuning/selectors.hpp"
#include "pointer_checks.hpp"
#include "prefill_check.hpp"

namespace muh {
namespace detail {

// The specialisations the instance files define (one per compiled (dtype, head_dim)).
#define MUH_DECLARE_PREFILL_INSTANCE(t, d) \
  template <>                              \
  Status prefill_instance<DType::t, d>(const kernels::PrefillArgs&, const kernels::PrefillTail&, \
                                      const kernels::PrefillSchedule&, int, int, cudaStream_t);
MUH_FOR_EACH_INSTANCE(MUH_DECLARE_PREFILL_INSTANCE)
#undef MUH_DECLARE_PREFILL_INSTANCE

using PrefillInstanceFn = Status (*)(const kernels::PrefillArgs&, const kernels::PrefillTail&,
                                     const kernels::PrefillSchedule&, int, int, cudaStream_t);

#define MUH_PREFILL_INSTANCE_ENTRY(t, d) InstanceEntry<PrefillInstanceFn>{DType::t, d, &prefill_instance<DType::t, d>},
constexpr InstanceEntry<PrefillInstanceFn> kPrefillInstances[] = {MUH_FOR_EACH_INSTANCE(MUH_PREFILL_INSTANCE_ENTRY)};
#undef MUH_PREFILL_INSTANCE_ENTRY

#if MUH_PAGED_PREFILL
#define MUH_DECLARE_PREFILL_PAGED_INSTANCE(t, d)                                                             \
  template <>                                                                                              \
  Status prefill_paged_instance<DType::t, d>(const kernels::PrefillArgs&, const kernels::PrefillPagedKV&, KVSource, \
                                             const kernels::PrefillTail&, const kernels::PrefillSchedule&, int, int, \
                                             cudaStream_t);
MUH_FOR_EACH_INSTANCE(MUH_DECLARE_PREFILL_PAGED_INSTANCE)
#undef MUH_DECLARE_PREFILL_PAGED_INSTANCE

using PrefillPagedInstanceFn = Status (*)(const kernels::PrefillArgs&, const kernels::PrefillPagedKV&, KVSource,
                                          const kernels::PrefillTail&, const kernels::PrefillSchedule&, int, int,
                                          cudaStream_t);
#define MUH_DECLARE_PREFILL_CONTEXT_INSTANCE(t, d)                                                               \
  template <>                                                                                                    \
  Status prefill_context_instance<DType::t, d>(const kernels::PrefillArgs&, const kernels::PrefillPagedKV&,       \
                                               const kernels::PrefillArgs&, const kernels::PrefillTail&,         \
                                               const kernels::PrefillTail&, int, int, cudaStream_t);
MUH_FOR_EACH_INSTANCE(MUH_DECLARE_PREFILL_CONTEXT_INSTANCE)
#undef MUH_DECLARE_PREFILL_CONTEXT_INSTANCE
using PrefillContextInstanceFn = Status (*)(const kernels::PrefillArgs&, const kernels::PrefillPagedKV&,
                                            const kernels::PrefillArgs&, const kernels::PrefillTail&,
                                            const kernels::PrefillTail&, int, int, cudaStream_t);
#define MUH_PREFILL_CONTEXT_INSTANCE_ENTRY(t, d) \
  InstanceEntry<PrefillContextInstanceFn>{DType::t, d, &prefill_context_instance<DType::t, d>},
constexpr InstanceEntry<PrefillContextInstanceFn> kPrefillContextInstances[] = {
    MUH_FOR_EACH_INSTANCE(MUH_PREFILL_CONTEXT_INSTANCE_ENTRY)};
#undef MUH_PREFILL_CONTEXT_INSTANCE_ENTRY

#define MUH_PREFILL_PAGED_INSTANCE_ENTRY(t, d) \
  InstanceEntry<PrefillPagedInstanceFn>{DType::t, d, &prefill_paged_instance<DType::t, d>},
constexpr InstanceEntry<PrefillPagedInstanceFn> kPrefillPagedInstances[] = {
    MUH_FOR_EACH_INSTANCE(MUH_PREFILL_PAGED_INSTANCE_ENTRY)};
#undef MUH_PREFILL_PAGED_INSTANCE_ENTRY

// The fp8 KV-cache instances (prefill_paged_fp8_*.cu), looked up by (fp8 type, dtype, head_dim).
#define MUH_DECLARE_PREFILL_PAGED_FP8_INSTANCE(k, t, d)                                                     \
  template <>                                                                                             \
  Status prefill_paged_fp8_instance<KVDType::k, DType::t, d>(                                             \
      const kernels::PrefillArgs&, const kernels::PrefillPagedKV&, KVSource, const kernels::PrefillTail&, \
      const kernels::VariantArgs*, int, int, cudaStream_t);
MUH_FOR_EACH_FP8_INSTANCE(MUH_DECLARE_PREFILL_PAGED_FP8_INSTANCE)
#undef MUH_DECLARE_PREFILL_PAGED_FP8_INSTANCE
using PrefillPagedFp8InstanceFn = Status (*)(const kernels::PrefillArgs&, const kernels::PrefillPagedKV&, KVSource,
                                             const kernels::PrefillTail&, const kernels::VariantArgs*, int, int,
                                             cudaStream_t);
#define MUH_PREFILL_PAGED_FP8_INSTANCE_ENTRY(k, t, d)                                    \
  Fp8InstanceEntry<PrefillPagedFp8InstanceFn>{KVDType::k, DType::t, d,                   \
                                              &prefill_paged_fp8_instance<KVDType::k, DType::t, d>},
constexpr Fp8InstanceEntry<PrefillPagedFp8InstanceFn> kPrefillPagedFp8Instances[] = {
    MUH_FOR_EACH_FP8_INSTANCE(MUH_PREFILL_PAGED_FP8_INSTANCE_ENTRY){KVDType::same, DType::fp32, 0, nullptr}};  // (sentinel)
#undef MUH_PREFILL_PAGED_FP8_INSTANCE_ENTRY
#endif

#if MUH_VARIANT_GENERAL
using PrefillGeneralInstanceFn = Status (*)(const kernels::PrefillArgs&, const kernels::PrefillPagedKV&, KVSource,
                                            const kernels::VariantArgs&, int, cudaStream_t);
#define MUH_DECLARE_PREFILL_GENERAL_INSTANCE(t, d)                                                            \
  template <>                                                                                               \
  Status prefill_general_instance<DType::t, d>(const kernels::PrefillArgs&, const kernels::PrefillPagedKV&, \
                                               KVSource, const kernels::VariantArgs&, int, cudaStream_t);
MUH_FOR_EACH_GENERAL_INSTANCE(MUH_DECLARE_PREFILL_GENERAL_INSTANCE)
#undef MUH_DECLARE_PREFILL_GENERAL_INSTANCE
#define MUH_PREFILL_GENERAL_INSTANCE_ENTRY(t, d) \
  InstanceEntry<PrefillGeneralInstanceFn>{DType::t, d, &prefill_general_instance<DType::t, d>},
constexpr InstanceEntry<PrefillGeneralInstanceFn> kPrefillGeneralInstances[] = {
    MUH_FOR_EACH_GENERAL_INSTANCE(MUH_PREFILL_GENERAL_INSTANCE_ENTRY) {DType::fp32, 0, nullptr}};  // (sentinel)
#undef MUH_PREFILL_GENERAL_INSTANCE_ENTRY
#if MUH_PAGED_PREFILL
#define MUH_DECLARE_PREFILL_PAGED_GENERAL_INSTANCE(t, d)                                                           \
  template <>                                                                                                    \
  Status prefill_paged_general_instance<DType::t, d>(const kernels::PrefillArgs&, const kernels::PrefillPagedKV&, \
                                                     KVSource, const kernels::VariantArgs&, int, cudaStream_t);
MUH_FOR_EACH_GENERAL_INSTANCE(MUH_DECLARE_PREFILL_PAGED_GENERAL_INSTANCE)
#undef MUH_DECLARE_PREFILL_PAGED_GENERAL_INSTANCE
#define MUH_PREFILL_PAGED_GENERAL_INSTANCE_ENTRY(t, d) \
  InstanceEntry<PrefillGeneralInstanceFn>{DType::t, d, &prefill_paged_general_instance<DType::t, d>},
constexpr InstanceEntry<PrefillGeneralInstanceFn> kPrefillPagedGeneralInstances[] = {
    MUH_FOR_EACH_GENERAL_INSTANCE(MUH_PREFILL_PAGED_GENERAL_INSTANCE_ENTRY) {DType::fp32, 0, nullptr}};
#undef MUH_PREFILL_PAGED_GENERAL_INSTANCE_ENTRY
#endif
#endif

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

namespace {

// The kernels' view of a tail split `split`, its partials `offset` bytes into `workspace`.
kernels::PrefillTail tail_of(const PrefillSplit& split, void* workspace, std::size_t offset) {
  kernels::PrefillTail tail;
  tail.tail_tiles = split.tail_tiles;
  tail.tail_ctas = split.tail_ctas;
  tail.tail_chunk = split.tail_chunk;
  tail.key_tiles = split.key_tiles;
  tail.ws_o = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + offset);
  tail.ws_lse = tail.ws_o + split.ws_lse_offset;
  return tail;
}

// The kernels' view of the plan's tail split (none: tail_tiles 0), its partials in `workspace`.
kernels::PrefillTail tail_of(const PrefillPlan& plan, void* workspace) {
  return plan.split.split() ? tail_of(plan.split, workspace, 0) : kernels::PrefillTail{};
}

// The kernels' view of the plan's persistent schedule (none: ctas 0), its counter in `workspace`.
kernels::PrefillSchedule schedule_of(const PrefillPlan& plan, void* workspace) {
  kernels::PrefillSchedule s;
  if (plan.persistent.on()) {
    s.ctas = plan.persistent.ctas;
    s.counter = reinterpret_cast<int*>(static_cast<unsigned char*>(workspace) + plan.persistent.counter_offset);
  }
  return s;
}

Status check_plan(const PrefillParams& p, const PrefillPlan& plan) {
  const std::string w = "prefill: ";
  if (plan.target < 0) return invalid_argument(w + "the plan is empty (make it with plan_prefill())");
  auto num = [](long long v) { return std::to_string(v); };
  const PrefillShape& m = plan.shape;
  if (m != static_cast<const PrefillShape&>(p))
    return invalid_argument(w + "the plan was made for another shape (" + std::string(dtype_name(m.dtype)) + " hd " +
                            num(m.head_dim) + ", " + num(m.num_q_heads) + "/" + num(m.num_kv_heads) + " heads, batch " +
                            num(m.batch) + ", total " + num(m.total_q) + "/" + num(m.total_k) + ", max " +
                            num(m.max_seqlen_q) + "/" + num(m.max_seqlen_k) + (m.causal ? ", causal" : "") +
                            "); re-plan for this call");
  if (!(plan.policy == prefill_policy(plan.target, m.dtype, m.head_dim)))
    return invalid_argument(w + "the plan's policy is not target " + num(plan.target) + "'s prefill policy");
  if (plan.variant != variant_kind(p.variant))
    return invalid_argument(w + "the plan was made for the " + variant_kind_name(plan.variant) +
                            " variant kind and the call is of the " + variant_kind_name(variant_kind(p.variant)) +
                            " kind (variant: " + describe_variant(p.variant) + "); re-plan for this call");
  if (plan.kv_dtype != p.kv.dtype)
    return invalid_argument(w + "the plan was made for a KV cache of type " + std::string(kv_dtype_name(plan.kv_dtype)) +
                            " and the call's is " + std::string(kv_dtype_name(p.kv.dtype)) + "; re-plan for this call");
  if (plan.split.split() && (plan.split.tail_chunk < 1 || plan.workspace_bytes < plan.split.workspace_bytes))
    return invalid_argument(w + "the plan's split is inconsistent");
  if (plan.persistent.on() &&
      (plan.split.split() || plan.policy.agent != Agent::sm90 ||
       plan.persistent.counter_offset % 16 != 0 || plan.workspace_bytes < plan.persistent.counter_offset + sizeof(int)))
    return invalid_argument(w + "the plan's persistent schedule is inconsistent");
  return Status::Ok();
}

// The device the call runs on, from its cached profile: can it run the plan's row?
Status check_device(const PrefillPlan& plan, HardwareCapability* hw) {
  MUH_TRY(device_profile(-1, hw));
  if (!profile_runs_target(*hw, plan.target))
    return unsupported("prefill: the plan's target " + target_name(plan.target) + " does not run on the device (sm_" +
                       std::to_string(hw->compute_capability) + ")");
  const int smem = prefill_smem_bytes(plan.policy, plan.shape.dtype, plan.shape.head_dim);
  if (smem > hw->smem_limit())
    return unsupported("prefill: the policy needs " + std::to_string(smem) + " B of shared memory; the device grants " +
                       std::to_string(hw->smem_limit()) + " B");
  return Status::Ok();
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

// debug_checks of a paged call: cu_seqlens_q, seqused_k and the block table to the host;
// cu_seqlens_q from 0 to total_q, non-decreasing, lengths <= max_seqlen_q; every seqused_k in
// [0, max_seqlen_k] (max_seqlen_k <= max_blocks_per_seq · page_size is a shape check) and >= its
// q length; every block id a sequence uses in [0, num_pages).
Status check_paged_tables(const PrefillParams& p, cudaStream_t stream) {
  std::vector<int> cq(p.batch + 1), used(p.batch);
  std::vector<int> bt(static_cast<std::size_t>(p.batch) * p.max_blocks_per_seq);
  cudaError_t e = cudaMemcpyAsync(cq.data(), p.cu_seqlens_q, sizeof(int) * cq.size(), cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(used.data(), p.seqused_k, sizeof(int) * used.size(), cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(bt.data(), p.block_table, sizeof(int) * bt.size(), cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess)
    return {StatusCode::cuda_error, std::string("prefill: reading cu_seqlens_q / seqused_k / block_table: ") +
                                        cudaGetErrorString(e)};
  return check_paged_tables_host(p, cq.data(), used.data(), bt.data());
}

#if MUH_PAGED_PREFILL
// Runs an fp8 cache's instance (prefill_paged_fp8_*.cu): the plain kind (v null, the plan's tail
// split) or the general one (v: its arguments; whole tiles).
Status run_fp8_instance(const PrefillParams& p, const PrefillPlan& plan, const kernels::PrefillArgs& a,
                        const kernels::PrefillTail& tail, const kernels::VariantArgs* v, int device_cc,
                        cudaStream_t stream) {
  const auto fn = find_fp8_instance(kPrefillPagedFp8Instances, p.kv.dtype, p.dtype, p.head_dim);
  if (fn == nullptr)  // (check_prefill_call refused it already)
    return {StatusCode::not_compiled, "prefill: this fp8 KV-cache instance is not compiled"};
  return fn(a, make_prefill_paged_kv(p), p.kv_source, tail, v, plan.target, device_cc, stream);
}
#endif

}  // namespace
}  // namespace detail

Status prefill(const PrefillParams& p, const PrefillPlan& plan, void* workspace, std::size_t workspace_bytes,
               const RunOptions& opt) {
  MUH_TRY(detail::check_prefill_call(p));
  return detail::prefill_unchecked(p, plan, workspace, workspace_bytes, opt);
}

Status detail::prefill_unchecked(const PrefillParams& p, const PrefillPlan& plan, void* workspace,
                                 std::size_t workspace_bytes, const RunOptions& opt) {
  MUH_TRY(detail::check_plan(p, plan));
  if (p.batch == 0 || p.total_q == 0) return Status::Ok();  // nothing to compute or write
  MUH_TRY(detail::check_workspace("prefill: ", "the tail split or the persistent schedule's tile counter",
                                  plan.workspace_bytes, workspace, workspace_bytes));
  HardwareCapability hw;
  MUH_TRY(detail::check_device(plan, &hw));
  if (plan.variant == VariantKind::general) {
#if !MUH_VARIANT_GENERAL
    return {StatusCode::not_compiled, "prefill: the general variant kind is not compiled into this build (MUH_VARIANTS)"};
#else
    // The general variant kind: whole q tiles (no split), contiguous or paged K/V.
    if (is_paged(p.kv_source) && opt.debug_checks) MUH_TRY(detail::check_paged_tables(p, opt.stream));
    if (!is_paged(p.kv_source) && opt.debug_checks) MUH_TRY(detail::check_cu_seqlens(p, opt.stream));
    kernels::PrefillArgs a = detail::make_prefill_args(p);
    a.input_errors = opt.input_errors;
    if (a.input_errors == nullptr) MUH_TRY(detail::library_input_errors(&a.input_errors));
    const kernels::PrefillPagedKV kv = is_paged(p.kv_source) ? detail::make_prefill_paged_kv(p) : kernels::PrefillPagedKV{};
    const kernels::VariantArgs v =
        kernels::make_variant_args(p.variant, a.scale, p.causal, p.max_seqlen_q, p.max_seqlen_k);
#if MUH_PAGED_PREFILL
    if (is_fp8(p.kv.dtype))
      return detail::run_fp8_instance(p, plan, a, kernels::PrefillTail{}, &v, hw.compute_capability, opt.stream);
#endif
    detail::PrefillGeneralInstanceFn fn = find_instance(detail::kPrefillGeneralInstances, p.dtype, p.head_dim);
#if MUH_PAGED_PREFILL
    if (is_paged(p.kv_source)) fn = find_instance(detail::kPrefillPagedGeneralInstances, p.dtype, p.head_dim);
#endif
    if (fn == nullptr)  // (check_prefill_call refused it already: check_variant_compiled)
      return {StatusCode::not_compiled, "prefill: the general variant kind is not compiled for this instance"};
    return fn(a, kv, p.kv_source, v, plan.target, opt.stream);
#endif
  }
  if (is_paged(p.kv_source)) {
#if !MUH_PAGED_PREFILL
    return {StatusCode::not_compiled, "prefill: paged K/V are not compiled into this build (MUH_PAGED_PREFILL=OFF)"};
#else
    if (opt.debug_checks) MUH_TRY(detail::check_paged_tables(p, opt.stream));
    kernels::PrefillArgs a = detail::make_prefill_args(p);
    a.input_errors = opt.input_errors;  // the kernels' guard flags (cu_seqlens_q, seqused_k, block ids)
    if (a.input_errors == nullptr) MUH_TRY(detail::library_input_errors(&a.input_errors));
    if (is_fp8(p.kv.dtype))
      return detail::run_fp8_instance(p, plan, a, tail_of(plan, workspace), nullptr, hw.compute_capability,
                                      opt.stream);
    return find_instance(detail::kPrefillPagedInstances, p.dtype, p.head_dim)(
        a, detail::make_prefill_paged_kv(p), p.kv_source, tail_of(plan, workspace), schedule_of(plan, workspace),
        plan.target, hw.compute_capability, opt.stream);
#endif
  }
  if (opt.debug_checks) MUH_TRY(detail::check_cu_seqlens(p, opt.stream));

  kernels::PrefillArgs a = detail::make_prefill_args(p);
  a.input_errors = opt.input_errors;  // the kernels' guard flags here (muh/input_errors.hpp)
  if (a.input_errors == nullptr) MUH_TRY(detail::library_input_errors(&a.input_errors));
  return find_instance(detail::kPrefillInstances, p.dtype, p.head_dim)(
      a, tail_of(plan, workspace), schedule_of(plan, workspace), plan.target, hw.compute_capability, opt.stream);
}

Status context_prefill(const PrefillParams& prefix, const PrefillParams& chunk, const ContextPlan& plan,
                       void* workspace, std::size_t workspace_bytes, const RunOptions& opt) {
  const std::string w = "context_prefill: ";
  MUH_TRY(detail::check_prefill_call(prefix));
  MUH_TRY(detail::check_prefill_call(chunk));
  if (!plan.fused)
    return invalid_argument(w + "the plan is not fused (" + plan.why +
                            "): run the two parts with prefill() and merge them");
  if (chunk.q != prefix.q || chunk.out != prefix.out || chunk.lse != prefix.lse ||
      chunk.cu_seqlens_q != prefix.cu_seqlens_q)
    return invalid_argument(w + "the prefix and chunk parts must name the same q, out, lse and cu_seqlens_q");
  if (static_cast<const PrefillShape&>(chunk) != plan.chunk_shape || variant_kind(chunk.variant) != VariantKind::plain)
    return invalid_argument(w + "the plan was made for another chunk part; re-plan for this call");
  MUH_TRY(detail::check_plan(prefix, plan.prefix));
  if (plan.prefix.variant != VariantKind::plain || plan.prefix.kv_dtype != KVDType::same ||
      prefix.kv_source != KVSource::paged_vllm || plan.prefix_split.tail_tiles != plan.chunk_split.tail_tiles ||
      plan.chunk_ws_offset % 16 != 0 || plan.chunk_ws_offset < plan.prefix_split.workspace_bytes ||
      plan.workspace_bytes < plan.chunk_ws_offset + plan.chunk_split.workspace_bytes)
    return invalid_argument(w + "the plan's fused split is inconsistent");
  if (prefix.batch == 0 || prefix.total_q == 0) return Status::Ok();
#if !MUH_PAGED_PREFILL
  (void)workspace;
  (void)workspace_bytes;
  (void)opt;
  return {StatusCode::not_compiled, w + "paged K/V are not compiled into this build (MUH_PAGED_PREFILL=OFF)"};
#else
  MUH_TRY(detail::check_workspace(w, "the two parts' partials", plan.workspace_bytes, workspace, workspace_bytes));
  HardwareCapability hw;
  MUH_TRY(detail::check_device(plan.prefix, &hw));
  if (opt.debug_checks) {
    MUH_TRY(detail::check_paged_tables(prefix, opt.stream));
    MUH_TRY(detail::check_cu_seqlens(chunk, opt.stream));
  }
  kernels::PrefillArgs a = detail::make_prefill_args(prefix), c = detail::make_prefill_args(chunk);
  a.input_errors = opt.input_errors;
  if (a.input_errors == nullptr) MUH_TRY(detail::library_input_errors(&a.input_errors));
  c.input_errors = a.input_errors;
  const auto fn = find_instance(detail::kPrefillContextInstances, prefix.dtype, prefix.head_dim);
  if (fn == nullptr)  // (check_prefill_call refused it already)
    return {StatusCode::not_compiled, w + "this (dtype, head_dim) instance is not compiled"};
  return fn(a, detail::make_prefill_paged_kv(prefix), c, detail::tail_of(plan.prefix_split, workspace, 0),
            detail::tail_of(plan.chunk_split, workspace, plan.chunk_ws_offset), plan.prefix.target,
            hw.compute_capability, opt.stream);
#endif
}

Status prefill(const PrefillParams& p, const RunOptions& opt) {
  MUH_TRY(detail::check_prefill_call(p));
  if (p.batch == 0 || p.total_q == 0) return Status::Ok();
  HardwareCapability hw;
  MUH_TRY(device_profile(-1, &hw));
  PrefillPlan plan;
  MUH_TRY(detail::plan_prefill_unchecked(p, hw, PrefillPlanOptions{-1, kPrefillTailOff}, &plan));
  return detail::prefill_unchecked(p, plan, nullptr, 0, opt);
}

Status prefill_runtime_occupancy(const PrefillPlan& plan, int* ctas_per_sm) {
  if (ctas_per_sm == nullptr) return invalid_argument("prefill_runtime_occupancy: ctas_per_sm must not be null");
  if (plan.target < 0) return invalid_argument("prefill_runtime_occupancy: the plan is empty");
  const auto fn = find_instance(detail::kPrefillOccupancy, plan.shape.dtype, plan.shape.head_dim);
  if (fn == nullptr)
    return {StatusCode::not_compiled, "prefill_runtime_occupancy: " + std::string(dtype_name(plan.shape.dtype)) +
                                          " with head_dim " + std::to_string(plan.shape.head_dim) + " is not compiled"};
  return fn(plan.target, ctas_per_sm);
}

}  // namespace muh
