// commands.hpp — the subcommands of the `muh` program, one file each.
//
// Exit codes: 0 success, 1 a check failed (verify), 2 bad input (one line on stderr).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "muh/variant.hpp"

namespace muh::cli {

// Thrown by a command for bad input: main() prints "muh: error: <message>" and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Set by a command's callback; returned by main().
int& exit_code();

void add_config_command(CLI::App& app);   // cmd_config.cpp: policy selection, --json, --explain
void add_hw_command(CLI::App& app);       // cmd_hw.cpp: presets and the present device
void add_verify_command(CLI::App& app);   // cmd_verify.cpp: forced-policy sweep vs the reference
void add_bench_command(CLI::App& app);    // cmd_bench.cpp: `bench decode`, `bench prefill`

// A --variant list ("window=L[:R],softcap=X,sinks,alibi"; cmd_config.cpp) as a Variant without
// its per-head arrays (the caller supplies sinks / alibi_slopes where use_sinks / use_alibi).
// Throws UsageError naming the bad item.
Variant parse_variant(const std::string& list);

}  // namespace muh::cli
