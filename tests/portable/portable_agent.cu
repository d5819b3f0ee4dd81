// tests/portable/portable_agent.cu — the portable agent, instantiated for one (dtype, head dim),
// for a second CUDA compiler: clang's CUDA front end (tests/portable/CMakeLists.txt compiles it
// to PTX for sm_80 in the CPU label). The BI-V100's toolchain is clang-based; what only nvcc
// accepts (an nvcc extension, a header nvcc pre-includes) fails here first.
// The kernels: prefill, decode for both KV layouts, and the V2 merge the decode agent ends with.
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
}  // namespace

template __global__ void prefill_portable_kernel<PrefillRow, kT, kD>(const PrefillArgs);
template __global__ void decode::decode_portable_kernel<DecodeTr, KVLayout::nhd>(const decode::DecodeArgs, int*);
template __global__ void decode::decode_portable_kernel<DecodeTr, KVLayout::vllm>(const decode::DecodeArgs, int*);
template __global__ void decode::decode_merge_kernel<storage_t<kT>, kD>(const decode::DecodeArgs);

}  // namespace muh::kernels
