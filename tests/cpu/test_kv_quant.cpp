// muh/kv_quant.hpp — the fp8 codec every fp8 KV-cache path shares (the cache write's kernel and
// its CPU checks): each of the 256 codes of e4m3 ("fn": no infinity, S.1111.111 NaN, largest
// 448) and e5m2 (IEEE-like: ±inf, NaN, largest 57344) against a decoder written out here in
// doubles from the format's definition, plus documented spot values; every finite code
// round-trips through float_to_fp8; every midpoint between neighbouring codes rounds to the even
// one and the floats either side of it to the nearer; beyond the largest finite value (±inf too)
// saturates; NaN stays NaN with its sign; float_to_fp8 picks the nearest code (brute force over
// all codes) for a sweep of float bit patterns; the kv_cache_dtype strings parse as vLLM's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "muh/kv_quant.hpp"

namespace muh {
namespace {

constexpr KVDType kFormats[] = {KVDType::fp8_e4m3, KVDType::fp8_e5m2};

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The value of a code from the format's definition (OCP 8-bit floating point), in double.
// e4m3: bias 7, no infinity, exponent 15 with mantissa 7 NaN. e5m2: bias 15, exponent 31 inf / NaN.
struct Decoded {
  bool nan = false;
  double value = 0;
};
Decoded decode(int code, KVDType t) {
  const bool e5 = t == KVDType::fp8_e5m2;
  const int man_bits = e5 ? 2 : 3, exp_bits = e5 ? 5 : 4, bias = e5 ? 15 : 7;
  const int s = code >> 7, e = (code >> man_bits) & ((1 << exp_bits) - 1), m = code & ((1 << man_bits) - 1);
  const int e_all = (1 << exp_bits) - 1, m_all = (1 << man_bits) - 1;
  Decoded d;
  if (e5 && e == e_all) {
    if (m != 0) d.nan = true;
    else d.value = s ? -HUGE_VAL : HUGE_VAL;
    return d;
  }
  if (!e5 && e == e_all && m == m_all) {
    d.nan = true;
    return d;
  }
  const double frac = static_cast<double>(m) / (1 << man_bits);
  const double mag = e == 0 ? frac * std::pow(2.0, 1 - bias) : (1 + frac) * std::pow(2.0, e - bias);
  d.value = s ? -mag : mag;
  return d;
}

int largest_finite_code(KVDType t) { return t == KVDType::fp8_e4m3 ? 0x7e : 0x7b; }

TEST(KVQuantCodes, EveryCodeDecodesToItsDefinedValue) {
  for (KVDType t : kFormats) {
    int nans = 0, infs = 0;
    for (int c = 0; c < 256; ++c) {
      const Decoded want = decode(c, t);
      const float got = fp8_to_float(static_cast<std::uint8_t>(c), t);
      if (want.nan) {
        ++nans;
        EXPECT_TRUE(std::isnan(got)) << kv_dtype_name(t) << " code " << c;
        continue;
      }
      infs += std::isinf(want.value);
      EXPECT_EQ(static_cast<double>(got), want.value) << kv_dtype_name(t) << " code " << c;
      EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << kv_dtype_name(t) << " code " << c << ": sign (zero too)";
    }
    EXPECT_EQ(nans, t == KVDType::fp8_e4m3 ? 2 : 6) << kv_dtype_name(t);
    EXPECT_EQ(infs, t == KVDType::fp8_e4m3 ? 0 : 2) << kv_dtype_name(t);
  }
}

TEST(KVQuantCodes, DocumentedValues) {
  const auto e4 = KVDType::fp8_e4m3, e5 = KVDType::fp8_e5m2;
  EXPECT_EQ(fp8_to_float(0x7e, e4), 448.f);
  EXPECT_EQ(fp8_to_float(0xfe, e4), -448.f);
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7f, e4)));
  EXPECT_TRUE(std::isnan(fp8_to_float(0xff, e4)));
  EXPECT_EQ(fp8_to_float(0x01, e4), std::ldexp(1.f, -9));   // smallest subnormal
  EXPECT_EQ(fp8_to_float(0x07, e4), 7 * std::ldexp(1.f, -9));
  EXPECT_EQ(fp8_to_float(0x08, e4), std::ldexp(1.f, -6));   // smallest normal
  EXPECT_EQ(fp8_to_float(0x38, e4), 1.f);
  EXPECT_EQ(fp8_to_float(0x39, e4), 1.125f);
  EXPECT_EQ(fp8_to_float(0x77, e4), 240.f);
  EXPECT_EQ(fp8_to_float(0x78, e4), 256.f);
  EXPECT_EQ(fp8_to_float(0x7b, e5), 57344.f);
  EXPECT_EQ(fp8_to_float(0xfb, e5), -57344.f);
  EXPECT_EQ(fp8_to_float(0x7c, e5), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp8_to_float(0xfc, e5), -std::numeric_limits<float>::infinity());
  for (std::uint8_t c : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff}) EXPECT_TRUE(std::isnan(fp8_to_float(c, e5))) << int(c);
  EXPECT_EQ(fp8_to_float(0x01, e5), std::ldexp(1.f, -16));  // smallest subnormal
  EXPECT_EQ(fp8_to_float(0x04, e5), std::ldexp(1.f, -14));  // smallest normal
  EXPECT_EQ(fp8_to_float(0x3c, e5), 1.f);
  EXPECT_EQ(fp8_to_float(0x3d, e5), 1.25f);
  EXPECT_EQ(fp8_format(e4).max_finite, 448.f);
  EXPECT_EQ(fp8_format(e5).max_finite, 57344.f);
}

