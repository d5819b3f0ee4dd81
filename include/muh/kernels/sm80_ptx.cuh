// kernels/sm80_ptx.cuh — thin wrappers over the instructions the tensor-core agents use — the
// prefill agents (Agent::sm80, and Agent::sm75 on the same body) and the sm80 decode agent:
// cp.async (16-byte global → shared copies, zero-filled past the end), ldmatrix (plain and
// .trans), mma.sync m16n8k16 (sm80) or two m16n8k8 (sm75, fp16 only) with fp32 accumulation.
// The decode agent's own copy (with an L2 cache policy) stays in decode_sm80.cuh. cp.async and
// m16n8k16 exist from sm_80 (`__CUDA_ARCH__ >= 800`, MUH_SM80_PTX); ldmatrix and fp16 m16n8k8
// from sm_75 (MUH_SM75_PTX).
// A body compiled for an arch without its instruction is empty, and the host never launches an
// agent there (a target newer than the device is refused; prefill_sm80_kernel compiles an agent
// only where agent_has_ptx() says its instructions exist).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "muh/dtype.hpp"
#include "muh/tuning/policy.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MUH_SM80_PTX 1
#else
#define MUH_SM80_PTX 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
#define MUH_SM75_PTX 1
#else
#define MUH_SM75_PTX 0
#endif

namespace muh::kernels::sm80 {

// Whether this compilation pass has the instructions of a tensor-core prefill agent: sm75 needs
// sm_75 (m16n8k8, ldmatrix), sm80 needs sm_80 (m16n8k16, cp.async). False in the host pass.
constexpr bool agent_has_ptx(Agent a) { return a == Agent::sm75 ? MUH_SM75_PTX != 0 : MUH_SM80_PTX != 0; }

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared, bypassing L1 (.cg); `valid == false` writes 16 zero bytes and reads
// nothing (src-size 0), which is how rows past a sequence's end become zeros.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
#if MUH_SM80_PTX
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
#endif
}

// 16 bytes global → shared of which only the first src_bytes (0..16) are read; the rest of the
// 16 bytes is zero-filled (a chunk of a vLLM value page that holds a sequence's last tokens: the
// slots after them are never read).
__device__ __forceinline__ void cp_async_16_bytes(std::uint32_t dst, const void* src, int src_bytes) {
#if MUH_SM80_PTX
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
#endif
}

// The same copy when the source row is known to be valid: no src-size operand, so the caller
// needs no predicate and no fallback address (sm80_load_tile's whole-tile path).
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src) {
#if MUH_SM80_PTX
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
#endif
}

// Brings the line holding p into L1 ahead of its use, with no register to wait on (the paged
// prefill's next block-table entries: prefill_sm80_pipeline.cuh). Plain PTX of every arch.
__device__ __forceinline__ void prefetch_l1(const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if MUH_SM80_PTX
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if MUH_SM80_PTX
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32): the warp
// pairs of the prefill agent meet here without stopping the rest of the CTA. Orders shared-memory
// accesses among the participating threads like __syncthreads.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
#if MUH_SM80_PTX
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

// Barrier `id` without waiting: counts this thread's arrival towards `threads`, for a barrier
// that other threads wait on with named_barrier_sync (a producer/consumer hand-off).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
#if MUH_SM80_PTX
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

