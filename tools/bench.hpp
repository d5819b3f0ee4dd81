// bench.hpp — `muh bench <family>`: one file per family registers its subcommand.
#pragma once

#include <CLI/CLI.hpp>

namespace muh::cli {

void add_bench_decode(CLI::App& bench);   // bench_decode.cu
void add_bench_prefill(CLI::App& bench);  // bench_prefill.cu
void add_bench_paged(CLI::App& bench);    // bench_paged_seed.cu

}  // namespace muh::cli