TEST(KVQuantCodes, PositiveCodesIncreaseStrictly) {
  for (KVDType t : kFormats)
    for (int c = 0; c < largest_finite_code(t); ++c)
      EXPECT_LT(fp8_to_float(static_cast<std::uint8_t>(c), t), fp8_to_float(static_cast<std::uint8_t>(c + 1), t))
          << kv_dtype_name(t) << " code " << c;
}

TEST(KVQuantRounding, EveryFiniteCodeRoundTrips) {
  for (KVDType t : kFormats)
    for (int c = 0; c < 256; ++c) {
      const float v = fp8_to_float(static_cast<std::uint8_t>(c), t);
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(int(float_to_fp8(v, t)), c) << kv_dtype_name(t) << " value " << v;
    }
}

// The midpoint of two neighbouring codes is a tie: it goes to the even code (the one whose
// mantissa ends in 0 — across a binade the next binade's first code); a float either side of it
// goes to the nearer code. Both signs.
TEST(KVQuantRounding, TiesToEvenAndNearestAroundEveryMidpoint) {
  for (KVDType t : kFormats)
    for (int c = 0; c < largest_finite_code(t); ++c) {
      const double lo = fp8_to_float(static_cast<std::uint8_t>(c), t);
      const double hi = fp8_to_float(static_cast<std::uint8_t>(c + 1), t);
      const float mid = static_cast<float>((lo + hi) / 2);
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << "the midpoint is a float";
      const int even = (c % 2 == 0) ? c : c + 1;
      EXPECT_EQ(int(float_to_fp8(mid, t)), even) << kv_dtype_name(t) << " midpoint " << mid;
      EXPECT_EQ(int(float_to_fp8(-mid, t)), 0x80 | even) << kv_dtype_name(t) << " midpoint " << -mid;
      const float below = std::nextafter(mid, 0.f), above = std::nextafter(mid, HUGE_VALF);
      EXPECT_EQ(int(float_to_fp8(below, t)), c) << kv_dtype_name(t) << " just below " << mid;
      EXPECT_EQ(int(float_to_fp8(above, t)), c + 1) << kv_dtype_name(t) << " just above " << mid;
      EXPECT_EQ(int(float_to_fp8(-above, t)), 0x80 | (c + 1)) << kv_dtype_name(t) << " just above " << -mid;
    }
  // The brief's examples (e4m3, spacing 0.125 at 1): 1.0625 → 1.0, 1.1875 → 1.25.
  EXPECT_EQ(float_to_fp8(1.0625f, KVDType::fp8_e4m3), 0x38);
  EXPECT_EQ(float_to_fp8(1.1875f, KVDType::fp8_e4m3), 0x3a);
  EXPECT_EQ(fp8_to_float(0x3a, KVDType::fp8_e4m3), 1.25f);
  // Half the smallest subnormal is a tie with 0 (even).
  EXPECT_EQ(float_to_fp8(std::ldexp(1.f, -10), KVDType::fp8_e4m3), 0x00);
  EXPECT_EQ(float_to_fp8(std::ldexp(1.f, -17), KVDType::fp8_e5m2), 0x00);
  // e4m3 subnormals are multiples of 2^-9: 0.75 units → 1; 1.5 and 2.5 units are ties → 2 (even).
  EXPECT_EQ(float_to_fp8(std::ldexp(3.f, -11), KVDType::fp8_e4m3), 0x01);
  EXPECT_EQ(float_to_fp8(std::ldexp(3.f, -10), KVDType::fp8_e4m3), 0x02);
  EXPECT_EQ(float_to_fp8(std::ldexp(5.f, -10), KVDType::fp8_e4m3), 0x02);
}

