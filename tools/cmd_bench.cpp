// cmd_bench.cpp — `muh bench decode|prefill|paged`; `muh bench` alone lists them.
#include <cstdio>
#include <string>

#include "bench.hpp"
#include "commands.hpp"

namespace muh::cli {
void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "GPU benchmarks (results as table, CSV and JSON)");
  bench->require_subcommand(0, 1);
  add_bench_decode(*bench);
  add_bench_prefill(*bench);
  add_bench_paged(*bench);
  // Without a subcommand, say which there are (CLI11's own answer was "A subcommand is required").
  bench->callback([bench] {
    if (!bench->get_subcommands().empty()) return;
    std::printf("muh bench: which benchmark? (`muh bench NAME --help` for its options)\n");
    for (const CLI::App* s : bench->get_subcommands([](const CLI::App*) { return true; }))
      std::printf("  %-10s %s\n", s->get_name().c_str(), s->get_description().c_str());
  });
}
}  // namespace muh::cli
