// The tuning tables as literal rows (tuning/tuning_*.hpp): fit() is the rule the rows were fitted
// with, and every tensor-core row names a result file under bench/results/ that exists.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "muh/shapes.hpp"
#include "muh/tuning/policy_io.hpp"  // gtest prints policies through it
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

constexpr DType k16BitTypes[] = {DType::fp16, DType::bf16};
constexpr int kTargets[] = {0, 75, 80, 86, 89, 90};

// ---- fit(): the rule, in its order --------------------------------------------------------------

TEST(Fit, PrefillHalvesBlockNThenDropsBuffers) {
  // 128×64 w4 ×4 at bf16 hd 256 is 192 KB: block_n 64 → 32 (128 KB, still over 99 KB), then
  // buffers 4 → 3 → 2 (96 KB).
  const PrefillPolicy row{Agent::sm80, 128, 64, 4, 4, 0, ""};
  const PrefillPolicy p = tuning::fit(row, DType::bf16, 256, tuning::sm80::kSmemCap99K);
  EXPECT_EQ(p.block_n, 32);
  EXPECT_EQ(p.num_stages, 2);
  EXPECT_EQ(p.smem_cap_bytes, tuning::sm80::kSmemCap99K);
  EXPECT_EQ(prefill_smem_bytes(p, DType::bf16, 256), 98304);
}

TEST(Fit, PrefillFloorsAre32TokensOnSm80And16OnSm75AndTwoBuffers) {
  const PrefillPolicy sm80 = tuning::fit({Agent::sm80, 128, 64, 4, 4, 0, ""}, DType::bf16, 256, 48 * 1024);
  EXPECT_EQ(sm80.block_n, 32);
  EXPECT_EQ(sm80.num_stages, 2);  // still over 48 KB: the rule stops at its floors
  const PrefillPolicy sm75 = tuning::fit({Agent::sm75, 64, 64, 4, 1, 0, ""}, DType::fp16, 256, 32 * 1024);
  EXPECT_EQ(sm75.block_n, 16);
  EXPECT_EQ(sm75.num_stages, 1);
}

TEST(Fit, LeavesThePortableAgentToItsOwnRule) {
  const PrefillPolicy p = tuning::portable::prefill(DType::fp32, 256);
  EXPECT_EQ(tuning::fit(p, DType::fp32, 256, 16 * 1024), p);
  const DecodePolicy d = tuning::portable::decode(DType::fp32, 256);
  EXPECT_EQ(tuning::fit(d, DType::fp32, 256, 16 * 1024), d);
}

// The decode rule as 85668f7's fit_decode() applied it: from 4 warps × 4 stages × 2 CTAs/SM (1 at
// hd 256) it gives every sm_80 / sm_86 / sm_89 row, and sm_90's up to hd 128.
DecodePolicy old_start(int head_dim) { return {Agent::sm80, 4, 64, 4, 128, head_dim <= 128 ? 2 : 1, 0, ""}; }

DecodePolicy fitted_old_start(int target, DType t, int hd) {
  const DecodePolicy row = decode_policy(target, t, hd);
  DecodePolicy p = tuning::fit(old_start(hd), t, hd, row.smem_cap_bytes);
  p.tma = row.tma;  // TMA is the sm_90 rows' choice where a head is whole 64-dim boxes, not the fit's
  return p;
}

using RowKey = std::tuple<int, DType, int>;  // target, dtype, head_dim

std::string key_name(const ::testing::TestParamInfo<RowKey>& info) {
  const auto [target, t, hd] = info.param;
  return (target == 0 ? std::string("portable") : "sm" + std::to_string(target)) + "_" +
         std::string(dtype_name(t)) + "_hd" + std::to_string(hd);
}

class DecodeRowFromTheOldStart : public ::testing::TestWithParam<RowKey> {};

TEST_P(DecodeRowFromTheOldStart, IsItsFit) {
  const auto [target, t, hd] = GetParam();
  EXPECT_EQ(fitted_old_start(target, t, hd), decode_policy(target, t, hd));
}

INSTANTIATE_TEST_SUITE_P(Sm80Class, DecodeRowFromTheOldStart,
                         ::testing::Combine(::testing::Values(80, 86, 89), ::testing::ValuesIn(k16BitTypes),
                                            ::testing::ValuesIn(kSupportedHeadDims)),
                         key_name);
INSTANTIATE_TEST_SUITE_P(Sm90, DecodeRowFromTheOldStart,
                         ::testing::Combine(::testing::Values(90), ::testing::ValuesIn(k16BitTypes),
                                            ::testing::Values(64, 96, 128)),
                         key_name);

// The sm_80-class rows are the H200 row of their head dim fitted to the part's cap, TMA off.
class DecodeRowFromTheH200Row : public ::testing::TestWithParam<RowKey> {};

TEST_P(DecodeRowFromTheH200Row, IsItsFit) {
  const auto [target, t, hd] = GetParam();
  DecodePolicy h200 = decode_policy(90, t, hd);
  h200.tma = false;
  const DecodePolicy row = decode_policy(target, t, hd);
  EXPECT_EQ(tuning::fit(h200, t, hd, row.smem_cap_bytes), row);
}

INSTANTIATE_TEST_SUITE_P(Sm80Class, DecodeRowFromTheH200Row,
                         ::testing::Combine(::testing::Values(80, 86, 89), ::testing::ValuesIn(k16BitTypes),
                                            ::testing::ValuesIn(kSupportedHeadDims)),
                         key_name);

// sm_90's hd-256 row takes the 3 stages the fit leaves: the third holds the tile whose QKᵀ runs
// beside the previous tile's softmax and PV (Sm80Traits::kOverlap; h200-2026-12-06-tile-pipeline.md).
// Without that overlap 2 stages had measured ahead of 3 (TMA sweep, 7c8baeb).
TEST(Sm90DecodeRow, Hd256IsTheFitsThreeStagesOfTheOneTileOverlap) {
  EXPECT_EQ(fitted_old_start(90, DType::bf16, 256).num_stages, 3);
  EXPECT_EQ(decode_policy(90, DType::bf16, 256).num_stages, 3);
}

// ---- Evidence: every tensor-core row names a result file under bench/results/ that exists --------

class Evidence : public ::testing::TestWithParam<RowKey> {};

void expect_names_result_file(const std::string& evidence) {
  static const std::regex file(R"(([A-Za-z0-9_.-]+\.(md|log|csv|json|txt)))");
  int named = 0;
  for (std::sregex_iterator it(evidence.begin(), evidence.end(), file), end; it != end; ++it) {
    ++named;
    const std::string path = std::string(MUH_TEST_DATA_DIR) + "/../../bench/results/" + (*it)[1].str();
    EXPECT_TRUE(std::ifstream(path).good()) << "bench/results/" << (*it)[1] << " does not exist: " << evidence;
  }
  EXPECT_GT(named, 0) << "names no result file: " << evidence;
}

TEST_P(Evidence, TensorCoreRowsNameAnExistingResultFile) {
  const auto [target, t, hd] = GetParam();
  const PrefillPolicy p = prefill_policy(target, t, hd);
  if (p.agent != Agent::portable) expect_names_result_file(p.evidence);
  const DecodePolicy d = decode_policy(target, t, hd);
  if (d.agent != Agent::portable) expect_names_result_file(d.evidence);
}

INSTANTIATE_TEST_SUITE_P(AllRows, Evidence,
                         ::testing::Combine(::testing::ValuesIn(kTargets), ::testing::ValuesIn(k16BitTypes),
                                            ::testing::ValuesIn(kSupportedHeadDims)),
                         key_name);

}  // namespace
}  // namespace muh
