// fma_floor.cu — the arithmetic floor behind issue 18's "portable agent ≥ 0.4 of the read floor"
// (README.md here): on a 16-SM green partition, the time of a kernel that issues ONLY what an
// fp32-math GQA-N decode of the seed's cells must issue — per 16-bit K or V element one
// conversion to fp32 and N FMAs — and nothing else a decode needs (no cache loads, addresses,
// softmax, broadcasts or barriers). No decode kernel that does its math in fp32 can beat it on
// those SMs; its ratio to the read floor (`muh bench decode --grid seed --emulate bi-v100`, the
// same run) is the ceiling of floor ÷ time for any such kernel.
//
// Per 8-element chunk a thread: 8 conversions (cvt.f32.f16) and 8·N FFMAs into 2·N independent
// accumulators, the chunk's 16 bytes being the previous chunk's first four accumulators' bits
// (a loop-carried input: ptxas hoisted the conversions of a chunk held in registers out of the
// loop); the loop is unrolled 4 times (its counter and branch ~1 % of the instructions).
// Chunks: batch · kv_len · 2 (K and V) · 256 / 8, spread over 8 CTAs of 256 threads an SM.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I../../../include -I../../../check fma_floor.cu -o fma_floor
//   ./fma_floor            (prints one line per seed cell: µs, median of 20, after a warm-up)
//
// Not yet run (2026-12-08: no device lent). Its SASS loop here (cuobjdump, sm_90): see README.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "green_partition.hpp"

namespace {

__device__ __forceinline__ void cvt2(unsigned w, float& a, float& b) {
  asm volatile("{ .reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }"
               : "=f"(a), "=f"(b)
               : "r"(w));
}

template <int N>
__global__ void __launch_bounds__(256) fma_floor_kernel(const uint4* in, const float* qin, float* out,
                                                        long long chunks_per_thread) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const uint4 w = in[tid & 63];
  float q[N][8];
#pragma unroll
  for (int r = 0; r < N; ++r)
#pragma unroll
    for (int e = 0; e < 8; ++e) q[r][e] = qin[(r * 8 + e + tid) & 255];
  // The accumulators start from memory (nothing for the compiler to fold), each from its own word:
  // started equal, ptxas shared registers and paid 4 MOVs a loop trip to part them.
  const unsigned words[4] = {w.x, w.y, w.z, w.w};
  float acc[N][2];
#pragma unroll
  for (int r = 0; r < N; ++r) acc[r][0] = __uint_as_float(words[(2 * r) & 3]), acc[r][1] = __uint_as_float(words[(2 * r + 1) & 3]);
#pragma unroll 4
  for (long long i = 0; i < chunks_per_thread; ++i) {
    // The chunk's bits: the previous chunk's first accumulators (so nothing is loop-invariant for
    // ptxas to hoist, and no instruction is spent making them; FFMA's speed does not depend on
    // the values, NaN or denormal included).
    float f[8];
    cvt2(__float_as_uint(acc[0][0]), f[0], f[1]);
    cvt2(__float_as_uint(acc[0][1]), f[2], f[3]);
    cvt2(__float_as_uint(acc[1][0]), f[4], f[5]);
    cvt2(__float_as_uint(acc[1][1]), f[6], f[7]);
#pragma unroll
    for (int e = 0; e < 8; ++e)
#pragma unroll
      for (int r = 0; r < N; ++r) acc[r][e & 1] = fmaf(q[r][e], f[e], acc[r][e & 1]);
  }
  float s = 0.f;
#pragma unroll
  for (int r = 0; r < N; ++r) s += acc[r][0] + acc[r][1];
  out[tid] = s;
}

#define CHECK(x)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "fma_floor: %s: %s\n", #x, cudaGetErrorString(e_));             \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

template <int N>
float time_cell(cudaStream_t s, int sms, long long chunks, const uint4* in, const float* q, float* out) {
  const int blocks = sms * 8, threads = 256;
  const long long per = (chunks + static_cast<long long>(blocks) * threads - 1) / (static_cast<long long>(blocks) * threads);
  const long long per4 = (per + 3) / 4 * 4;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  fma_floor_kernel<N><<<blocks, threads, 0, s>>>(in, q, out, per4);  // warm-up
  CHECK(cudaStreamSynchronize(s));
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK(cudaEventRecord(a, s));
    fma_floor_kernel<N><<<blocks, threads, 0, s>>>(in, q, out, per4);
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms[ms.size() / 2] * 1000.f;
}

}  // namespace

int main() {
  muh::check::GreenPartition green;
  const std::string why = green.create(16);
  if (!why.empty()) {
    std::fprintf(stderr, "fma_floor: no 16-SM partition: %s\n", why.c_str());
    return 1;
  }
  uint4* in = nullptr;
  float *q = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&in, 64 * sizeof(uint4)));
  CHECK(cudaMalloc(&q, 256 * sizeof(float)));
  CHECK(cudaMalloc(&out, green.sms() * 8 * 256 * sizeof(float)));
  CHECK(cudaMemset(in, 0x3c, 64 * sizeof(uint4)));  // 0x3c3c: a finite half (1.06)
  CHECK(cudaMemset(q, 0, 256 * sizeof(float)));
  std::printf("fma_floor on %d SMs: per 16-bit K/V element 1 cvt + N FFMA, hd 256\n", green.sms());
  const long long lens[] = {8192, 32768, 100000, 262144};
  for (int heads : {4, 6})
    for (int batch : {1, 2})
      for (long long len : lens) {
        const long long chunks = batch * len * 2 * 256 / 8;
        const float us = heads == 4 ? time_cell<4>(green.stream(), green.sms(), chunks, in, q, out)
                                    : time_cell<6>(green.stream(), green.sms(), chunks, in, q, out);
        std::printf("b%d %dq/1kv %7lld  %9.1f us\n", batch, heads, len, us);
      }
  return 0;
}
