// The tuning tables, rewritten as literal rows (issue 16), must not change a row: every field of
// every policy prefill_policy() / decode_policy() return — smem_cap_bytes included, evidence
// excepted — for every dispatch target (and a few no build compiles), dtype and supported
// head_dim, equals what the tables of 85668f7 returned. tests/data/policies-85668f7.txt is
// scripts/dump_policies.cpp compiled against 85668f7's headers; a deliberate table change
// regenerates it (see that file) and says why in its commit.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "policy_dump.hpp"

namespace muh {
namespace {

// The golden file's lines of one family and target, in the file's order.
std::vector<std::string> golden_lines(const std::string& family, int target) {
  std::ifstream in(std::string(MUH_TEST_DATA_DIR) + "/policies-85668f7.txt");
  std::vector<std::string> v;
  const std::string prefix = family + " target=" + std::to_string(target) + " ";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) v.push_back(line);
  return v;
}

using GoldenKey = std::tuple<std::string, int>;  // family, dispatch target

class PolicyGolden : public ::testing::TestWithParam<GoldenKey> {};

TEST_P(PolicyGolden, SameAsAt85668f7) {
  const auto& [family, target] = GetParam();
  const std::vector<std::string> want = golden_lines(family, target);
  const std::vector<std::string> got = golden::policy_lines(family, target);
  ASSERT_EQ(want.size(), got.size()) << "tests/data/policies-85668f7.txt lacks lines for " << family << " target "
                                     << target;
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]);
}

INSTANTIATE_TEST_SUITE_P(Tables, PolicyGolden,
                         ::testing::Combine(::testing::Values(std::string("prefill"), std::string("decode")),
                                            ::testing::ValuesIn(golden::kTargets)),
                         [](const ::testing::TestParamInfo<GoldenKey>& info) {
                           return std::get<0>(info.param) + "_target" + std::to_string(std::get<1>(info.param));
                         });

TEST(PolicyGolden, FileHoldsEveryLineOnce) {
  std::ifstream in(std::string(MUH_TEST_DATA_DIR) + "/policies-85668f7.txt");
  ASSERT_TRUE(in) << "cannot open tests/data/policies-85668f7.txt";
  std::map<std::string, int> seen;
  for (std::string line; std::getline(in, line);) ++seen[line];
  const std::size_t per_target = std::size(golden::kDTypes) * std::size(golden::kHeadDims);
  EXPECT_EQ(seen.size(), 2 * std::size(golden::kTargets) * per_target);
  for (const auto& [line, n] : seen) EXPECT_EQ(n, 1) << line;
}

}  // namespace
}  // namespace muh
