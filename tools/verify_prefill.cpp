// verify_prefill.cpp — the prefill part of `muh verify`: every compiled prefill policy the present
// device can run, forced, on the shapes of prefill_check.hpp (the same check as
// tests/gpu/test_prefill.cu), against the CPU reference. One row per (target, dtype, head_dim).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/select.hpp"
#include "muh/tuning/policy_io.hpp"
#include "muh/tuning/selectors.hpp"
#include "prefill_check.hpp"
#include "verify.hpp"

namespace muh::cli {

namespace {
// "target 90 fp16 hd256: sm80 128x64 w8 s4 pp"
std::string describe(int target, DType t, int d) {
  return "target " + target_name(target) + " " + std::string(dtype_name(t)) + " hd" + std::to_string(d) + ": " +
         to_string(prefill_policy(target, t, d));
}
}  // namespace

std::vector<VerifyRow> verify_prefill(const VerifyOptions& opt, const VerifyProgress& progress) {
  std::vector<VerifyRow> rows;
  HardwareCapability hw;
  // --emulate: the profile of the checks' stream (its SMs); else the device's.
  if (const Status s = opt.stream ? stream_profile(opt.stream, &hw) : device_profile(-1, &hw); !s.ok()) {
    rows.push_back({"prefill", "(none)", 0, 0, 0, false, s.message() + ": nothing verified"});
    return rows;
  }
  const int cc = hw.compute_capability;

  // --quick: the two varlen shapes (GQA 4 causal, GQA 8 with k ≠ q); otherwise all of them.
  const std::size_t n_cases = opt.quick ? 2 : check::prefill_cases().size();
  const std::vector<int> targets = verify_targets(opt, cc, "prefill", &rows);
  const int total = int(targets.size() * std::size(kCompiledInstances) * n_cases);
  int done = 0;
  for (int target : targets) {
    for (const auto& [t, d] : kCompiledInstances) {
      VerifyRow row{"prefill", describe(target, t, d), 0, 0, 0, true, ""};
      // A forced row this device cannot run (the selection says why: e.g. sm_90's 209 KB row on a
      // 99 KB part) is not a failure of the kernel: say so and go on.
      if (const PrefillSelection sel = choose_prefill(hw, t, d, SelectOptions{target}); !sel.ok()) {
        row.note = "not run: " + describe(sel);
        rows.push_back(std::move(row));
        done += int(n_cases);
        continue;
      }
      double worst_ratio = -1;
      for (std::size_t c = 0; c < n_cases; ++c) {
        const auto& in = check::cached_prefill_inputs(c, t, d, opt.seed);
        const check::PrefillResult r = check::run_prefill_case(in, target, {}, opt.stream);
        ++row.shapes;
        keep_worst(row, worst_ratio, r.max_err, r.tol);
        if (!r.pass || !r.status.ok()) {
          row.pass = false;
          row.note += std::string(check::prefill_cases()[c].name) + ": " + r.note + " ";
        }
        if (progress) progress(++done, total, row.policy + " " + check::prefill_cases()[c].name);
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace muh::cli
