// cmd_hw.cpp — `muh hw`: the hardware presets muh knows, the present device (or a line saying
// there is none), and what this build compiled.
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "hw_format.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/select.hpp"
#include "muh/hardware.hpp"

namespace muh::cli {
namespace {

struct HwOptions {
  bool json = false;
};

std::string cell(const std::string& s, std::size_t w) {
  std::size_t n = 0;  // code points, so "·" counts once
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n >= w ? s + " " : s + std::string(w - n, ' ');
}

std::vector<std::string> row(const HardwareCapability& hw) {
  return {hw.name,
          hw.is_own_arch() ? "own" : arch_name(hw.compute_capability),
          std::to_string(hw.sm_count),
          format_bytes(hw.max_shared_memory_per_block) + " / " + format_bytes(hw.max_shared_memory_per_block_optin),
          std::to_string(hw.memory_bandwidth_gbps),
          format_bytes(hw.l2_cache_size_bytes),
          std::to_string(hw.warp_size) + " / " + std::to_string(hw.max_threads_per_block),
          hw_flags(hw)};
}

void print_rows(std::ostringstream& o, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      std::size_t n = 0;
      for (unsigned char ch : r[i]) n += (ch & 0xC0) != 0x80;
      w[i] = std::max(w[i], n + 2);
    }
  for (const auto& r : rows) {
    std::string line = "  ";
    for (std::size_t i = 0; i < r.size(); ++i) line += i + 1 < r.size() ? cell(r[i], w[i]) : r[i];
    o << line << "\n";
  }
}

std::string build_line() {
  return "targets " + detail::describe_targets(compiled_targets::values, compiled_targets::size) + "; SASS " +
         MUH_CUDA_ARCHITECTURES_STRING + "; muh " + MUH_VERSION_STRING;
}

void run(const HwOptions& opt) {
  const DeviceQuery q = query_current_device();
  if (opt.json) {
    nlohmann::json j;
    j["presets"] = nlohmann::json::array();
    for (const auto& p : kPresets) j["presets"].push_back(hw_to_json(p));
    j["current"] = q.status.ok() ? hw_to_json(q.hw) : nlohmann::json(nullptr);
    j["current_status"] = q.status.ok() ? std::string("ok") : q.status.message();
    j["build"] = {{"targets", std::vector<int>(compiled_targets::values, compiled_targets::values + compiled_targets::size)},
                  {"cuda_architectures", MUH_CUDA_ARCHITECTURES_STRING},
                  {"version", MUH_VERSION_STRING}};
    if (q.status.ok()) j["build"]["start_target"] = start_target(q.hw);
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::ostringstream o;
  o << "=== muh hw: hardware profiles ===\n\n";
  std::vector<std::vector<std::string>> rows{
      {"profile", "arch", "SMs", "smem/block (opt-in)", "HBM GB/s", "L2", "warp / threads", "features"}};
  for (const auto& p : kPresets) rows.push_back(row(p));
  print_rows(o, rows);
  o << "\n  (vendor datasheet figures; bi-v100 = the seed's HardwareCapability(); --hw NAME selects one)\n\n";
  if (q.status.ok()) {
    o << "present device (--hw current):\n";
    std::vector<std::vector<std::string>> cur{rows[0], row(q.hw)};
    print_rows(o, cur);
    o << "  bandwidth = 2 × memory clock × bus width; its rows are chosen from dispatch target "
      << target_name(start_target(q.hw)) << " down (select.hpp; `muh config --hw current --explain`)\n";
  } else {
    o << "present device: none (" << q.status.message() << ")\n";
  }
  o << "\nthis build: " << build_line() << "\n";
  std::cout << o.str();
}

}  // namespace

void add_hw_command(CLI::App& app) {
  auto* opt = new HwOptions;  // lives as long as the program (CLI11 binds to it)
  CLI::App* cmd = app.add_subcommand("hw", "List the hardware profiles (presets) and the present device, if any");
  cmd->add_flag("--json", opt->json, "Machine-readable output");
  cmd->callback([opt] { run(*opt); });
}

}  // namespace muh::cli
