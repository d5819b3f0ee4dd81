// kernels/prefill_launch.cuh — launches the prefill agent a policy names. Included by the
// per-(dtype, head_dim) instance files (src/instances/prefill_instance.cu.in) and by the tuning
// sweep of `muh bench prefill`, which hand it a getter type (dispatch.hpp) for the policy.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "muh/kernels/launch_status.hpp"
#include "muh/kernels/prefill_common.cuh"
#include "muh/kernels/prefill_merge.cuh"
#include "muh/kernels/prefill_portable.cuh"
#include "muh/kernels/prefill_sm80.cuh"
#include "muh/status.hpp"
#include "muh/tuning/policy.hpp"

namespace muh::kernels {

// The sm90 agent's launch and occupancy (kernels/prefill_sm90.cuh), defined for each 16-bit
// (dtype, head_dim) with a sm_90a row by src/instances/prefill_sm90_instance.cu.in — objects
// compiled for sm_90a alone, so that no other pass sees wgmma. The policy is the sm_90a row;
// sched, the plan's persistent schedule or none.
template <DType DT, int D>
Status launch_prefill_sm90(const PrefillArgs& a, const PrefillSchedule& sched, cudaStream_t stream);
template <DType DT, int D>
Status prefill_sm90_occupancy(int* ctas_per_sm);
// Its launch over a paged cache in layout S (NHD, or vLLM's with pages of a multiple of 16 slots),
// defined with MUH_PAGED_PREFILL by src/instances/prefill_sm90_paged_instance.cu.in.
template <DType DT, int D, KVSource S>
Status launch_prefill_sm90_paged(const PrefillArgs& a, const PrefillPagedKV& kv, const PrefillSchedule& sched,
                                 cudaStream_t stream);

// The kernel a policy runs, its block size and its dynamic shared memory (the policy footprint).
template <class Getter, DType DT, int D>
struct PrefillKernel {
  static constexpr PrefillPolicy policy = Getter{}();
  static_assert(validate(policy, DT, D), "prefill policy row does not fit its profile's shared memory");
  static_assert(policy.agent == Agent::portable || (policy.agent == Agent::sm80 && DT != DType::fp32) ||
                    (policy.agent == Agent::sm75 && DT == DType::fp16) ||
                    (policy.agent == Agent::sm90 && DT != DType::fp32),
                "prefill agents: portable (every dtype), sm80 and sm90 (fp16/bf16) and sm75 (fp16)");
  // The sm90 agent's kernels live in the sm_90a objects (launch_prefill_sm90); the members below
  // name the other agents' kernels only.
  static constexpr bool sm90 = policy.agent == Agent::sm90;
  static constexpr int threads = policy.num_warps * 32;
  static constexpr int smem_bytes = prefill_smem_bytes(policy, DT, D);

  static constexpr bool tensor_cores = policy.agent == Agent::sm80 || policy.agent == Agent::sm75;

  static auto function() {
    // sm75 and sm80 share the tensor-core body (prefill_sm80.cuh), which the agent parameterises.
    if constexpr (tensor_cores) return &prefill_sm80_kernel<Getter, DT, D>;
    else return &prefill_portable_kernel<Getter, DT, D>;
  }
  // The tail of a split launch (tensor-core agents only).
  static constexpr auto tail_function() { return &prefill_sm80_tail_kernel<Getter, DT, D>; }
  // K/V from a paged cache in source S (a source the agent reads: prefill_agent_reads) of element
  // type KV (fp8: the sm80 and portable agents, prefill_agent_reads_kv).
  template <KVSource S, KVDType KV = KVDType::same>
  static auto paged_function() {
    if constexpr (tensor_cores) return &prefill_sm80_paged_kernel<Getter, DT, D, S, KV>;
    else return &prefill_portable_paged_kernel<Getter, DT, D, S, KV>;
  }
  // The tail of a split paged launch (tensor-core agents only).
  template <KVSource S, KVDType KV = KVDType::same>
  static constexpr auto paged_tail_function() { return &prefill_sm80_paged_tail_kernel<Getter, DT, D, S, KV>; }
  // The general variant kind (kernels/variant.cuh) over source S (contiguous or a paged layout
  // the agent reads) of element type KV (fp8: paged, the sm80 and portable agents).
  template <KVSource S, KVDType KV = KVDType::same>
  static auto variant_function() {
    if constexpr (tensor_cores) return &prefill_sm80_variant_kernel<Getter, DT, D, S, KV>;
    else return &prefill_portable_variant_kernel<Getter, DT, D, S, KV>;
  }
};

// The merge of a split tail (prefill_merge.cuh): tail tiles × row groups of kPrefillMergeWarps
// warps, merge<<<…>>>(args..., block_m) on `stream`, launched dependent on the tail kernel before
// it where pdl (the device runs both kernels' sm_90 code): it waits for the tail first thing.
template <auto merge, class... Args>
Status launch_prefill_merge(long long tail_tiles, int block_m, bool pdl, cudaStream_t stream, const Args&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(tail_tiles), (block_m + kPrefillMergeWarps - 1) / kPrefillMergeWarps);
  cfg.blockDim = dim3(kPrefillMergeWarps * 32);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return launch_status(cudaLaunchKernelEx(&cfg, merge, args..., block_m), "prefill merge launch");
}

