// cmd_bench.cpp — `muh bench decode|prefill`.
#include "bench.hpp"
#include "commands.hpp"

namespace muh::cli {
void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "GPU benchmarks (results as table, CSV and JSON)");
  bench->require_subcommand(1);
  add_bench_decode(*bench);
  add_bench_prefill(*bench);
}
}  // namespace muh::cli
