// The one printed form of a policy (tuning/policy_io.hpp), which `muh verify`, `muh bench prefill`
// and the GPU tests print: its canonical strings, and that two policies print alike exactly when
// they are ==.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "muh/shapes.hpp"
#include "muh/tuning/policy_io.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

TEST(PolicyIo, CanonicalForms) {
  EXPECT_EQ(to_string(prefill_policy(90, DType::bf16, 256)), "sm80 128x64 w8 s4 pp");
  EXPECT_EQ(to_string(prefill_policy(86, DType::bf16, 256)), "sm80 64x64 w4 s2");
  EXPECT_EQ(to_string(prefill_policy(0, DType::bf16, 256)), "portable 32x32 w4 s1");
  EXPECT_EQ(to_string(decode_policy(90, DType::bf16, 128)), "sm80 w4 64tok s3 c2 p128 tma");
  EXPECT_EQ(to_string(decode_policy(0, DType::fp16, 256)), "portable w8 32tok s1 c2 p512");
  EXPECT_EQ(to_string(prefill_policy(90, DType::bf16, 256), DType::bf16, 256),
            "sm80 128x64 w8 s4 pp, smem 214080 of 232448 B");
  EXPECT_EQ(to_string(decode_policy(86, DType::fp16, 256), DType::fp16, 256),
            "sm80 w2 32tok s2 c1 p128, smem 76032 of 101376 B");
  std::ostringstream s;
  s << prefill_policy(75, DType::fp16, 128) << " | " << decode_policy(80, DType::bf16, 64);
  EXPECT_EQ(s.str(), "sm75 64x64 w4 s1 | sm80 w4 64tok s4 c2 p128");
}

// Two policies print alike exactly when they are ==, over every row the tables give.
template <class Policy, class Get>
void expect_print_iff_equal(Get get) {
  std::vector<Policy> all;
  for (int target : {0, 75, 80, 86, 89, 90})
    for (DType t : {DType::fp16, DType::bf16, DType::fp32})
      for (int hd : kSupportedHeadDims) all.push_back(get(target, t, hd));
  for (const Policy& a : all)
    for (const Policy& b : all) EXPECT_EQ(to_string(a) == to_string(b), a == b) << a << " / " << b;
}

TEST(PolicyIo, PrintsAlikeExactlyWhenEqual) {
  expect_print_iff_equal<PrefillPolicy>(prefill_policy);
  expect_print_iff_equal<DecodePolicy>(decode_policy);
}

}  // namespace
}  // namespace muh
