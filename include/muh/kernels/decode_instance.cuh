// kernels/decode_instance.cuh — the per-(dtype, head_dim) entry points of paged decode. Each
// build defines one specialisation per entry of MUH_FOR_EACH_INSTANCE (build_config.hpp),
// generated from src/instances/decode_instance.cu.in; src/decode.cu maps the runtime
// (dtype, head_dim) to them.
#pragma once

#include <cuda_runtime_api.h>

#include "muh/dtype.hpp"
#include "muh/kv_quant.hpp"
#include "muh/paged_kv.hpp"
#include "muh/status.hpp"

namespace muh::kernels {
struct VariantArgs;
namespace decode {
struct DecodeArgs;
}
}  // namespace muh::kernels

namespace muh::detail {

// Runs the decode policy of dispatch target `target` (0 = portable, 75, 80, ...) for (T, D) on a
// device of compute capability `device_cc`; not_compiled when the target is not in this build.
// The kernels flag bad device-side inputs in input_errors (muh/input_errors.hpp; nullptr: not).
template <DType T, int D>
Status decode_instance(const kernels::decode::DecodeArgs& a, KVLayout layout, int target, int device_cc,
                       cudaStream_t stream, int* input_errors);

// The wide row of target `target` (tuning_sm90.hpp's kDecodeWide) for (T, D), the plain kind over
// a 16-bit cache: *launched false, nothing run, where the target has none or the call cannot take
// it (launch_decode_wide); the caller then runs decode_instance.
template <DType T, int D>
Status decode_wide_instance(const kernels::decode::DecodeArgs& a, KVLayout layout, int target, int device_cc,
                            cudaStream_t stream, int* input_errors, bool* launched);

// The general variant kind (muh/variant.hpp; the portable agent's rows only: another row is an
// internal error). Generated from src/instances/decode_general_instance.cu.in when MUH_VARIANTS
// has "general".
template <DType T, int D>
Status decode_general_instance(const kernels::decode::DecodeArgs& a, const kernels::VariantArgs& v, KVLayout layout,
                               int target, int device_cc, cudaStream_t stream, int* input_errors);

// An fp8 KV cache of element type KV (muh/kv_quant.hpp; generated from
// src/instances/decode_fp8_instance.cu.in for MUH_KV_FP8): the sm80 agent's kernels that widen the
// codes; v == nullptr: the plain variant kind, else the general one (not_compiled where MUH_VARIANTS
// lacks it for this head dim). A portable row is unsupported.
template <KVDType KV, DType T, int D>
Status decode_fp8_instance(const kernels::decode::DecodeArgs& a, const kernels::VariantArgs* v, KVLayout layout,
                           int target, int device_cc, cudaStream_t stream, int* input_errors);

}  // namespace muh::detail
