// cmd_verify.cpp — `muh verify [--quick] [--seed N] [--emulate bi-v100]`: every compiled decode and
// prefill policy the present GPU can run, forced, against the CPU reference (verify_decode.cpp,
// verify_prefill.cpp; the prefill policies over paged K/V, both layouts: verify_paged_prefill.cpp), with a progress bar on stderr and a summary table on stdout (policy, shapes
// tried, max error, tolerance, pass/fail). --emulate bi-v100: the same checks of the portable agent
// (target 0) only, run on a 16-SM green partition (check/green_partition.hpp) with plans from
// stream_profile() — the BI-V100's SM count. Exit code 0 when everything passes, 1 on any
// failure, 2 without a GPU (or, with --emulate, without a 16-SM partition).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "green_partition.hpp"
#include "muh/hardware.hpp"
#include "verify.hpp"

namespace muh::cli {

namespace {

// "[########..........]  37/120  target 90 bf16 hd128: sm80 ..." redrawn in place on stderr.
void draw_progress(int done, int total, const std::string& what) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? done * kWidth / total : kWidth;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::string label = what.size() > 48 ? what.substr(0, 45) + "..." : what;
  std::fprintf(stderr, "\r[%s] %4d/%-4d %-48s", bar.c_str(), done, total, label.c_str());
  std::fflush(stderr);
}

void print_table(const std::vector<VerifyRow>& rows) {
  std::size_t w = 6;
  for (const auto& r : rows) w = std::max(w, r.policy.size());
  std::printf("%-8s  %-*s  %6s  %10s  %10s  %s\n", "family", int(w), "policy", "shapes", "max error", "tolerance",
              "result");
  for (const auto& r : rows) {
    std::printf("%-8s  %-*s  %6d  %10.3g  %10.3g  %s", r.family.c_str(), int(w), r.policy.c_str(), r.shapes, r.max_err,
                r.tol, r.pass ? "pass" : "FAIL");
    if (!r.note.empty()) std::printf("  %s", r.note.c_str());
    std::printf("\n");
  }
}

// --emulate bi-v100: the 16-SM partition the checks run on; UsageError (exit 2) without one.
void start_emulation(check::GreenPartition& green, VerifyOptions& opt) {
  const std::string who = "muh verify: --emulate bi-v100: ";
  constexpr int kSms = presets::bi_v100.sm_count;  // 16, the seed's profile
  const std::string why = green.create(kSms);
  if (!why.empty()) throw UsageError(who + "no 16-SM partition of this device: " + why);
  if (green.sms() != kSms)
    throw UsageError(who + "the device partitions in other sizes (asked 16 SMs, got " + std::to_string(green.sms()) + ")");
  HardwareCapability hw;
  const Status s = stream_profile(green.stream(), &hw);
  if (!s.ok()) throw UsageError(who + s.message());
  if (hw.sm_count != kSms)
    throw UsageError(who + "stream_profile() sees " + std::to_string(hw.sm_count) + " SMs on the 16-SM partition");
  opt.stream = green.stream();
  opt.only_target = 0;
  std::printf("emulating bi-v100: the portable agent (target 0) on a 16-SM green partition of %s, plans for %d SMs\n",
              hw.name, hw.sm_count);
}

}  // namespace

void add_verify_command(CLI::App& app) {
  static VerifyOptions opt;
  CLI::App* cmd = app.add_subcommand(
      "verify", "run every compiled decode, prefill and paged-prefill policy this GPU can run, forced, against the CPU reference");
  cmd->add_flag("--quick", opt.quick, "fewer shapes per policy");
  cmd->add_option("--seed", opt.seed, "seed of the random inputs");
  cmd->add_option("--emulate", opt.emulate,
                  "bi-v100: only the portable agent (target 0), on a 16-SM green partition, planned for 16 SMs")
      ->check(CLI::IsMember({"bi-v100"}));
  cmd->callback([] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();
      throw UsageError("muh verify: no CUDA device (verify runs the kernels on the present GPU)");
    }
    check::GreenPartition green;  // outlives the checks that run on its stream
    if (!opt.emulate.empty()) start_emulation(green, opt);
    std::vector<VerifyRow> rows;
    for (auto* family : {&verify_decode, &verify_prefill, &verify_paged_prefill}) {
      std::string last;
      auto progress = [&](int done, int total, const std::string& what) {
        last = what;
        draw_progress(done, total, what);
      };
      auto part = (*family)(opt, progress);
      std::fprintf(stderr, "\n");
      rows.insert(rows.end(), part.begin(), part.end());
    }
    print_table(rows);
    const bool ok = std::all_of(rows.begin(), rows.end(), [](const VerifyRow& r) { return r.pass; });
    int shapes = 0, fails = 0;
    for (const auto& r : rows) {
      shapes += r.shapes;
      fails += r.pass ? 0 : 1;
    }
    std::printf("\n%s: %zu policies, %d shapes, %d failing\n", ok ? "PASS" : "FAIL", rows.size(), shapes, fails);
    exit_code() = ok ? 0 : 1;
  });
}

}  // namespace muh::cli
