// verify_targets.cpp — which dispatch targets `muh verify`'s prefill families check (verify.hpp).
#include <string>
#include <vector>

#include "muh/dispatch.hpp"
#include "muh/targets.hpp"
#include "verify.hpp"

namespace muh::cli {

std::vector<int> verify_targets(const VerifyOptions& opt, int cc, const char* family, std::vector<VerifyRow>* rows) {
  std::vector<int> targets;
  for (std::size_t i = 0; i < compiled_targets::size; ++i)
    if (target_runs_on_cc(compiled_targets::values[i], cc) && (opt.only_target < 0 || compiled_targets::values[i] == opt.only_target))
      targets.push_back(compiled_targets::values[i]);
  if (targets.empty() && opt.only_target >= 0)
    rows->push_back({family, "(none)", 0, 0, 0, false,
                     "target " + std::to_string(opt.only_target) + " is not compiled into this build"});
  return targets;
}

}  // namespace muh::cli
