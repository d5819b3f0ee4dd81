// bench_prefill.cu — `muh bench prefill` (placeholder until the prefill kernels land).
#include "bench.hpp"
#include "commands.hpp"

namespace muh::cli {
void add_bench_prefill(CLI::App& bench) {
  bench.add_subcommand("prefill", "prefill benchmark (not implemented yet)")->callback([] {
    throw UsageError("muh bench prefill: not implemented yet");
  });
}
}  // namespace muh::cli
