// cmd_config.cpp — `muh config` (placeholder until implemented).
#include "commands.hpp"

namespace muh::cli {
void add_config_command(CLI::App& app) {
  app.add_subcommand("config", "not implemented yet")->callback([] { throw UsageError("muh config: not implemented yet"); });
}
}  // namespace muh::cli