// The tail CTAs and the merge of a split launch (t.tail_tiles > 0, t.main_tiles set), behind the
// whole-tile kernel on `stream`: tail<<<t.tail_ctas>>>(a, extra..., t), then
// merge<<<tail tiles × row groups>>>(a, extra..., t, block_m). extra: the paged cache of a paged
// launch, nothing for contiguous K/V.
template <class K, auto tail, auto merge, class... Extra>
Status launch_tail_and_merge(const PrefillArgs& a, const PrefillTail& t, int device_cc, cudaStream_t stream,
                             const Extra&... extra) {
  MUH_TRY(set_max_dynamic_smem(tail, K::smem_bytes, "prefill"));
  // On sm_90 code the tail kernel is launched dependent on the whole-tile kernel
  // (programmatic stream serialization; prefill_sm80.cuh): its CTAs take the slots the whole
  // tiles' last round frees instead of waiting for its slowest CTA, and it ends only after
  // that kernel, so stream order holds for everything after it. The merge is launched
  // dependent on the tail and waits for it first thing. A/B on the H200 (an environment
  // switch in a probe build, interleaved in one process, 3 rounds of 20; bench/results/
  // h200-2026-11-30-549f0e4.md): 0.05–0.55 % faster on 6 of 6 split cells (hd128/256, 3968–16384
  // tokens), the output bitwise the same.
  // Only where the device runs their sm_90 code (the trigger and the waits).
  const bool pdl = runs_sm90_code_once<tail>(device_cc) && runs_sm90_code_once<merge>(device_cc);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(t.tail_ctas));
  cfg.blockDim = dim3(K::threads);
  cfg.dynamicSmemBytes = K::smem_bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  // Only behind our own whole-tile kernel: with no whole tiles (a batch of fewer tiles than
  // slots) the tail would follow the caller's last launch, whose output (q, k, v) it reads
  // without waiting.
  cfg.numAttrs = pdl && t.main_tiles > 0 ? 1 : 0;
  MUH_TRY(launch_status(cudaLaunchKernelEx(&cfg, tail, a, extra..., t), "prefill tail launch"));
  // The merge follows the tail kernel: always ours.
  return launch_prefill_merge<merge>(t.tail_tiles, K::policy.block_m, pdl, stream, a, extra..., t);
}

// Whether tail split `t` fits the grid of `tiles` q tiles of policy K (an internal error if not).
template <class K>
Status check_tail(const PrefillTail& t, long long tiles) {
  if (t.tail_tiles > 0 &&
      (!K::tensor_cores || t.tail_tiles > tiles || t.tail_chunk < 1 || t.tail_chunk > t.key_tiles ||
       t.ws_o == nullptr || t.ws_lse == nullptr))
    return {StatusCode::invalid_argument, "prefill: a tail split that does not fit this policy's grid (internal)"};
  return Status::Ok();
}

// The plan's ways of dealing out the work that policy K's agent runs (an internal error if not): a
// tail split only the tensor-core body (check_tail), never the sm90 agent, which runs whole tiles
// (prefill_split_applies); a persistent schedule only the sm90 agent.
template <class K>
Status check_schedule(const PrefillTail& t, const PrefillSchedule& sched) {
  if (K::sm90 && t.tail_tiles > 0)
    return {StatusCode::invalid_argument, "prefill: a tail split for the sm90 agent (internal)"};
  if (!K::sm90 && sched.persistent())
    return {StatusCode::invalid_argument, "prefill: a persistent schedule for an agent without one (internal)"};
  return Status::Ok();
}

