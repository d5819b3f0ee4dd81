// dump_policies.cpp — prints every policy of the tuning tables of the tree it is compiled
// against (tests/cpu/policy_dump.hpp), for tests/data/policies-<commit>.txt:
//   c++ -std=c++17 -I<tree>/include -Itests/cpu scripts/dump_policies.cpp -o /tmp/dump_policies
//   /tmp/dump_policies > tests/data/policies-<commit>.txt
#include <iostream>

#include "policy_dump.hpp"

int main() {
  for (const char* family : {"prefill", "decode"})
    for (int target : muh::golden::kTargets)
      for (const auto& line : muh::golden::policy_lines(family, target)) std::cout << line << "\n";
}
