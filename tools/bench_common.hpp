// bench_common.hpp — helpers shared by the `muh bench` families: CUDA-event timing, a cold-L2
// flush, the streaming-read ceiling, random fills, medians, and the date / device labels that
// result files carry.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "muh/variant.hpp"

namespace muh::bench {

// Throws std::runtime_error("<what>: <CUDA error>") on failure.
void cuda_check(cudaError_t e, const char* what);

// A device allocation freed on scope exit (check::DevBuf) that throws when cudaMalloc fails: a
// benchmark cannot go on without its buffers.
struct DeviceMemory : check::DevBuf {
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t n) { reset(n); }
  void reset(std::size_t n);  // throws std::runtime_error("cudaMalloc: <CUDA error>")
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

// Overwrites a buffer of `bytes` (256 MB by default, > 4× the H200's 60 MB L2) so that the next
// kernel starts with a cold L2 (nothing it reads is cached).
class L2Flusher {
 public:
  explicit L2Flusher(std::size_t bytes = std::size_t(256) << 20);
  void flush(cudaStream_t stream);

 private:
  DeviceMemory buf_;
  int value_ = 0;
};

// Times `iters` calls of f, each preceded (untimed) by `before` (e.g. an L2 flush), with CUDA
// events on `stream` around f alone, after `warmup` untimed rounds. Returns the per-call times in
// microseconds, sorted. `stream` may be a green-context stream (the events are made in its context).
std::vector<double> time_calls_us(const std::function<void()>& f, const std::function<void()>& before,
                                  cudaStream_t stream, int iters, int warmup = 3);

double median(const std::vector<double>& sorted);

// The read ceiling: a kernel that streams `bytes` of device memory with 16-byte loads
// (grid-stride, `ctas_per_sm` CTAs of 256 threads per SM) and keeps only a checksum. A decode
// only reads, so this — not a copy's read + write figure — is its ceiling. Returns TB/s (median of
// `iters` runs).
double streaming_read_tbps(std::size_t bytes, int ctas_per_sm, int iters, cudaStream_t stream);

// The same read over `bytes` at `p` (any size: the grid shrinks so that each thread has ≥ 4
// loads), each call preceded by `before` (untimed; e.g. the L2 flush a benchmark cell uses).
// evict_first: `ld.global.cs` (lines allocated evict-first in L2, as the ceiling reads) or
// `ld.global.cg` (normal eviction). Returns the median µs of `iters` calls — the time a pure
// read of a cell's bytes takes under the cell's own method, which a kernel that must read those
// bytes (and do more) is not expected to beat: the faster of the two forms is its floor.
// sms: the SMs the stream runs on (0: the device's; a green partition's count for its stream),
// which sizes the grid; warmup: untimed calls first.
double streaming_read_us(const void* p, std::size_t bytes, int ctas_per_sm, int iters, cudaStream_t stream,
                         const std::function<void()>& before, bool evict_first, int sms = 0, int warmup = 2);

// Fills n bf16 values (bit patterns) with a hash-based uniform(−1, 1) of their index and seed.
void fill_bf16_uniform(std::uint16_t* x, std::size_t n, unsigned seed, cudaStream_t stream);

// The per-head arrays of a benchmark's --variant (muh/variant.hpp) on the device, for up to
// `heads` query heads: every sink 0 (a natural-log logit) and ALiBi's slopes 2^(−8(h+1)/32).
// bind() points a Variant's sinks / alibi_slopes at them where it uses them.
struct VariantArrays {
  DeviceMemory sinks, slopes;
  explicit VariantArrays(int heads);
  void bind(Variant& v) const;
};

// "2026-11-30" (UTC) and a file-name-safe lower-case device label ("nvidia-h200" → "h200").
std::string utc_date();
std::string device_slug(const std::string& device_name);

}  // namespace muh::bench
