// kernels/fp8_widen.cuh — fp8 KV-cache codes (muh/kv_quant.hpp) widened to q's 16-bit type, four
// or eight at a time, exactly: every e4m3 / e5m2 value is an fp16 and a bf16 value (NaN stays
// NaN, e5m2's infinities stay infinite). The scales are not applied here (the decode applies
// k_scale with the softmax scale and v_scale to the output, in fp32).
//
// Instructions per pair of codes (what the sm80 decode agent's widening pass costs):
//   e5m2 → fp16     a byte permute (an e5m2 code is the high byte of its fp16): 0.5
//   e4m3 → fp16     sm_89+: one cvt.rn.f16x2.e4m3x2; older: the bits moved into fp16's fields,
//                   one HMUL2 by 2^8 for the exponent bias, and a fix-up of the NaN code
//   → bf16          through fp16 and fp32 (two conversions and a pack), there being no fp8 →
//                   bf16 conversion before sm_100
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "muh/kv_quant.hpp"

namespace muh::kernels {

// Codes b0, b1 (bytes 0, 1 of w) as the fp16 pair (b0 << 8, b1 << 8), and bytes 2, 3 likewise.
__device__ __forceinline__ unsigned fp8_pair_lo(unsigned w) { return __byte_perm(w, 0u, 0x1404u); }
__device__ __forceinline__ unsigned fp8_pair_hi(unsigned w) { return __byte_perm(w, 0u, 0x3424u); }

// Two e4m3 codes (the low 16 bits of `pair`) → an fp16 pair, exactly.
__device__ __forceinline__ unsigned e4m3x2_to_f16x2(unsigned short pair) {
  unsigned r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(__ILUVATAR__)
  // (NVIDIA's PTX only: the portable decode agent includes this file, and the BI-V100's
  // toolchain, which predefines __ILUVATAR__, takes the plain path below.)
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(r) : "h"(pair));
#else
  // The code's 4 + 3 bits into fp16's 5 + 10 (sign kept, the rest one bit right of a byte shift):
  // the value / 2^8 (fp16's bias 15 against e4m3's 7; subnormals come out right too), then × 2^8.
  const unsigned x = __byte_perm(pair, 0u, 0x1404u);
  const unsigned h = (x & 0x80008000u) | ((x >> 1) & 0x3f803f80u);
  const __half2 v = __hmul2(*reinterpret_cast<const __half2*>(&h), __half2half2(__ushort_as_half(0x5c00)));  // 2^8
  r = *reinterpret_cast<const unsigned*>(&v);
  // S.1111.111 is e4m3's NaN; the bit move made it 480 (0x5f80): make it fp16's NaN.
  const unsigned nan = __vcmpeq2(r & 0x7fff7fffu, 0x5f805f80u);
  r |= nan & 0x7e007e00u;
#endif
  return r;
}

// Four codes (bytes 0..3 of w) → four E (fp16 or bf16) as two pairs, element order kept.
template <KVDType KV, class E>
__device__ __forceinline__ uint2 widen_fp8x4(unsigned w) {
  static_assert(is_fp8(KV), "an fp8 cache");
  unsigned h[2];
  if constexpr (KV == KVDType::fp8_e5m2) {
    h[0] = fp8_pair_lo(w);
    h[1] = fp8_pair_hi(w);
  } else {
    h[0] = e4m3x2_to_f16x2(static_cast<unsigned short>(w & 0xffffu));
    h[1] = e4m3x2_to_f16x2(static_cast<unsigned short>(w >> 16));
  }
  if constexpr (std::is_same_v<E, __half>) {
    return make_uint2(h[0], h[1]);
  } else {
    static_assert(std::is_same_v<E, __nv_bfloat16>, "fp8 widens to fp16 or bf16");
    unsigned b[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h[i]));  // exact
      const __nv_bfloat162 v = __float22bfloat162_rn(f);                           // exact: fp8 fits bf16
      b[i] = *reinterpret_cast<const unsigned*>(&v);
    }
    return make_uint2(b[0], b[1]);
  }
}

// Eight codes → eight E: one 16-byte chunk of a 16-bit tile.
template <KVDType KV, class E>
__device__ __forceinline__ uint4 widen_fp8x8(uint2 w) {
  const uint2 lo = widen_fp8x4<KV, E>(w.x), hi = widen_fp8x4<KV, E>(w.y);
  return make_uint4(lo.x, lo.y, hi.x, hi.y);
}

}  // namespace muh::kernels
