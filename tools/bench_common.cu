// bench_common.cu — see bench_common.hpp.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <stdexcept>
#include <vector>

#include "bench_common.hpp"
#include "muh/driver_entry.hpp"

namespace muh::bench {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

void DeviceMemory::reset(std::size_t n) {
  if (!alloc(n)) {
    cuda_check(cudaGetLastError(), "cudaMalloc");
    throw std::runtime_error("cudaMalloc: failed");
  }
}

L2Flusher::L2Flusher(std::size_t bytes) : buf_(bytes) {}
void L2Flusher::flush(cudaStream_t stream) {
  cuda_check(cudaMemsetAsync(buf_.p, value_++ & 0xff, buf_.n, stream), "L2 flush");
}

namespace {

// An event that times work on `stream` must belong to the stream's context (cuEventRecord: "hEvent
// and hStream must be from the same context"), and a green-context stream (check/green_partition.hpp,
// the BI-V100 emulation) is not in the primary context the runtime makes current. So the events
// are made with the stream's context pushed when it is another one (driver calls through
// muh/driver_entry.hpp: no libcuda link).
void create_events_for(cudaStream_t stream, std::vector<cudaEvent_t>& ev) {
  static const auto get_ctx = driver_entry<PFN_cuStreamGetCtx_v9020>("cuStreamGetCtx", 9020);
  static const auto get_cur = driver_entry<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000);
  static const auto push = driver_entry<PFN_cuCtxPushCurrent_v4000>("cuCtxPushCurrent", 4000);
  static const auto pop = driver_entry<PFN_cuCtxPopCurrent_v4000>("cuCtxPopCurrent", 4000);
  static const auto create = driver_entry<PFN_cuEventCreate_v2000>("cuEventCreate", 2000);
  CUcontext own = nullptr, cur = nullptr;
  const bool other = get_ctx && get_cur && push && pop && create &&
                     get_ctx(reinterpret_cast<CUstream>(stream), &own) == CUDA_SUCCESS &&
                     get_cur(&cur) == CUDA_SUCCESS && own != nullptr && own != cur;
  if (!other) {
    for (auto& e : ev) cuda_check(cudaEventCreate(&e), "cudaEventCreate");
    return;
  }
  if (push(own) != CUDA_SUCCESS) throw std::runtime_error("cuCtxPushCurrent (the stream's context) failed");
  CUresult r = CUDA_SUCCESS;
  for (auto& e : ev)
    if (r == CUDA_SUCCESS) r = create(reinterpret_cast<CUevent*>(&e), CU_EVENT_DEFAULT);
  CUcontext popped = nullptr;
  pop(&popped);
  if (r != CUDA_SUCCESS) throw std::runtime_error("cuEventCreate in the stream's context failed");
}

}  // namespace

