// kv_quant.hpp — a quantised KV cache: what the cache's elements are (KVDType), the per-tensor
// scales that dequantise them (vLLM's k_scale / v_scale), and the fp8 codes themselves, written
// once for the host (the CPU reference, the tests, the cache-write checks) and the device (the
// cache-write kernel).
//
//   same      the cache holds q's dtype (vLLM's kv_cache_dtype "auto"); the scales are not read
//   fp8_e4m3  OCP/NVIDIA e4m3 "fn": 4 exponent bits (bias 7), 3 mantissa bits, no infinity,
//             S.1111.111 is NaN; largest finite 448 (vLLM's "fp8" and "fp8_e4m3" on CUDA)
//   fp8_e5m2  IEEE-like e5m2: 5 exponent bits (bias 15), 2 mantissa bits, ±inf, NaN; largest
//             finite 57344 (vLLM's "fp8_e5m2")
//
// Dequantised value = fp8 value · scale (k_scale for K, v_scale for V), as vLLM's caches hold
// them: the cache write divides by the scale, then rounds to the nearest fp8 value (ties to
// even) and saturates to the largest finite one (CUDA's __NV_SATFINITE; NaN stays NaN).
// Every fp8 value is exact in fp16 and in bf16 (3 or 2 mantissa bits, exponents 2^−16 .. 2^15),
// so a kernel that widens the codes to q's 16-bit type loses nothing; the scales are applied in
// fp32 (k_scale with the softmax scale, v_scale to the output).
//
// Per-(token, head) scales (FlashInfer #3617) are not implemented: a call names one k_scale and
// one v_scale.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "muh/host_device.hpp"

namespace muh {

enum class KVDType : std::uint8_t { same = 0, fp8_e4m3 = 1, fp8_e5m2 = 2 };

// The cache a call reads: its element type and scales (DecodeParams::kv).
struct KVQuant {
  KVDType dtype = KVDType::same;
  float k_scale = 1.f;  // dequantised K = code · k_scale; > 0 and finite (fp8 only)
  float v_scale = 1.f;  // dequantised V = code · v_scale
};

constexpr bool is_fp8(KVDType t) { return t == KVDType::fp8_e4m3 || t == KVDType::fp8_e5m2; }

constexpr std::string_view kv_dtype_name(KVDType t) {
  switch (t) {
    case KVDType::same: return "auto";
    case KVDType::fp8_e4m3: return "fp8_e4m3";
    case KVDType::fp8_e5m2: return "fp8_e5m2";
  }
  return "?";
}

// vLLM's kv_cache_dtype strings: "auto", "fp8" (= e4m3 on CUDA), "fp8_e4m3", "fp8_e5m2".
constexpr std::optional<KVDType> parse_kv_dtype(std::string_view s) {
  if (s == "auto" || s == "same") return KVDType::same;
  if (s == "fp8" || s == "fp8_e4m3" || s == "e4m3") return KVDType::fp8_e4m3;
  if (s == "fp8_e5m2" || s == "e5m2") return KVDType::fp8_e5m2;
  return std::nullopt;
}

// ---- The fp8 codes --------------------------------------------------------------------------
struct Fp8Format {
  int exp_bits, man_bits, bias;
  float max_finite;
  std::uint8_t nan_code;  // the canonical positive NaN
  bool has_inf;
};
MUH_HOST_DEVICE constexpr Fp8Format fp8_format(KVDType t) {
  return t == KVDType::fp8_e5m2 ? Fp8Format{5, 2, 15, 57344.f, 0x7f, true} : Fp8Format{4, 3, 7, 448.f, 0x7f, false};
}

// The value of code b (exact).
MUH_HOST_DEVICE inline float fp8_to_float(std::uint8_t b, KVDType t) {
  const Fp8Format f = fp8_format(t);
  const int man_mask = (1 << f.man_bits) - 1, exp_max = (1 << f.exp_bits) - 1;
  const int e = (b >> f.man_bits) & exp_max, m = b & man_mask;
  const float sign = (b & 0x80) ? -1.f : 1.f;
  if (f.has_inf && e == exp_max) return m == 0 ? sign * INFINITY : NAN;
  if (!f.has_inf && e == exp_max && m == man_mask) return NAN;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), 1 - f.bias - f.man_bits);
  return sign * std::ldexp(static_cast<float>(m + (1 << f.man_bits)), e - f.bias - f.man_bits);
}

// The code of x: round to nearest, ties to even; beyond the largest finite value (±inf too)
// saturates to it; NaN → the NaN code (with x's sign).
MUH_HOST_DEVICE inline std::uint8_t float_to_fp8(float x, KVDType t) {
  const Fp8Format f = fp8_format(t);
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<std::uint8_t>(sign | f.nan_code);
  const float a = std::fabs(x);
  const int max_code = f.has_inf ? (((1 << f.exp_bits) - 2) << f.man_bits) | ((1 << f.man_bits) - 1)
                                 : 0x7e;  // e4m3: S.1111.110 = 448
  if (a >= f.max_finite) return static_cast<std::uint8_t>(sign | max_code);
  const int emin = 1 - f.bias;  // exponent of the smallest normal
  int e2 = 0;
  std::frexp(a, &e2);                            // a = frac · 2^e2, frac in [0.5, 1)
  const int e = a == 0.f ? emin : (e2 - 1 < emin ? emin : e2 - 1);  // the binade (subnormals: emin)
  const float q = std::ldexp(1.f, e - f.man_bits);                  // the spacing there
  const float n = std::nearbyint(a / q);         // a / q is exact (a power-of-two scaling); ties to even
  // n · q may have rounded up into the next binade (n = 2^(man_bits + 1)): the code arithmetic
  // below carries into the exponent field by itself.
  int code;
  if (e == emin && n < static_cast<float>(1 << f.man_bits)) {
    code = static_cast<int>(n);  // subnormal (or zero)
  } else {
    code = ((e - emin + 1) << f.man_bits) + (static_cast<int>(n) - (1 << f.man_bits));
  }
  if (code > max_code) code = max_code;  // a round-up past the largest finite value
  return static_cast<std::uint8_t>(sign | code);
}

// Bytes of one cache element: fp8 → 1, else q's dtype size (passed in).
constexpr int kv_elem_size(KVDType t, int q_elem_size) { return is_fp8(t) ? 1 : q_elem_size; }

}  // namespace muh
