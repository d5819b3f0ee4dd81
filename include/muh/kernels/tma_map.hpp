// kernels/tma_map.hpp — the host's encoding of a TMA tensor map, for every agent that loads by TMA
// (the sm80 decode agent's K/V boxes, kernels/decode_launch.cuh; the sm90 prefill agent's Q/K/V
// tiles, kernels/prefill_sm90_launch.cuh).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "muh/driver_entry.hpp"
#include "muh/dtype.hpp"

namespace muh::kernels {

// A TMA map (the decode agent's and the sm90 prefill agent's), encoded by the driver's
// cuTensorMapEncodeTiled
// reached through the runtime (driver_entry.hpp: no libcuda link). false: no encoder, or a cache
// the TMA cannot address (rows ≥ 2^31, the coordinates being signed 32-bit) — the caller then
// runs the cp.async kernel, with the same results.
// (dt: the elements' type; bytes = true: 1-byte elements, an fp8 cache's codes.)
inline bool encode_tma_map(CUtensorMap* map, const void* base, DType dt, cuuint32_t rank, const cuuint64_t* dims,
                           const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle,
                           CUtensorMapL2promotion promotion, bool bytes = false) {
  static const auto encode = driver_entry<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled", 12000);
  if (encode == nullptr || dims[rank - 1] >= (1ull << 31)) return false;
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};  // rank ≤ 5
  const CUtensorMapDataType type = bytes                ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : dt == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                       : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return encode(map, type, rank, const_cast<void*>(base), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace muh::kernels
