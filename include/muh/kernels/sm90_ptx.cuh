// kernels/sm90_ptx.cuh — thin wrappers over the Hopper instructions of the sm90 prefill agent
// (kernels/prefill_sm90.cuh): wgmma (warp-group MMA from shared-memory descriptors), TMA tile
// loads, the mbarrier transaction count, setmaxnreg and the proxy fences.
//
// Written on inline PTX rather than CCCL's cuda::ptx: the toolkit's cuda::ptx has the mbarrier,
// fence and cp.async.bulk.tensor forms but no wgmma.mma_async, whose operand lists (up to 128
// accumulators) are the bulk of this file anyway; one style for all of them keeps the file small.
//
// wgmma and setmaxnreg exist only in sm_90a code (`__CUDA_ARCH_FEAT_SM90_ALL`, MUH_SM90A_PTX):
// the agent's kernels are compiled for sm_90a alone (CMake's muh_sm90a objects) and every other
// pass sees empty bodies. The host never launches them elsewhere: the selection gives the sm90
// agent's target (sm_90a) to a cc 9.0 device only (select.hpp, target_runs_on).
#pragma once

#include <cstdint>

#include "muh/dtype.hpp"
#include "muh/kernels/sm80_ptx.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MUH_SM90A_PTX 1
#else
#define MUH_SM90A_PTX 0
#endif

namespace muh::kernels::sm90 {

// ---- Shared-memory matrix descriptors (PTX ISA, "Matrix Descriptor Format") -------------------
// Every tile the agent hands wgmma is in 64-element (128-byte) panels, rows of 128 bytes, swizzled
// by the TMA's 128-byte pattern (16-byte chunk c of row r stored at chunk c ^ (r % 8)), each
// panel 1024-byte aligned. Two ways to read such a panel:
//   K-major   the reduction dim runs along the row (Q and K for S = Q Kᵀ): 8-row core groups
//             1024 bytes apart (stride byte offset); the leading offset is unused (1). A k16 step
//             within a panel is +32 bytes of start address; the hardware swizzles by address.
//   MN-major  the output dim runs along the row (V for O = P V, its rows being the reduction's
//             tokens): 64 output columns per panel, the next 64 `panel_bytes` further (leading
//             byte offset); 8-token groups 1024 bytes apart (stride byte offset).
// The descriptor's fields: start address, leading and stride byte offsets (each in 16-byte units,
// 14 bits), layout type (bits 62–63: 0 none, 1 128-byte, 2 64-byte, 3 32-byte swizzle).
enum class SmemSwizzle : std::uint64_t { none = 0, b128 = 1, b64 = 2, b32 = 3 };
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t smem_addr, std::uint32_t leading_bytes,
                                                   std::uint32_t stride_bytes, SmemSwizzle swizzle) {
  std::uint64_t d = (smem_addr & 0x3FFFFu) >> 4;
  d |= static_cast<std::uint64_t>((leading_bytes >> 4) & 0x3FFFu) << 16;
  d |= static_cast<std::uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32;
  d |= static_cast<std::uint64_t>(swizzle) << 62;
  return d;
}
__device__ __forceinline__ std::uint64_t desc_sw128(std::uint32_t smem_addr, std::uint32_t leading_bytes,
                                                    std::uint32_t stride_bytes) {
  return smem_desc(smem_addr, leading_bytes, stride_bytes, SmemSwizzle::b128);
}
__device__ __forceinline__ std::uint64_t desc_k_major(std::uint32_t smem_addr) { return desc_sw128(smem_addr, 16, 1024); }
__device__ __forceinline__ std::uint64_t desc_mn_major(std::uint32_t smem_addr, std::uint32_t panel_bytes) {
  return desc_sw128(smem_addr, panel_bytes, 1024);
}

