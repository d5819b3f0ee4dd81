// kernels/decode_launch.cuh — launches the decode agent a policy names, and the V2 merge.
// Included by the per-(dtype, head_dim) instance files (src/instances/decode_instance.cu.in),
// which hand it a getter type (dispatch.hpp) for the policy of the plan's target.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "muh/kernels/decode_common.cuh"
#include "muh/kernels/decode_portable.cuh"
#include "muh/kernels/decode_sm80.cuh"
#include "muh/status.hpp"
#include "muh/tuning/policy.hpp"

namespace muh::kernels::decode {

// The attention kernel a policy runs (per KV layout), its block size and dynamic shared memory
// (the policy footprint, which each agent's traits static_assert).
template <class Getter, DType DT, int D>
struct DecodeKernel {
  static constexpr DecodePolicy policy = Getter{}();
  static_assert(validate(policy, DT, D), "decode policy row does not fit its profile's shared memory");
  static_assert(policy.agent == Agent::portable || (policy.agent == Agent::sm80 && DT != DType::fp32),
                "decode agents: portable (every dtype) and sm80 (fp16/bf16)");
  static constexpr int threads = policy.num_warps * 32;
  static constexpr int smem_bytes = decode_smem_bytes(policy, DT, D);

  static auto function(KVLayout layout) {
    if constexpr (policy.agent == Agent::sm80 && DT != DType::fp32) {
      using Tr = Sm80Traits<Getter, DT, D>;
      return layout == KVLayout::nhd ? &decode_sm80_kernel<Tr, KVLayout::nhd>
                                     : &decode_sm80_kernel<Tr, KVLayout::vllm>;
    } else {
      using Tr = PortableTraits<Getter, DT, D>;
      return layout == KVLayout::nhd ? &decode_portable_kernel<Tr, KVLayout::nhd>
                                     : &decode_portable_kernel<Tr, KVLayout::vllm>;
    }
  }
};

// Whether the merge kernel can be launched with programmatic dependent launch: the device must
// be sm_90+ AND the merge's machine code must be sm_90+ (only that code waits on the grid
// dependency; older code launched early would read partials too soon).
template <class E, int D>
bool merge_supports_pdl(int device_cc) {
  if (device_cc < 90) return false;
  cudaFuncAttributes fa{};
  if (cudaFuncGetAttributes(&fa, decode_merge_kernel<E, D>) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return fa.binaryVersion >= 90;
}

// Launches one decode over `a` (validated by src/decode.cu, shaped by the plan) on `stream`:
// the attention kernel over (KV heads × head chunks, partitions, sequences), then — for V2 —
// the merge over (query heads, sequences).
template <class Getter, DType DT, int D>
Status launch_decode(const DecodeArgs& a, KVLayout layout, int device_cc, cudaStream_t stream) {
  using K = DecodeKernel<Getter, DT, D>;
  using E = storage_t<DT>;
  auto kernel = K::function(layout);
  // Max dynamic shared memory = the footprint: an emulated profile runs within its own cap.
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, K::smem_bytes);
  if (e != cudaSuccess)
    return {StatusCode::cuda_error, std::string("paged_decode: setting ") + std::to_string(K::smem_bytes) +
                                        " B of dynamic shared memory failed: " + cudaGetErrorString(e)};
  const dim3 grid(static_cast<unsigned>(a.num_kv_heads * a.head_chunks), static_cast<unsigned>(a.num_splits),
                  static_cast<unsigned>(a.num_seqs));
  kernel<<<grid, K::threads, K::smem_bytes, stream>>>(a);
  e = cudaGetLastError();
  if (e != cudaSuccess) return {StatusCode::cuda_error, std::string("paged_decode launch: ") + cudaGetErrorString(e)};
  if (a.num_splits == 1) return Status::Ok();

  static const bool pdl = merge_supports_pdl<E, D>(device_cc);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(a.num_q_heads), static_cast<unsigned>(a.num_seqs));
  cfg.blockDim = dim3(kMergeThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl && device_cc >= 90 ? 1 : 0;
  e = cudaLaunchKernelEx(&cfg, decode_merge_kernel<E, D>, a);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return {StatusCode::cuda_error, std::string("paged_decode merge launch: ") + cudaGetErrorString(e)};
  }
  return Status::Ok();
}

}  // namespace muh::kernels::decode
