// cmd_bench.cpp — `muh bench` (placeholder until implemented).
#include "commands.hpp"

namespace muh::cli {
void add_bench_command(CLI::App& app) {
  app.add_subcommand("bench", "not implemented yet")->callback([] { throw UsageError("muh bench: not implemented yet"); });
}
}  // namespace muh::cli