// Shared-memory mbarriers for the prefill agent's ping-pong, which runs on sm_90 code only
// (prefill_sm80.cuh): init and the cp.async arrival exist from sm_80; the arrival without a
// state register and the parity wait (try_wait) are sm_90.
__device__ __forceinline__ void mbarrier_init(std::uint32_t bar, int count) {
#if MUH_SM80_PTX
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// Arrives on `bar` once every cp.async this thread issued before it has landed (the arrival
// counts towards the barrier's expected count: .noinc).
__device__ __forceinline__ void cp_async_mbarrier_arrive(std::uint32_t bar) {
#if MUH_SM80_PTX
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}
// Waits until the phase of parity `parity` of the mbarrier has completed (sm_90 code only).
__device__ __forceinline__ void mbarrier_wait_parity(std::uint32_t bar, std::uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred P1;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\n"
      "bra WAIT;\n"
      "DONE:\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

// Four 8×8 16-bit matrices (sm_75 and newer); lanes 8i..8i+7 give the row addresses of matrix i; lane l receives
// row l/4, columns 2(l%4), 2(l%4)+1 of each (kTrans, .trans: column l/4, rows 2(l%4), 2(l%4)+1).
template <bool kTrans = false>
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
#if MUH_SM75_PTX
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

// The transpose of one 8×8 16-bit matrix held in registers (sm_75 and newer): lane l gives row
// l/4, columns 2(l%4), 2(l%4)+1 (the C-fragment pairs of mma_16816, packed) and receives the same
// place of the transpose — an MMA result turned into the B operand of the next MMA, no shared
// memory in between.
__device__ __forceinline__ std::uint32_t movmatrix_trans(std::uint32_t x) {
  std::uint32_t r = 0;
#if MUH_SM75_PTX
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
#endif
  return r;
}

// C[16×8] += A[16×16] · B[16×8], fp32 accumulation. Fragments (g = lane/4, t = lane%4):
//   a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..);  b0 (k 2t..2t+1, n g)
//   b1 (k 2t+8.., n g);  c0,c1 (g, 2t..2t+1)  c2,c3 (g+8, 2t..2t+1).
template <DType T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
#if MUH_SM80_PTX
  if constexpr (T == DType::bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(T == DType::fp16, "mma_16816: fp16 or bf16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// C[16×8] += A[16×8] · B[8×8], fp16 inputs, fp32 accumulation (sm_75 and newer; Turing has no
// bf16 mma). Fragments (g = lane/4, t = lane%4): a0 (g, 2t..2t+1) a1 (g+8, 2t..2t+1);
// b0 (k 2t..2t+1, n g); c as in m16n8k16.
__device__ __forceinline__ void mma_1688_f16(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t b0) {
#if MUH_SM75_PTX
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
#endif
}

// One k16 step of the agent A: C[16×8] += A[16×16] · B[16×8] with the m16n8k16 fragments above.
// sm80: one m16n8k16. sm75: two m16n8k8 over k 0–7 then 8–15 — the k16 fragments split exactly
// so (a0,a1,b0 hold k 0–7; a2,a3,b1 k 8–15), so the agent's ldmatrix patterns stay the same.
template <Agent A, DType T>
__device__ __forceinline__ void mma_k16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  if constexpr (A == Agent::sm75) {
    static_assert(T == DType::fp16, "the sm75 agent is fp16 only (no bf16 tensor cores on sm_75)");
    mma_1688_f16(c, a[0], a[1], b0);
    mma_1688_f16(c, a[2], a[3], b1);
  } else {
    mma_16816<T>(c, a, b0, b1);
  }
}

// 2^x with one MUFU.EX2 (ex2.approx.ftz: ~2 ulp, subnormal results flushed to 0, 2^-inf = 0).
// exp2f() without --use_fast_math wraps the same instruction in a subnormal-range fix-up
// (FSETP + 2 predicated FMUL per call: ~100 extra instructions per 64-key tile and thread at
// hd 256, measured in the SASS); softmax weights below 2^-126 contribute nothing, so the
// fix-up buys nothing here.
__device__ __forceinline__ float exp2_approx(float x) {
#if MUH_SM75_PTX
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// exp2_approx as the Exp2 of online_softmax.hpp's units (exp2f in the host pass).
struct Exp2Approx {
  __host__ __device__ __forceinline__ float operator()(float x) const {
#if defined(__CUDA_ARCH__)
    return exp2_approx(x);
#else
    return exp2f(x);
#endif
  }
};

// Two floats → one register of two 16-bit values (lo in the low half), round to nearest.
template <DType T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (T == DType::bf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
}

}  // namespace muh::kernels::sm80
