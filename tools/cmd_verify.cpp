// cmd_verify.cpp — `muh verify` (placeholder until implemented).
#include "commands.hpp"

namespace muh::cli {
void add_verify_command(CLI::App& app) {
  app.add_subcommand("verify", "not implemented yet")->callback([] { throw UsageError("muh verify: not implemented yet"); });
}
}  // namespace muh::cli
