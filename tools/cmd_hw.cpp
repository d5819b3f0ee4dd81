// cmd_hw.cpp — `muh hw` (placeholder until implemented).
#include "commands.hpp"

namespace muh::cli {
void add_hw_command(CLI::App& app) {
  app.add_subcommand("hw", "not implemented yet")->callback([] { throw UsageError("muh hw: not implemented yet"); });
}
}  // namespace muh::cli