TEST(KVQuantRounding, SaturatesBeyondTheLargestFiniteValue) {
  const float inf = std::numeric_limits<float>::infinity(), fmax = std::numeric_limits<float>::max();
  const auto e4 = KVDType::fp8_e4m3, e5 = KVDType::fp8_e5m2;
  for (float x : {448.f, 449.f, 463.99f, 464.f, 480.f, 1e6f, fmax, inf}) {
    EXPECT_EQ(int(float_to_fp8(x, e4)), 0x7e) << x;
    EXPECT_EQ(int(float_to_fp8(-x, e4)), 0xfe) << -x;
  }
  for (float x : {57344.f, 60000.f, 61440.f, 65536.f, 1e9f, fmax, inf}) {
    EXPECT_EQ(int(float_to_fp8(x, e5)), 0x7b) << x;
    EXPECT_EQ(int(float_to_fp8(-x, e5)), 0xfb) << -x;
  }
  // Just under the top: the normal rounding.
  EXPECT_EQ(int(float_to_fp8(420.f, e4)), 0x7d);  // 416 | 448: 420 is nearer 416
  EXPECT_EQ(int(float_to_fp8(433.f, e4)), 0x7e);
}

TEST(KVQuantRounding, NaNStaysNaNAndTinyValuesKeepTheirSign) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), snan = from_bits(0x7f800001u);
  for (KVDType t : kFormats) {
    EXPECT_EQ(int(float_to_fp8(nan, t)), 0x7f) << kv_dtype_name(t);
    EXPECT_EQ(int(float_to_fp8(-nan, t)), 0xff) << kv_dtype_name(t);
    EXPECT_EQ(int(float_to_fp8(from_bits(0xffc12345u), t)), 0xff) << kv_dtype_name(t);
    EXPECT_TRUE(std::isnan(fp8_to_float(float_to_fp8(snan, t), t))) << kv_dtype_name(t);
    EXPECT_TRUE(std::isnan(fp8_to_float(float_to_fp8(-nan, t), t))) << kv_dtype_name(t);
    for (float tiny : {1e-30f, std::numeric_limits<float>::denorm_min(), 0.f}) {
      EXPECT_EQ(int(float_to_fp8(tiny, t)), 0x00) << tiny;
      EXPECT_EQ(int(float_to_fp8(-tiny, t)), 0x80) << -tiny;
    }
  }
}

