// kernels/numeric.cuh — what every agent needs of its element type: the device storage type of a
// DType, conversions to and from fp32 (accumulation is always fp32), and (from
// online_softmax.hpp) the base-2 softmax constants: the agents run exp2 with the scale folded
// into log2(e).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "muh/dtype.hpp"
#include "muh/kernels/online_softmax.hpp"  // kLog2e, kLn2

namespace muh::kernels {

template <DType T> struct storage;
template <> struct storage<DType::fp16> { using type = __half; };
template <> struct storage<DType::bf16> { using type = __nv_bfloat16; };
template <> struct storage<DType::fp32> { using type = float; };
template <DType T> using storage_t = typename storage<T>::type;

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }

template <class E> __device__ __forceinline__ E from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }

}  // namespace muh::kernels