// Launches one prefill over `a` (validated by src/prefill.cu; muh/launch_args.cuh) on `stream`. The kernel's max
// dynamic shared memory is set to the policy footprint — the cap the row was validated against
// bounds it, so an emulated profile (e.g. the portable agent's 48 KB) runs within its own limit.
// With a tail split (t.tail_tiles > 0, filled from prefill_plan.hpp's plan for this policy) the
// whole tiles, the tail CTAs and the merge are three launches on the stream; device_cc, the
// compute capability of the device they run on (prefill() reads it from the device's profile), decides whether the last two
// are launched dependent (sm_90+). Calls without a tail never read it. sched, the plan's
// persistent schedule (the sm90 agent's only; none: one CTA per q tile).
template <class Getter, DType DT, int D>
Status launch_prefill(PrefillArgs a, cudaStream_t stream, PrefillTail t = {}, int device_cc = 0,
                      PrefillSchedule sched = {}) {
  using K = PrefillKernel<Getter, DT, D>;
  MUH_TRY(check_schedule<K>(t, sched));
  if constexpr (K::sm90) {
    (void)device_cc;
    return launch_prefill_sm90<DT, D>(a, sched, stream);
  } else {
    a.num_m_blocks = (a.max_seqlen_q + K::policy.block_m - 1) / K::policy.block_m;  // the one place
    const long long tiles = prefill_grid_size(a);
    if (tiles == 0) return Status::Ok();
    MUH_TRY(check_tail<K>(t, tiles));
    t.main_tiles = static_cast<int>(tiles - t.tail_tiles);
    if (t.main_tiles > 0) {
      auto kernel = K::function();
      MUH_TRY(set_max_dynamic_smem(kernel, K::smem_bytes, "prefill"));
      kernel<<<static_cast<unsigned>(t.main_tiles), K::threads, K::smem_bytes, stream>>>(a);
      MUH_TRY(launch_status("prefill launch"));
    }
    if constexpr (K::tensor_cores) {
      if (t.tail_tiles > 0)
        return launch_tail_and_merge<K, K::tail_function(), &prefill_tail_merge_kernel<DT, D>>(a, t, device_cc, stream);
    }
    return Status::Ok();
  }
}

// Launches one prefill whose K/V come from the paged cache `kv` in source S, of element type KV
// (validated by src/prefill.cu), with tail split `t` as launch_prefill (where the plan splits:
// prefill_split_applies, prefill_plan.hpp). A source or cache type the policy's agent does
// not read is an internal error (the selection never plans it).
template <class Getter, DType DT, int D, KVSource S, KVDType KV = KVDType::same>
Status launch_paged_prefill(PrefillArgs a, const PrefillPagedKV& kv, cudaStream_t stream, PrefillTail t = {},
                            int device_cc = 0, PrefillSchedule sched = {}) {
  using K = PrefillKernel<Getter, DT, D>;
  static_assert(is_paged(S), "launch_prefill runs contiguous K/V");
  if constexpr (!prefill_agent_reads(K::policy.agent, S)) {
    return {StatusCode::invalid_argument, "prefill: the plan's agent does not read this paged layout (internal)"};
  } else if constexpr (!prefill_agent_reads_kv(K::policy.agent, KV)) {
    return {StatusCode::invalid_argument, "prefill: the plan's agent does not read an fp8 KV cache (internal)"};
  } else if constexpr (K::sm90) {
    MUH_TRY(check_schedule<K>(t, sched));
    (void)device_cc;
    return launch_prefill_sm90_paged<DT, D, S>(a, kv, sched, stream);
  } else {
    MUH_TRY(check_schedule<K>(t, sched));
    a.num_m_blocks = (a.max_seqlen_q + K::policy.block_m - 1) / K::policy.block_m;
    const long long tiles = prefill_grid_size(a);
    if (tiles == 0) return Status::Ok();
    MUH_TRY(check_tail<K>(t, tiles));
    t.main_tiles = static_cast<int>(tiles - t.tail_tiles);
    if (t.main_tiles > 0) {
      auto kernel = K::template paged_function<S, KV>();
      MUH_TRY(set_max_dynamic_smem(kernel, K::smem_bytes, "paged prefill"));
      kernel<<<static_cast<unsigned>(t.main_tiles), K::threads, K::smem_bytes, stream>>>(a, kv);
      MUH_TRY(launch_status("paged prefill launch"));
    }
    if constexpr (K::tensor_cores) {
      if (t.tail_tiles > 0)
        return launch_tail_and_merge<K, K::template paged_tail_function<S, KV>(), &prefill_paged_tail_merge_kernel<DT, D>>(
            a, t, device_cc, stream, kv);
    }
    return Status::Ok();
  }
}

