// main.cpp — the `muh` program: `muh config`, `muh hw`, `muh verify`, `muh bench`.
#include <cstdio>
#include <exception>
#include <string>

#include "commands.hpp"
#include "muh/build_config.hpp"

namespace muh::cli {
int& exit_code() {
  static int code = 0;
  return code;
}
}  // namespace muh::cli

int main(int argc, char** argv) {
  CLI::App app{"muh: attention kernels for LLM inference, with hardware-aware policy dispatch"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string("muh ") + MUH_VERSION_STRING);
  muh::cli::add_config_command(app);
  muh::cli::add_hw_command(app);
  muh::cli::add_verify_command(app);
  muh::cli::add_bench_command(app);
  try {
    app.parse(argc, argv);
    // No subcommand: the embedded default, `muh config` on the seed's case.
    if (app.get_subcommands().empty()) {
      char prog[] = "muh", cmd[] = "config";
      char* args[] = {prog, cmd};
      app.parse(2, args);
    }
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "muh: error: %s\n", e.what());
    return 2;
  } catch (const muh::cli::UsageError& e) {
    std::fprintf(stderr, "muh: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "muh: error: %s\n", e.what());
    return 2;
  }
  return muh::cli::exit_code();
}
