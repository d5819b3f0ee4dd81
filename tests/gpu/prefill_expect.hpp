// prefill_expect.hpp — the checks every prefill case's result passes (check::PrefillResult from
// prefill_check.hpp / paged_prefill_check.hpp), shared by the prefill, paged-prefill and variant
// GPU tests: no NaN/Inf left in the NaN-prefilled output, lse as the reference's, two runs bitwise
// equal, and the error within the case's tolerance (2x the naive same-precision error).
#pragma once

#include <gtest/gtest.h>

#include "prefill_check.hpp"

namespace muh::testing {

// The status is the caller's to assert first (a fatal failure here would not stop the caller).
// nan_note: where the NaN a leftover would come from (the outputs' pre-fill; paged: the unused
// cache slots too).
inline void expect_matches_reference(const check::PrefillResult& r, double naive_err, double max_ref,
                                     const char* nan_note = "pre-filled with NaN") {
  EXPECT_EQ(r.nonfinite, 0u) << "outputs left NaN/Inf (" << nan_note << ")";
  EXPECT_EQ(r.lse_mismatch, 0u) << "max finite lse error " << r.max_lse_err;
  EXPECT_TRUE(r.deterministic) << "two runs differ bitwise";
  EXPECT_LE(r.max_err, r.tol) << "naive error at the input precision " << naive_err << ", max |ref| " << max_ref;
}

}  // namespace muh::testing
