// kernels/decode_launch.cuh — launches the decode agent a policy names, and the V2 merge.
// Included by the per-(dtype, head_dim) instance files (src/instances/decode_instance.cu.in),
// which hand it a getter type (dispatch.hpp) for the policy of the plan's target.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "muh/driver_entry.hpp"
#include "muh/kernels/decode_common.cuh"
#include "muh/kernels/decode_portable.cuh"
#include "muh/kernels/decode_sm80.cuh"
#include "muh/kernels/launch_status.hpp"
#include "muh/kernels/tma_map.hpp"
#include "muh/status.hpp"
#include "muh/tuning/policy.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh::kernels::decode {

// The attention kernel a policy runs (per KV layout), its block size and dynamic shared memory
// (the policy footprint, which each agent's traits static_assert).
// kGuard: the input guard (decode_common.cuh); false only for the guard's A/B benchmark.
// KV: the cache's element type (muh/kv_quant.hpp); an fp8 cache is read with fp16 / bf16 q.
template <class Getter, DType DT, int D, bool kGuard = true, KVDType KV = KVDType::same>
struct DecodeKernel {
  static constexpr DecodePolicy policy = Getter{}();
  static_assert(validate(policy, DT, D), "decode policy row does not fit its profile's shared memory");
  static_assert(policy.agent == Agent::portable || (policy.agent == Agent::sm80 && DT != DType::fp32),
                "decode agents: portable (every dtype) and sm80 (fp16/bf16)");
  static_assert(!is_fp8(KV) || DT != DType::fp32, "an fp8 cache is read with fp16 / bf16 q");
  static constexpr int threads = policy.num_warps * 32;
  static constexpr int smem_bytes = decode_smem_bytes(policy, DT, D);

  // group: query heads per KV head (the portable agent compiles its loops per heads of a pass).
  // kVariant: the general variant kind's kernel (it takes the VariantArgs after input_errors).
  template <bool kVariant = false>
  static auto function(KVLayout layout, int group) {
    if constexpr (policy.agent == Agent::sm80 && DT != DType::fp32) {
      using Tr = Sm80Traits<Getter, DT, D, kGuard, KV>;
      auto pick = [layout](auto nhd, auto vllm) { return layout == KVLayout::nhd ? nhd : vllm; };
      const bool cols = decode_sm80_heads_on_n(group);
      if constexpr (kVariant)
        return cols ? pick(&decode_sm80_variant_kernel<Tr, KVLayout::nhd, true>,
                           &decode_sm80_variant_kernel<Tr, KVLayout::vllm, true>)
                    : pick(&decode_sm80_variant_kernel<Tr, KVLayout::nhd, false>,
                           &decode_sm80_variant_kernel<Tr, KVLayout::vllm, false>);
      else
        return cols ? pick(&decode_sm80_kernel<Tr, KVLayout::nhd, true>, &decode_sm80_kernel<Tr, KVLayout::vllm, true>)
                    : pick(&decode_sm80_kernel<Tr, KVLayout::nhd, false>, &decode_sm80_kernel<Tr, KVLayout::vllm, false>);
    } else if constexpr (kVariant) {
      return portable_decode_variant_kernel<PortableTraits<Getter, DT, D, kGuard, KV>>(layout, group);
    } else {
      return portable_decode_kernel<PortableTraits<Getter, DT, D, kGuard, KV>>(layout, group);
    }
  }
};

