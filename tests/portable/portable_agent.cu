// tests/portable/portable_agent.cu — the portable agent, instantiated for one (dtype, head dim),
// for a second CUDA compiler: clang's CUDA front end (tests/portable/CMakeLists.txt compiles it
// to PTX for sm_80 in the CPU label). The BI-V100's toolchain is clang-based; what only nvcc
// accepts (an nvcc extension, a header nvcc pre-includes) fails here first.
// The kernels: prefill (contiguous and paged, both layouts; paged over a 16-bit and an e4m3 cache),
// decode for both KV layouts (a 16-bit and an e4m3 cache), and the V2 merge the decode agent ends with.
#include "muh/kernels/decode_common.cuh"
#include "muh/kernels/decode_portable.cuh"
#include "muh/kernels/prefill_portable.cuh"
#include "muh/tuning/tuning_portable.hpp"

namespace muh::kernels {
namespace {
constexpr DType kT = DType::fp16;
constexpr int kD = 256;  // the seed's head dim
struct PrefillRow {
  constexpr PrefillPolicy operator()() const { return tuning::portable::prefill(kT, kD); }
};
struct DecodeRow {
  constexpr DecodePolicy operator()() const { return tuning::portable::decode(kT, kD); }
};
using DecodeTr = decode::PortableTraits<DecodeRow, kT, kD>;
using DecodeFp8Tr = decode::PortableTraits<DecodeRow, kT, kD, true, KVDType::fp8_e4m3>;  // an fp8 cache
}  // namespace

template __global__ void prefill_portable_kernel<PrefillRow, kT, kD>(const PrefillArgs);
// Paged prefill, both layouts (the seed's chunked prefill reads vLLM's layout).
template __global__ void prefill_portable_paged_kernel<PrefillRow, kT, kD, KVSource::paged_nhd>(const PrefillArgs,
                                                                                                const PrefillPagedKV);
template __global__ void prefill_portable_paged_kernel<PrefillRow, kT, kD, KVSource::paged_vllm>(const PrefillArgs,
                                                                                                 const PrefillPagedKV);
// ... and over an e4m3 cache (the codes widened on their way into shared memory).
template __global__ void prefill_portable_paged_kernel<PrefillRow, kT, kD, KVSource::paged_nhd, KVDType::fp8_e4m3>(
    const PrefillArgs, const PrefillPagedKV);
template __global__ void prefill_portable_paged_kernel<PrefillRow, kT, kD, KVSource::paged_vllm, KVDType::fp8_e4m3>(
    const PrefillArgs, const PrefillPagedKV);
// Decode: the seed's 4 query heads per KV head (passes of 4) and 6 (passes of 8), both layouts.
template __global__ void decode::decode_portable_kernel<DecodeTr, KVLayout::nhd, 4>(const decode::DecodeArgs, int*);
template __global__ void decode::decode_portable_kernel<DecodeTr, KVLayout::vllm, 4>(const decode::DecodeArgs, int*);
template __global__ void decode::decode_portable_kernel<DecodeTr, KVLayout::nhd, 8>(const decode::DecodeArgs, int*);
template __global__ void decode::decode_portable_kernel<DecodeTr, KVLayout::vllm, 8>(const decode::DecodeArgs, int*);
// Decode over an e4m3 cache (the codes widened by kernels/fp8_widen.cuh's plain path), both layouts.
template __global__ void decode::decode_portable_kernel<DecodeFp8Tr, KVLayout::nhd, 4>(const decode::DecodeArgs, int*);
template __global__ void decode::decode_portable_kernel<DecodeFp8Tr, KVLayout::vllm, 4>(const decode::DecodeArgs, int*);
template __global__ void decode::decode_merge_kernel<storage_t<kT>, kD>(const decode::DecodeArgs);

}  // namespace muh::kernels
