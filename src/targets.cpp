// targets.cpp — the names of dispatch targets (targets.hpp).
#include "muh/targets.hpp"

#include <cctype>
#include <string>

namespace muh {

std::string target_name(int target) {
  if (target == 0) return "portable (0)";
  if (target == kTargetSm90a) return "sm_90a";
  return "sm_" + std::to_string(target);
}

int parse_target(const std::string& text) {
  std::string s = text;
  if (s.rfind("sm_", 0) == 0) s = s.substr(3);
  if (s == "90a") return kTargetSm90a;
  if (s.empty() || s.size() > 4) return -1;
  for (char ch : s)
    if (!std::isdigit(static_cast<unsigned char>(ch))) return -1;
  const int v = std::stoi(s);
  return v == kTargetSm90a ? -1 : v;  // 91 is the code of "90a", not a name of it
}

}  // namespace muh
