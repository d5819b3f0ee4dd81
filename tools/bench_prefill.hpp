// bench_prefill.hpp — the pieces of `muh bench prefill` that more than one translation unit uses:
// the result row, the device buffers of the grid, and the tuning sweep's direct launches of
// candidate tilings. The candidates of hd 64 and 96 live in their own file
// (bench_prefill_sweep_64_96.cu) so that nvcc compiles them in parallel with the rest.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "muh/attention.hpp"
#include "muh/instances.hpp"
#include "muh/kernels/prefill_launch.cuh"
#include "muh/launch_args.cuh"
#include "muh/tuning/policy_io.hpp"

namespace muh::cli::prefill_bench {

// Median of `iters` event-timed calls of f on the default stream after 5 warm-up calls, in ms.
inline double median_ms(const std::function<void()>& f, int iters) {
  return bench::median(bench::time_calls_us(f, nullptr, nullptr, iters, 5)) * 1e-3;
}

inline std::uint16_t* bits(bench::DeviceMemory& m) { return m.as<std::uint16_t>(); }

struct Row {
  std::string kind;    // muh | portable | sweep | gemm
  std::string policy;  // agent + tiles
  int head_dim = 0, heads = 0, seq = 0, batch = 0;
  bool causal = false;
  double ms = 0, tflops = 0;
};

// Device buffers for the widest cell: 16384 tokens × 4096 elements (32 heads × 128 = 16 × 256 =
// 64 × 64; the hd-96 sweep uses 32 × 96), and an fp32 LSE for up to kMaxHeads heads (hd 64's 64).
struct Buffers {
  static constexpr long long kTokens = 16384, kElems = kTokens * 4096, kMaxHeads = 64;
  bench::DeviceMemory q{kElems * 2}, k{kElems * 2}, v{kElems * 2}, out{kElems * 2}, lse{kTokens * kMaxHeads * 4},
      cu{(kTokens + 1) * 4};
  Buffers() {
    bench::fill_bf16_uniform(bits(q), kElems, 1u, nullptr);
    bench::fill_bf16_uniform(bits(k), kElems, 2u, nullptr);
    bench::fill_bf16_uniform(bits(v), kElems, 3u, nullptr);
    bench::cuda_check(cudaDeviceSynchronize(), "fill");
  }
  void set_seqlens(int batch, int seq) {
    std::vector<int> h(batch + 1);
    for (int b = 0; b <= batch; ++b) h[b] = b * seq;
    bench::cuda_check(cudaMemcpy(cu.p, h.data(), h.size() * 4, cudaMemcpyHostToDevice), "cu_seqlens");
  }
  PrefillParams params(int hd, int heads, int seq, bool causal) {
    if (heads > kMaxHeads || static_cast<long long>(heads) * hd > 4096)
      throw std::logic_error("bench prefill: a cell wider than its buffers");
    const int batch = static_cast<int>(kTokens / seq);
    set_seqlens(batch, seq);
    PrefillParams p;
    p.dtype = DType::bf16;
    p.q = q.p, p.k = k.p, p.v = v.p, p.out = out.p, p.lse = lse.as<float>();
    p.cu_seqlens_q = p.cu_seqlens_k = cu.as<int>();
    p.batch = batch;
    p.total_q = p.total_k = static_cast<int>(kTokens);
    p.max_seqlen_q = p.max_seqlen_k = seq;
    p.num_q_heads = p.num_kv_heads = heads;
    p.head_dim = hd;
    p.causal = causal;
    return p;
  }
};

inline double flops(int batch, int heads, int seq, int hd, bool causal) {
  const double f = 4.0 * batch * heads * double(seq) * seq * hd;
  return causal ? f / 2 : f;
}

// ---- Tuning sweep: candidate sm80-agent tilings, launched directly (not through the tables). --
template <int BM, int BN, int W, int S>
struct Candidate {
  constexpr PrefillPolicy operator()() const {
    return {Agent::sm80, BM, BN, W, S, 232448, "bench sweep candidate"};
  }
};

template <class G, int D>
Row time_candidate(Buffers& buf, int heads, int seq, bool causal, int iters) {
  PrefillParams p = buf.params(D, heads, seq, causal);
  const kernels::PrefillArgs a = detail::make_prefill_args(p);
  Status s = kernels::launch_prefill<G, DType::bf16, D>(a, nullptr);
  if (!s.ok()) throw std::runtime_error("sweep: " + s.message());
  const double ms = median_ms([&] { (void)kernels::launch_prefill<G, DType::bf16, D>(a, nullptr); }, iters);
  Row r{"sweep", to_string(G{}()), D, heads, seq, p.batch, causal, ms, 0};
  r.tflops = flops(p.batch, heads, seq, D, causal) / (ms * 1e-3) / 1e12;
  return r;
}

template <int D, class... Gs>
void sweep(Buffers& buf, int heads, int iters, std::vector<Row>& rows) {
  for (int seq : {4096, 16384})
    for (bool causal : {false, true}) (rows.push_back(time_candidate<Gs, D>(buf, heads, seq, causal, iters)), ...);
}

// Sweeps D only where this build compiled bf16 at that head dim (instances.hpp): a build without
// it (CI's hd 128;256) then instantiates none of its candidate kernels.
template <int D, class... Gs>
void sweep_if_compiled(Buffers& buf, int heads, int iters, std::vector<Row>& rows) {
  if constexpr (is_compiled_instance(DType::bf16, D)) sweep<D, Gs...>(buf, heads, iters, rows);
}

// bench_prefill_sweep_64_96.cu: candidate tilings at hd 64 (64 heads) and hd 96 (32 heads), whose
// rows reuse hd 128's tile (tuning_sm80.hpp).
void sweep_head_dims_64_96(Buffers& buf, int iters, std::vector<Row>& rows);

}  // namespace muh::cli::prefill_bench
