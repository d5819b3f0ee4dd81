// kernels/prefill_instance.cuh — the per-(dtype, head_dim) entry points of prefill. Each build
// defines one specialisation per entry of MUH_FOR_EACH_INSTANCE (build_config.hpp), generated from
// src/instances/prefill_instance.cu.in; src/prefill.cu maps the runtime (dtype, head_dim) to them.
#pragma once

#include <cuda_runtime_api.h>

#include "muh/dtype.hpp"
#include "muh/kv_quant.hpp"
#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/prefill_kv.cuh"
#include "muh/kernels/variant.cuh"
#include "muh/status.hpp"

namespace muh::detail {

// Runs the policy of dispatch target `target` (0 = portable, 75, 80, ...) for (T, D) on a device of
// compute capability device_cc (it decides the tail split's dependent launches), with the plan's
// tail split and persistent schedule (either may be none); returns not_compiled when the target
// is not compiled into this build.
template <DType T, int D>
Status prefill_instance(const kernels::PrefillArgs& a, const kernels::PrefillTail& tail,
                        const kernels::PrefillSchedule& sched, int target, int device_cc, cudaStream_t stream);

// The same with K/V from a paged cache (source paged_nhd or paged_vllm); generated from
// src/instances/prefill_paged_instance.cu.in into files of their own, so that the paged kernels
// compile in parallel with the contiguous ones.
template <DType T, int D>
Status prefill_paged_instance(const kernels::PrefillArgs& a, const kernels::PrefillPagedKV& kv, KVSource source,
                              const kernels::PrefillTail& tail, const kernels::PrefillSchedule& sched, int target,
                              int device_cc, cudaStream_t stream);

// context_attention_fwd's two parts in one launch (prefill_plan.hpp, plan_context_prefill): a,
// the prefix part over vLLM's pages kv, with the prefix pieces t; c, the chunk part (contiguous,
// causal), with its pieces tc; merged into a.out. Generated from
// src/instances/prefill_paged_context_instance.cu.in (with MUH_PAGED_PREFILL).
template <DType T, int D>
Status prefill_context_instance(const kernels::PrefillArgs& a, const kernels::PrefillPagedKV& kv,
                                const kernels::PrefillArgs& c, const kernels::PrefillTail& t,
                                const kernels::PrefillTail& tc, int target, int device_cc, cudaStream_t stream);

// The same over a paged cache of fp8 codes (muh/kv_quant.hpp; the sm80 and portable agents'
// rows; never persistent: that is the sm90 agent's schedule), generated from
// src/instances/prefill_paged_fp8_instance.cu.in for each MUH_FOR_EACH_FP8_INSTANCE entry: the
// plain kind (v null; a split's tail per `tail`) or, where (T, D) has the general kind
// (MUH_FOR_EACH_GENERAL_INSTANCE), the general one (v: its arguments; whole tiles).
template <KVDType KV, DType T, int D>
Status prefill_paged_fp8_instance(const kernels::PrefillArgs& a, const kernels::PrefillPagedKV& kv, KVSource source,
                                  const kernels::PrefillTail& tail, const kernels::VariantArgs* v, int target,
                                  int device_cc, cudaStream_t stream);

// The general variant kind (muh/variant.hpp) over K/V from `source`: contiguous (kv unused) from
// src/instances/prefill_general_instance.cu.in, paged from prefill_paged_general_instance.cu.in
// (when MUH_VARIANTS has "general").
template <DType T, int D>
Status prefill_general_instance(const kernels::PrefillArgs& a, const kernels::PrefillPagedKV& kv, KVSource source,
                                const kernels::VariantArgs& v, int target, cudaStream_t stream);
template <DType T, int D>
Status prefill_paged_general_instance(const kernels::PrefillArgs& a, const kernels::PrefillPagedKV& kv,
                                      KVSource source, const kernels::VariantArgs& v, int target,
                                      cudaStream_t stream);

// CTAs per SM the runtime grants the kernel of target's policy on the present device
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor at its block size and shared memory).
template <DType T, int D>
Status prefill_instance_occupancy(int target, int* ctas_per_sm);

}  // namespace muh::detail
