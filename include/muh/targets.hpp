// targets.hpp — dispatch targets: what the integers mean and which devices run each.
//
// A dispatch target is 0 (the portable class: own arch, e.g. the BI-V100 profile) or an NVIDIA
// compute capability (75, 80, 86, 89, 90, ...), whose rows run on that arch and every newer one
// (sm_80's code runs on sm_90). One more is arch-specific: kTargetSm90a, the Hopper agent's row,
// whose code uses sm_90a's instructions (wgmma, setmaxnreg) and so runs on compute capability 9.0
// only — not on sm_100 or sm_120. It is written 91 (no device has compute capability 9.1) so that
// it sorts right above 90, the target it falls back to; CMake's MUH_TARGETS and the tools spell
// it "90a".
#pragma once

#include <string>

namespace muh {

inline constexpr int kTargetSm90a = 91;

// The compute capability a target's code is built for (90 for sm_90a).
constexpr int target_arch(int target) { return target == kTargetSm90a ? 90 : target; }

// Whether a target's code runs on a device of compute capability cc (not an own arch): an
// arch-specific target on its own arch only, any other on its arch and newer.
constexpr bool target_runs_on_cc(int target, int cc) {
  return target == kTargetSm90a ? cc == 90 : target <= cc;
}

// Whether a target is arch-specific (its row is taken only where it differs from the target it
// falls back to: the selection's walk passes it over silently otherwise, select.hpp).
constexpr bool target_is_arch_specific(int target) { return target == kTargetSm90a; }

// "portable (0)", "sm_89", "sm_90a".
std::string target_name(int target);

// The target a name or number means: "0", "75", "90", "90a", "sm_90a"; -1 for anything else.
int parse_target(const std::string& s);

}  // namespace muh
