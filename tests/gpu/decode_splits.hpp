// decode_splits.hpp — the V1 / V2 checks the forced decode suites share (test_decode_fp8.cu,
// test_decode_variants.cu): V1 against the reference and bitwise run-to-run, then V2 at a split
// count against the reference and within V1's tolerance of V1. Each suite adds its own checks.
// Helpers with ASSERTs: call them under ASSERT_NO_FATAL_FAILURE.
#pragma once

#include <gtest/gtest.h>

#include "decode_case.hpp"
#include "gpu_test_util.hpp"
#include "muh/hardware.hpp"

namespace muh::testing {

// V1 (one split): passes the reference, and a second run is bitwise the same.
inline void expect_v1(check::DecodeProblem& pr, const HardwareCapability& hw, check::DecodeOutcome* v1) {
  *v1 = pr.run(hw, 1);
  ASSERT_TRUE(v1->error.empty()) << v1->error;
  EXPECT_TRUE(v1->pass()) << "V1: " << v1->summary();
  const check::DecodeOutcome again = pr.run(hw, 1);
  EXPECT_EQ(again.out_bytes, v1->out_bytes) << "two V1 runs differ bitwise";
}

// V2 at `splits`: passes the reference and lies within v1.tol of V1.
inline void expect_v2(check::DecodeProblem& pr, const HardwareCapability& hw, const check::DecodeOutcome& v1,
                      int splits, check::DecodeOutcome* v2) {
  *v2 = pr.run(hw, splits);
  ASSERT_TRUE(v2->error.empty()) << splits << " splits: " << v2->error;
  EXPECT_TRUE(v2->pass()) << splits << " splits: " << v2->summary();
  const double diff = max_abs_diff(v1.out, v2->out);
  EXPECT_LE(diff, v1.tol) << splits << " splits: V2 differs from V1 by " << diff;
}

}  // namespace muh::testing