// Launches context_attention_fwd's two parts as one (prefill_plan.hpp, plan_context_prefill):
// the tail kernel over every q tile, CTAs [0, t.tail_ctas) on the prefix part (a, K/V from the
// paged cache kv in source S), the next tc.tail_ctas on the chunk part (c: contiguous K/V,
// causal), then the merge of both parts' pieces into a.out (= c.out) and a.lse. The sm80 agent
// only (the sm75 agent reads no vLLM pages; the sm90 agent has no split); anything else, a tail
// that does not cover every tile or a grid of more m-blocks than one tile_of chunk is an
// internal error (the plan never makes it).
template <class Getter, DType DT, int D, KVSource S>
Status launch_context_prefill(PrefillArgs a, const PrefillPagedKV& kv, PrefillArgs c, PrefillTail t, PrefillTail tc,
                              int device_cc, cudaStream_t stream) {
  using K = PrefillKernel<Getter, DT, D>;
  static_assert(is_paged(S), "the prefix part reads a paged cache");
  if constexpr (K::policy.agent != Agent::sm80 || !prefill_agent_reads(K::policy.agent, S)) {
    return {StatusCode::invalid_argument, "context prefill: the plan's agent has no fused launch (internal)"};
  } else {
    a.num_m_blocks = c.num_m_blocks = (a.max_seqlen_q + K::policy.block_m - 1) / K::policy.block_m;
    const long long tiles = prefill_grid_size(a);
    if (tiles == 0) return Status::Ok();
    if (a.num_m_blocks > kPrefillChunk || t.tail_tiles != tiles || tc.tail_tiles != tiles || t.tail_chunk < 1 ||
        tc.tail_chunk < 1 || t.tail_ctas < 1 || tc.tail_ctas < 1 || t.ws_o == nullptr || t.ws_lse == nullptr ||
        tc.ws_o == nullptr || tc.ws_lse == nullptr)
      return {StatusCode::invalid_argument, "context prefill: a split that does not fit this grid (internal)"};
    t.main_tiles = tc.main_tiles = 0;
    constexpr auto tail = &prefill_sm80_context_tail_kernel<Getter, DT, D, S>;
    constexpr auto merge = &prefill_context_merge_kernel<DT, D>;
    MUH_TRY(set_max_dynamic_smem(tail, K::smem_bytes, "context prefill"));
    tail<<<static_cast<unsigned>(t.tail_ctas + tc.tail_ctas), K::threads, K::smem_bytes, stream>>>(a, kv, t, c, tc);
    MUH_TRY(launch_status("context prefill launch"));
    const bool pdl = runs_sm90_code_once<tail>(device_cc) && runs_sm90_code_once<merge>(device_cc);
    return launch_prefill_merge<merge>(tiles, K::policy.block_m, pdl, stream, a, kv, t, c, tc);
  }
}

// Launches one prefill of the general variant kind (kernels/variant.cuh; the call validated by
// src/prefill.cu), K/V from source S (contiguous: a's k, v; paged: kv, of element type KV): every
// q tile whole, one CTA each — the general kind is never tail-split (prefill_split_applies).
template <class Getter, DType DT, int D, KVSource S, KVDType KV = KVDType::same>
Status launch_prefill_variant(PrefillArgs a, const PrefillPagedKV& kv, const VariantArgs& v, cudaStream_t stream) {
  using K = PrefillKernel<Getter, DT, D>;
  static_assert(!is_fp8(KV) || is_paged(S), "an fp8 cache is a paged one");
  if constexpr (is_paged(S) && !prefill_agent_reads(K::policy.agent, S)) {
    return {StatusCode::invalid_argument, "prefill: the plan's agent does not read this paged layout (internal)"};
  } else if constexpr (!prefill_agent_reads_kv(K::policy.agent, KV)) {
    return {StatusCode::invalid_argument, "prefill: the plan's agent does not read an fp8 KV cache (internal)"};
  } else if constexpr (!prefill_agent_has_variants(K::policy.agent)) {
    return {StatusCode::invalid_argument, "prefill: the plan's agent has no variant hooks (internal)"};
  } else {
    a.num_m_blocks = (a.max_seqlen_q + K::policy.block_m - 1) / K::policy.block_m;
    const long long tiles = prefill_grid_size(a);
    if (tiles == 0) return Status::Ok();
    auto kernel = K::template variant_function<S, KV>();
    MUH_TRY(set_max_dynamic_smem(kernel, K::smem_bytes, "prefill (variant)"));
    kernel<<<static_cast<unsigned>(tiles), K::threads, K::smem_bytes, stream>>>(a, kv, v);
    return launch_status("prefill launch (variant)");
  }
}

// CTAs of the policy's kernel one SM of the present device holds (prefill_plan.hpp estimates it
// on the host; tests and explain_prefill() compare the two).
template <class Getter, DType DT, int D>
Status prefill_occupancy(int* ctas_per_sm) {
  using K = PrefillKernel<Getter, DT, D>;
  if constexpr (K::sm90) {
    return prefill_sm90_occupancy<DT, D>(ctas_per_sm);
  } else {
    auto kernel = K::function();
    MUH_TRY(set_max_dynamic_smem(kernel, K::smem_bytes, "prefill occupancy"));
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, kernel, K::threads, K::smem_bytes);
    if (e != cudaSuccess) return {StatusCode::cuda_error, std::string("prefill occupancy: ") + cudaGetErrorString(e)};
    return Status::Ok();
  }
}

}  // namespace muh::kernels
