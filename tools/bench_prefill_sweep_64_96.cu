// bench_prefill_sweep_64_96.cu — `muh bench prefill --sweep` at head dims 64 and 96: candidate
// sm80-agent tilings around the row those head dims take (hd 128's 128×64 w4 with 4 K/V buffers,
// tuning_sm80.hpp; the evidence of bench/results/h200-2026-11-30-1d417b9.md). A file of its own so that nvcc
// compiles these kernels in parallel with bench_prefill.cu; a build without bf16 at a head dim
// (CI's hd 128;256) instantiates none of its candidates (sweep_if_compiled).
#include "bench_prefill.hpp"

namespace muh::cli::prefill_bench {

void sweep_head_dims_64_96(Buffers& buf, int iters, std::vector<Row>& rows) {
  // (block_m, block_n, warps, K/V ring buffers): the row, its ring depths, FA2's hd ≤ 128 shapes
  // (128×128 w8, 128×32), and a 64-row tile for more CTAs per SM. Left out: 128×128 w4 ×2 at
  // hd 64 (100 bytes of spills, -Xptxas -warn-spills). 128×64 w4 ×2 at hd 96 spills 4 bytes.
  sweep_if_compiled<64, Candidate<128, 64, 4, 4>, Candidate<128, 64, 4, 2>, Candidate<128, 64, 4, 3>,
                    Candidate<128, 128, 8, 2>, Candidate<128, 32, 4, 4>, Candidate<64, 64, 4, 4>>(buf, 64, iters,
                                                                                                  rows);
  sweep_if_compiled<96, Candidate<128, 64, 4, 4>, Candidate<128, 64, 4, 2>, Candidate<128, 64, 4, 3>,
                    Candidate<128, 128, 8, 2>, Candidate<128, 32, 4, 4>, Candidate<64, 64, 4, 4>>(buf, 32, iters,
                                                                                                  rows);
}

}  // namespace muh::cli::prefill_bench