std::vector<double> time_calls_us(const std::function<void()>& f, const std::function<void()>& before,
                                  cudaStream_t stream, int iters, int warmup) {
  for (int i = 0; i < warmup; ++i) {
    if (before) before();
    f();
  }
  cuda_check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<cudaEvent_t> ev(2 * static_cast<std::size_t>(iters));
  create_events_for(stream, ev);
  for (int i = 0; i < iters; ++i) {
    if (before) before();
    cuda_check(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
    f();
    cuda_check(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
  }
  cuda_check(cudaStreamSynchronize(stream), "timed calls");
  std::vector<double> us(iters);
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
    us[i] = 1e3 * ms;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(us.begin(), us.end());
  return us;
}

double median(const std::vector<double>& s) {
  if (s.empty()) return 0;
  const std::size_t n = s.size();
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

namespace {

template <bool kEvictFirst>
__device__ __forceinline__ uint4 stream_load(const uint4* p) {
  if constexpr (kEvictFirst)
    return __ldcs(p);
  else
    return __ldcg(p);
}

template <bool kEvictFirst>
__global__ void __launch_bounds__(256) streaming_read_kernel(const uint4* __restrict__ x, std::size_t n,
                                                             unsigned* __restrict__ sink) {
  unsigned acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Four independent 16-byte loads in flight per thread per step.
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = stream_load<kEvictFirst>(x + i), b = stream_load<kEvictFirst>(x + i + stride),
                c = stream_load<kEvictFirst>(x + i + 2 * stride), d = stream_load<kEvictFirst>(x + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = stream_load<kEvictFirst>(x + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;  // practically never: keeps the loads alive
}

__global__ void fill_bf16_kernel(std::uint16_t* x, std::size_t n, unsigned seed) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ static_cast<unsigned>(i >> 32) * 40503u ^ seed * 97u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = (h >> 8) * (1.0f / 8388608.0f) - 1.0f;  // [−1, 1)
    unsigned bits = __float_as_uint(u);
    x[i] = static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  }
}

}  // namespace

double streaming_read_us(const void* p, std::size_t bytes, int ctas_per_sm, int iters, cudaStream_t stream,
                         const std::function<void()>& before, bool evict_first, int sms, int warmup) {
  if (sms <= 0) {
    int dev = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
  }
  DeviceMemory sink(sizeof(unsigned));
  const std::size_t n = bytes / sizeof(uint4);
  // Every thread keeps ≥ 4 loads (one unrolled step) when the buffer is small: launching the
  // full 16 CTAs per SM for a 2 MB read would time idle CTAs.
  const std::size_t want = (n + 4 * 256 - 1) / (4 * 256);
  const int grid = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(std::size_t(sms) * ctas_per_sm, want)));
  const uint4* x = static_cast<const uint4*>(p);
  const auto us = time_calls_us(
      [&] {
        if (evict_first)
          streaming_read_kernel<true><<<grid, 256, 0, stream>>>(x, n, sink.as<unsigned>());
        else
          streaming_read_kernel<false><<<grid, 256, 0, stream>>>(x, n, sink.as<unsigned>());
      },
      before, stream, iters, warmup);
  cuda_check(cudaGetLastError(), "streaming read");
  return median(us);
}

double streaming_read_tbps(std::size_t bytes, int ctas_per_sm, int iters, cudaStream_t stream) {
  DeviceMemory buf(bytes);
  cuda_check(cudaMemsetAsync(buf.p, 1, bytes, stream), "fill");
  const double us = streaming_read_us(buf.p, bytes, ctas_per_sm, iters, stream, nullptr, true);
  return static_cast<double>(bytes) / (us * 1e-6) / 1e12;
}

void fill_bf16_uniform(std::uint16_t* x, std::size_t n, unsigned seed, cudaStream_t stream) {
  fill_bf16_kernel<<<4096, 256, 0, stream>>>(x, n, seed);
  cuda_check(cudaGetLastError(), "fill");
}

VariantArrays::VariantArrays(int heads) : sinks(std::size_t(heads) * 4), slopes(std::size_t(heads) * 4) {
  std::vector<float> s0(heads, 0.f), sl(heads);
  for (int h = 0; h < heads; ++h) sl[h] = std::exp2(-8.f * float(h + 1) / 32.f);
  cuda_check(cudaMemcpy(sinks.p, s0.data(), s0.size() * 4, cudaMemcpyHostToDevice), "variant sinks");
  cuda_check(cudaMemcpy(slopes.p, sl.data(), sl.size() * 4, cudaMemcpyHostToDevice), "variant slopes");
}

void VariantArrays::bind(Variant& v) const {
  if (v.use_sinks) v.sinks = sinks.as<float>();
  if (v.use_alibi) v.alibi_slopes = slopes.as<float>();
}

std::string utc_date() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string device_slug(const std::string& name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? char(std::tolower(c)) : '-';
  for (const char* prefix : {"nvidia-", "tesla-"})
    if (s.rfind(prefix, 0) == 0) s = s.substr(std::string(prefix).size());
  // "h200-sxm-141gb" → "h200": the first word names the part.
  const auto dash = s.find('-');
  if (dash != std::string::npos && dash > 0) s = s.substr(0, dash);
  return s.empty() ? "gpu" : s;
}

}  // namespace muh::bench
