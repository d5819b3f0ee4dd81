// dispatch.cpp — host helpers of dispatch.hpp.
#include "muh/dispatch.hpp"

#include "muh/targets.hpp"

namespace muh::detail {

std::string describe_targets(const int* targets, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += targets[i] == 0 ? std::string("portable") : target_name(targets[i]);
  }
  return s;
}

}  // namespace muh::detail
