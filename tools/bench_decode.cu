// bench_decode.cu — `muh bench decode` (placeholder until the decode kernels land).
#include "bench.hpp"
#include "commands.hpp"

namespace muh::cli {
void add_bench_decode(CLI::App& bench) {
  bench.add_subcommand("decode", "decode benchmark (not implemented yet)")->callback([] {
    throw UsageError("muh bench decode: not implemented yet");
  });
}
}  // namespace muh::cli