// The sm80 agent's TMA maps (decode_sm80.cuh), encoded by encode_tma_map (kernels/tma_map.hpp);
// false: the caller runs the cp.async kernel, with the same results.
using kernels::encode_tma_map;
// An NHD cache [pages · page_size rows][num_kv_heads][D] as a 3-D tensor (dims, heads, rows) with
// box 64 × 1 × 16 and a 128-byte swizzle.
inline bool make_tma_kv_map(CUtensorMap* map, const void* base, DType dt, int D, int num_kv_heads, long long rows) {
  if (rows < 16) return false;
  const cuuint64_t dims[3] = {cuuint64_t(D), cuuint64_t(num_kv_heads), cuuint64_t(rows)};
  const cuuint64_t strides[2] = {cuuint64_t(D) * 2, cuuint64_t(num_kv_heads) * D * 2};  // bytes, dims 1 and 2
  const cuuint32_t box[3] = {64, 1, 16};
  return encode_tma_map(map, base, dt, 3, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}
// vLLM's caches at page_size 16, one (page, KV head) block of each being one box: K
// [pages · heads · D/8 rows][16 tokens · 8] (rows of 256 B, box 128 × D/8, unswizzled) and V
// [pages · heads · D/4 rows][4 dims · 16 tokens] (rows of 128 B, box 64 × D/4, 128-byte swizzle).
inline bool make_tma_vllm_maps(CUtensorMap* k, CUtensorMap* v, const void* k_base, const void* v_base, DType dt,
                               int D, long long blocks) {
  const cuuint64_t k_dims[2] = {128, cuuint64_t(blocks) * (D / 8)}, v_dims[2] = {64, cuuint64_t(blocks) * (D / 4)};
  const cuuint64_t k_strides[1] = {256}, v_strides[1] = {128};
  const cuuint32_t k_box[2] = {128, cuuint32_t(D / 8)}, v_box[2] = {64, cuuint32_t(D / 4)};
  return blocks >= 1 &&
         encode_tma_map(k, k_base, dt, 2, k_dims, k_strides, k_box, CU_TENSOR_MAP_SWIZZLE_NONE,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B) &&
         encode_tma_map(v, v_base, dt, 2, v_dims, v_strides, v_box, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// A 16-bit cache's maps for a call's layout (the two above); false where one does not encode.
inline bool make_tma_16bit_maps(CUtensorMap* tk, CUtensorMap* tv, const DecodeArgs& a, KVLayout layout, DType dt,
                                int D) {
  if (layout == KVLayout::vllm)
    return make_tma_vllm_maps(tk, tv, a.k_cache, a.v_cache, dt, D, static_cast<long long>(a.num_pages) * a.num_kv_heads);
  const long long rows = static_cast<long long>(a.num_pages) * a.page_size;
  return make_tma_kv_map(tk, a.k_cache, dt, D, a.num_kv_heads, rows) &&
         make_tma_kv_map(tv, a.v_cache, dt, D, a.num_kv_heads, rows);
}

// The attention kernel's grid: (KV heads × head chunks, partitions, sequences).
inline dim3 decode_grid(const DecodeArgs& a) {
  return dim3(static_cast<unsigned>(a.num_kv_heads * a.head_chunks), static_cast<unsigned>(a.num_splits),
              static_cast<unsigned>(a.num_seqs));
}

// An fp8 cache's maps (1-byte codes, unswizzled: the warp widens them from shared memory with
// conflict-free 8-byte reads, decode_sm80.cuh): NHD [pages · page_size rows][heads][D] with box
// D × 1 × 16 (the tile's 16 token rows of one head: [16][D]) — or, where the tile math reads the
// codes as ldmatrix rows (`swizzled`: decode_sm80_fp8_fragments), box 128 × 1 × 16 with the
// 128-byte swizzle, D/128 of them a tile (kernels/fp8_fragments.hpp); vLLM (page_size 16) K as
// [pages · heads · D/16 rows][256 B] with box 256 × D/16 and V as [pages · heads · D/8 rows][128 B]
// with box 128 × D/8 (the page's (page, KV head) blocks as they are, [D/16][16][16] and [D][16]:
// the V block in rows of 8 dims, not of one, so that a box is a few long rows).
inline bool make_tma_fp8_maps(CUtensorMap* k, CUtensorMap* v, const void* k_base, const void* v_base, KVLayout layout,
                              int D, int num_kv_heads, long long num_pages, int page_size, bool swizzled) {
  if (layout == KVLayout::nhd) {
    const long long rows = num_pages * page_size;
    if (rows < 16 || (swizzled && D % 128 != 0)) return false;
    const cuuint64_t dims[3] = {cuuint64_t(D), cuuint64_t(num_kv_heads), cuuint64_t(rows)};
    const cuuint64_t strides[2] = {cuuint64_t(D), cuuint64_t(num_kv_heads) * D};
    const cuuint32_t box[3] = {cuuint32_t(swizzled ? 128 : D), 1, 16};
    const CUtensorMapSwizzle swz = swizzled ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
    return encode_tma_map(k, k_base, DType::fp16, 3, dims, strides, box, swz, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                          true) &&
           encode_tma_map(v, v_base, DType::fp16, 3, dims, strides, box, swz, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                          true);
  }
  const long long blocks = num_pages * num_kv_heads;
  if (blocks < 1) return false;
  const cuuint64_t k_dims[2] = {256, cuuint64_t(blocks) * (D / 16)}, v_dims[2] = {128, cuuint64_t(blocks) * (D / 8)};
  const cuuint64_t k_strides[1] = {256}, v_strides[1] = {128};
  const cuuint32_t k_box[2] = {256, cuuint32_t(D / 16)}, v_box[2] = {128, cuuint32_t(D / 8)};
  return encode_tma_map(k, k_base, DType::fp16, 2, k_dims, k_strides, k_box, CU_TENSOR_MAP_SWIZZLE_NONE,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, true) &&
         encode_tma_map(v, v_base, DType::fp16, 2, v_dims, v_strides, v_box, CU_TENSOR_MAP_SWIZZLE_NONE,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, true);
}

// The sm80 agent's TMA kernel of a variant kind (kVariant: the general kind's).
template <class Tr, KVLayout L, bool kHeadsOnN, bool kVariant>
struct Sm80TmaKernel {
  static constexpr auto value = &decode_sm80_tma_kernel<Tr, L, kHeadsOnN>;
};
template <class Tr, KVLayout L, bool kHeadsOnN>
struct Sm80TmaKernel<Tr, L, kHeadsOnN, true> {
  static constexpr auto value = &decode_sm80_tma_variant_kernel<Tr, L, kHeadsOnN>;
};

template <DType DT, int D, bool kGuard>
Status launch_decode_merge(const DecodeArgs& a, int device_cc, cudaStream_t stream);

// Launches one decode over `a` (validated by src/decode.cu, shaped by the plan) on `stream`:
// the attention kernel over (KV heads × head chunks, partitions, sequences), then — for V2 —
// the merge over (query heads, sequences). The attention kernel flags bad device-side inputs in
// input_errors ([kInputErrorWords], muh/input_errors.hpp; nullptr: not flagged, still guarded).
// Var: PlainVariant (the plain kernels), or GeneralVariant (kernels/variant.cuh: the general
// kind's kernels, which take var.args as their last parameter). KV: the cache's element type (an
// fp8 cache: fp16 / bf16 q; plan_decode refuses fp32 q first).
template <class Getter, DType DT, int D, bool kGuard, class Var, KVDType KV = KVDType::same>
Status launch_decode_kind(const DecodeArgs& a, const Var& var, KVLayout layout, int device_cc, cudaStream_t stream,
                          int* input_errors) {
  if constexpr (is_fp8(KV) && DT == DType::fp32) {
    return Status{StatusCode::unsupported, "paged_decode: an fp8 KV cache is read with fp16 or bf16 q"};
  } else {
  using K = DecodeKernel<Getter, DT, D, kGuard, KV>;
  const dim3 grid = decode_grid(a);
  // The kernel's dynamic shared memory: the policy footprint, or the smaller one of the sm80
  // agent's kernels that read an fp8 cache's codes themselves (decode_sm80_codes_smem_bytes:
  // what lets two of them share a SM at hd 256; plan.cpp plans for it).
  const bool codes = decode_sm80_reads_codes(K::policy, KV, layout, a.group, D);
  const int smem = codes ? decode_sm80_codes_smem_bytes(K::policy, D) : K::smem_bytes;
  // The kernel's launch with the parameters of its kind.
  auto launch = [&](auto kernel, auto... maps) {
    if constexpr (Var::kOn)
      kernel<<<grid, K::threads, smem, stream>>>(a, maps..., input_errors, var.args);
    else
      kernel<<<grid, K::threads, smem, stream>>>(a, maps..., input_errors);
  };
  bool launched = false;
  if constexpr (K::policy.tma && K::policy.agent == Agent::sm80 && DT != DType::fp32) {
    // The policy's TMA copies where this call allows them (decode_sm80_tma); else the cp.async
    // kernel below.
    using Tr = Sm80Traits<Getter, DT, D, kGuard, KV>;
    auto run = [&](auto layout_tag, bool maps_ok, const CUtensorMap& tk, const CUtensorMap& tv) -> Status {
      constexpr KVLayout L = decltype(layout_tag)::value;
      constexpr auto tma_cols = Sm80TmaKernel<Tr, L, true, Var::kOn>::value;
      constexpr auto tma_rows = Sm80TmaKernel<Tr, L, false, Var::kOn>::value;
      if (!maps_ok || !runs_sm90_code_once<tma_rows>(device_cc)) return Status::Ok();  // both: the same arch's code
      const auto tma_kernel = decode_sm80_heads_on_n(a.group) ? tma_cols : tma_rows;
      MUH_TRY(set_max_dynamic_smem(tma_kernel, smem, "paged_decode"));
      launch(tma_kernel, tk, tv);
      launched = true;
      return Status::Ok();
    };
    if (decode_sm80_tma(K::policy, layout, a.page_size, D, is_fp8(KV))) {
      CUtensorMap tk, tv;
      if constexpr (is_fp8(KV)) {
        // (The kernel that runs reads swizzled NHD boxes where its tile math reads the codes.)
        const bool ok = make_tma_fp8_maps(&tk, &tv, a.k_cache, a.v_cache, layout, D, a.num_kv_heads, a.num_pages,
                                          a.page_size, codes);
        if (layout == KVLayout::vllm)
          MUH_TRY(run(std::integral_constant<KVLayout, KVLayout::vllm>{}, ok, tk, tv));
        else
          MUH_TRY(run(std::integral_constant<KVLayout, KVLayout::nhd>{}, ok, tk, tv));
      } else if (layout == KVLayout::vllm) {
        MUH_TRY(run(std::integral_constant<KVLayout, KVLayout::vllm>{}, make_tma_16bit_maps(&tk, &tv, a, layout, DT, D),
                    tk, tv));
      } else if constexpr (D % 64 == 0) {
        MUH_TRY(run(std::integral_constant<KVLayout, KVLayout::nhd>{}, make_tma_16bit_maps(&tk, &tv, a, layout, DT, D),
                    tk, tv));
      }
    }
  }
  if (!launched) {
    auto kernel = K::template function<Var::kOn>(layout, a.group);
    MUH_TRY(set_max_dynamic_smem(kernel, smem, "paged_decode"));
    launch(kernel);
  }
  MUH_TRY(launch_status("paged_decode launch"));
  return launch_decode_merge<DT, D, kGuard>(a, device_cc, stream);
  }
}

// One decode without a variant (the plain kernels).
template <class Getter, DType DT, int D, bool kGuard = true>
Status launch_decode(const DecodeArgs& a, KVLayout layout, int device_cc, cudaStream_t stream,
                     int* input_errors = nullptr) {
  return launch_decode_kind<Getter, DT, D, kGuard>(a, PlainVariant{}, layout, device_cc, stream, input_errors);
}

// One decode of the general variant kind (kernels/variant.cuh): either agent's variant kernels,
// then — for V2 — the same merge as launch_decode() (the sinks are folded into partition 0's
// partial: the merge is the plain one).
template <class Getter, DType DT, int D>
Status launch_decode_variant(const DecodeArgs& a, const VariantArgs& v, KVLayout layout, int device_cc,
                             cudaStream_t stream, int* input_errors = nullptr) {
  return launch_decode_kind<Getter, DT, D, true>(a, GeneralVariant{v}, layout, device_cc, stream, input_errors);
}

// One decode on a wide row (tuning_sm90.hpp's kDecodeWide: many warps, one stage each): its TMA
// kernels with the heads on N, the only ones instantiated for it. *launched is false, and nothing
// runs, where the call cannot take them (decode_sm80_wide_reads, a map that does not encode, code
// that is not sm_90's): the caller then runs the target's own row, with the same results.
template <class Getter, DType DT, int D>
Status launch_decode_wide(const DecodeArgs& a, KVLayout layout, int device_cc, cudaStream_t stream,
                          int* input_errors, bool* launched) {
  *launched = false;
  constexpr DecodePolicy pol = Getter{}();
  if constexpr (!has_decode_wide_policy(Getter::target, DT, D)) {
    return Status::Ok();  // (the target has no wide row: DecodeWideSelector gave its own)
  } else {
    static_assert(pol.agent == Agent::sm80 && pol.tma && DT != DType::fp32 && D % 64 == 0,
                  "a wide row runs the sm80 agent's TMA kernels");
    if (!decode_sm80_wide_reads(pol, layout, a.page_size, D, a.group, KVDType::same, true)) return Status::Ok();
    using Tr = Sm80Traits<Getter, DT, D, true>;
    using K = DecodeKernel<Getter, DT, D>;
    const dim3 grid = decode_grid(a);
    auto run = [&](auto layout_tag, bool maps_ok, const CUtensorMap& tk, const CUtensorMap& tv) -> Status {
      constexpr auto kernel = &decode_sm80_tma_kernel<Tr, decltype(layout_tag)::value, true>;
      if (!maps_ok || !runs_sm90_code_once<kernel>(device_cc)) return Status::Ok();
      MUH_TRY(set_max_dynamic_smem(kernel, K::smem_bytes, "paged_decode"));
      kernel<<<grid, K::threads, K::smem_bytes, stream>>>(a, tk, tv, input_errors);
      *launched = true;
      return launch_status("paged_decode launch");
    };
    CUtensorMap tk, tv;
    const bool maps_ok = make_tma_16bit_maps(&tk, &tv, a, layout, DT, D);
    if (layout == KVLayout::vllm)
      MUH_TRY(run(std::integral_constant<KVLayout, KVLayout::vllm>{}, maps_ok, tk, tv));
    else
      MUH_TRY(run(std::integral_constant<KVLayout, KVLayout::nhd>{}, maps_ok, tk, tv));
    if (!*launched) return Status::Ok();
    return launch_decode_merge<DT, D, true>(a, device_cc, stream);
  }
}

// One decode over an fp8 cache of element type KV (muh/kv_quant.hpp): the plain kernels, or with
// kGeneral and v != nullptr the general variant kind's.
template <class Getter, DType DT, int D, KVDType KV, bool kGeneral>
Status launch_decode_fp8(const DecodeArgs& a, const VariantArgs* v, KVLayout layout, int device_cc,
                         cudaStream_t stream, int* input_errors) {
  static_assert(is_fp8(KV), "an fp8 element type");
  if constexpr (kGeneral) {
    if (v != nullptr)
      return launch_decode_kind<Getter, DT, D, true, GeneralVariant, KV>(a, GeneralVariant{*v}, layout, device_cc,
                                                                          stream, input_errors);
  }
  return launch_decode_kind<Getter, DT, D, true, PlainVariant, KV>(a, PlainVariant{}, layout, device_cc, stream,
                                                                   input_errors);
}

// The V2 merge of a decode's partials (nothing for V1).
template <DType DT, int D, bool kGuard>
Status launch_decode_merge(const DecodeArgs& a, int device_cc, cudaStream_t stream) {
  using E = storage_t<DT>;
  if (a.num_splits == 1) return Status::Ok();

  // The merge is launched with programmatic dependent launch where its code is sm_90's: only that
  // waits on the grid dependency; older code launched early would read partials too soon. The
  // attention kernel does not trigger early: releasing the merge at its start (its CTAs resident
  // and waiting) was 0.3–0.8 µs slower on every batch-1 V2 cell of the H200 grid
  // (bench/results/h200-2026-11-30-549f0e4.md), so the merge starts as the attention CTAs exit.
  constexpr auto merge = &decode_merge_kernel<E, D, kGuard>;
  const bool pdl = runs_sm90_code_once<merge>(device_cc);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(a.num_q_heads), static_cast<unsigned>(a.num_seqs));
  cfg.blockDim = dim3(kMergeThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return launch_status(cudaLaunchKernelEx(&cfg, merge, a), "paged_decode merge launch");
}

}  // namespace muh::kernels::decode