// The vLLM layout's pages (prefill_sm90.cuh, KVSource::paged_vllm) land in two other K-major forms:
//   unswizzled  core matrices of 8 rows × 16 bytes, each 128 contiguous bytes: the leading offset
//               is the distance between core matrices adjacent in K, the stride offset between
//               8-row groups (PTX ISA, "Strides") — the keys, [rows/8][D/8][128 B];
//   32-byte     rows of 32 bytes (k16: one step a row), 16-byte chunk c of row r stored at chunk
//               c ^ ((r / 4) % 2), 8-row groups 256 bytes apart, each 256-byte aligned — the
//               values, [D rows][16 tokens], a k16 step of 16 tokens each.
__device__ __forceinline__ std::uint64_t desc_interleaved(std::uint32_t smem_addr, std::uint32_t leading_bytes,
                                                          std::uint32_t stride_bytes) {
  return smem_desc(smem_addr, leading_bytes, stride_bytes, SmemSwizzle::none);
}
// (Leading offset unused: K fits one swizzle row; 8-row groups of 32 bytes a row.)
__device__ __forceinline__ std::uint64_t desc_sw32_k_major(std::uint32_t smem_addr) {
  return smem_desc(smem_addr, 16, 256, SmemSwizzle::b32);
}

// ---- wgmma ------------------------------------------------------------------------------------
// d[N/2] += A · B (accumulate = 0: d = A · B); m64nNk16, fp32 accumulators in the layout of
// mma.sync's C fragment per 8 columns: warp w of the group holds rows 16w + lane/4 (d[4j], d[4j+1])
// and 16w + lane/4 + 8 (d[4j+2], d[4j+3]) of columns 8j + 2(lane%4) + {0, 1}.
template <DType T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], std::uint64_t a, std::uint64_t b, int accumulate);
// A from registers: a[0..3] the m16n8k16 A fragment of the warp's 16 rows (rows lane/4 and +8,
// columns 2(lane%4) and +8): exactly what packing the S accumulators two columns at a time gives.
template <DType T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b,
                                         int accumulate);
// The same with B K-major (imm-trans-b = 0): V stored dim-major, its tokens contiguous.
template <DType T, int N>
__device__ __forceinline__ void wgmma_rk(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b,
                                         int accumulate);

#include "muh/kernels/sm90_wgmma.inc"

// Orders this thread's register writes before the next wgmma reads them (accumulators, A).
__device__ __forceinline__ void wgmma_fence() {
#if MUH_SM90A_PTX
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if MUH_SM90A_PTX
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed wgmma groups of this warp group are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if MUH_SM90A_PTX
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses to the accumulators across a wgmma in flight.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// ---- Registers per thread (a warp group at a time) ---------------------------------------------
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if MUH_SM90A_PTX
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if MUH_SM90A_PTX
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// ---- mbarriers and TMA ------------------------------------------------------------------------
// (mbarrier init, arrival and parity wait, and the named barriers, are sm80_ptx.cuh's.)
// Makes the initialised barriers visible to the async proxy (the TMA unit) and the cluster.
__device__ __forceinline__ void fence_barrier_init() {
#if MUH_SM90A_PTX
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// Generic-proxy writes to shared memory (st.shared) → visible to wgmma / TMA reads after it.
__device__ __forceinline__ void fence_proxy_async() {
#if MUH_SM90A_PTX
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// One arrival that also expects `bytes` more transaction bytes on the phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
#if MUH_SM90A_PTX
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// One box of a 3-D tensor map at (c0, c1, c2) into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const void* map, std::uint32_t bar, int c0, int c1,
                                            int c2) {
#if MUH_SM90A_PTX
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}

// One box of a 4-D tensor map at (c0, c1, c2, c3) (the paged cache's dims, head, slot, page).
__device__ __forceinline__ void tma_load_4d(std::uint32_t dst, const void* map, std::uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
#if MUH_SM90A_PTX
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}

// One box of a 5-D tensor map at (c0, .., c4) (paged V with the panels as a box dim: dims, slot,
// head, page, panel).
__device__ __forceinline__ void tma_load_5d(std::uint32_t dst, const void* map, std::uint32_t bar, int c0, int c1,
                                            int c2, int c3, int c4) {
#if MUH_SM90A_PTX
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
#endif
}

}  // namespace muh::kernels::sm90