// The nearest code by brute force over every finite code (ties to the even code; beyond the
// largest finite value, that value), for positive x.
int nearest_code(double x, KVDType t) {
  const int top = largest_finite_code(t);
  if (x >= fp8_to_float(static_cast<std::uint8_t>(top), t)) return top;
  int best = 0;
  double best_d = HUGE_VAL;
  for (int c = 0; c <= top; ++c) {
    const double d = std::fabs(x - fp8_to_float(static_cast<std::uint8_t>(c), t));
    if (d < best_d || (d == best_d && c % 2 == 0)) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

TEST(KVQuantRounding, NearestCodeForASweepOfFloats) {
  std::vector<float> xs;
  for (std::uint64_t u = 0; u < 0x7f800000u; u += 40961) xs.push_back(from_bits(static_cast<std::uint32_t>(u)));
  std::mt19937 rng(3);
  for (int i = 0; i < 40000; ++i)  // log-uniform over the formats' ranges
    xs.push_back(std::ldexp(std::uniform_real_distribution<float>(1.f, 2.f)(rng), int(rng() % 40) - 22));
  for (KVDType t : kFormats)
    for (float x : xs) {
      const int want = nearest_code(x, t);
      ASSERT_EQ(int(float_to_fp8(x, t)), want) << kv_dtype_name(t) << " x = " << x << " (bits " << std::hex
                                               << bits_of(x) << ")";
      ASSERT_EQ(int(float_to_fp8(-x, t)), 0x80 | want) << kv_dtype_name(t) << " x = " << -x;
    }
}

TEST(KVQuantNames, ParseKvDtypeTakesVllmsStrings) {
  EXPECT_EQ(parse_kv_dtype("auto"), KVDType::same);
  EXPECT_EQ(parse_kv_dtype("fp8"), KVDType::fp8_e4m3);  // vLLM's "fp8" on CUDA
  EXPECT_EQ(parse_kv_dtype("fp8_e4m3"), KVDType::fp8_e4m3);
  EXPECT_EQ(parse_kv_dtype("fp8_e5m2"), KVDType::fp8_e5m2);
  for (const char* bad : {"", "Auto", "FP8", "fp8_e4m3fn", "fp8_inc", "fp8_ds_mla", "int8", "fp16", "bf16", "float8",
                          "fp8 ", " auto", "e4m3fn", "fp4"})
    EXPECT_FALSE(parse_kv_dtype(bad).has_value()) << "'" << bad << "'";
  EXPECT_EQ(kv_dtype_name(KVDType::same), "auto");
  EXPECT_EQ(kv_dtype_name(KVDType::fp8_e4m3), "fp8_e4m3");
  EXPECT_EQ(kv_dtype_name(KVDType::fp8_e5m2), "fp8_e5m2");
  for (KVDType t : {KVDType::same, KVDType::fp8_e4m3, KVDType::fp8_e5m2})
    EXPECT_EQ(parse_kv_dtype(kv_dtype_name(t)), t) << "the name parses back";
}

TEST(KVQuantNames, ElementSizes) {
  EXPECT_FALSE(is_fp8(KVDType::same));
  EXPECT_TRUE(is_fp8(KVDType::fp8_e4m3));
  EXPECT_TRUE(is_fp8(KVDType::fp8_e5m2));
  EXPECT_EQ(kv_elem_size(KVDType::same, 2), 2);
  EXPECT_EQ(kv_elem_size(KVDType::same, 4), 4);
  EXPECT_EQ(kv_elem_size(KVDType::fp8_e4m3, 2), 1);
  EXPECT_EQ(kv_elem_size(KVDType::fp8_e5m2, 4), 1);
  const KVQuant q;
  EXPECT_EQ(q.dtype, KVDType::same);
  EXPECT_EQ(q.k_scale, 1.f);
  EXPECT_EQ(q.v_scale, 1.f);
}

}  // namespace
}  // namespace muh
