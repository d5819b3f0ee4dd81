// reference.cpp — CPU reference attention (see reference.hpp). Double accumulation.
#include "muh/reference.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace muh::ref {

namespace {

// Softmax-weighted sum over the keys [lo, hi) of one query row; scores in double.
// key(j) / val(j) return pointers to key j's and value j's head_dim floats; logit(j, x) the
// variant's transform of the scaled score x of key j (identity without one); sink: a logit that
// joins the denominator (−inf: none).
template <class KeyFn, class ValFn, class LogitFn>
void attend_range(const float* qrow, int lo, int hi, int head_dim, double scale, KeyFn key, ValFn val,
                  LogitFn logit, double sink, float* out, float* lse) {
  const double ninf = -std::numeric_limits<double>::infinity();
  const int n = hi - lo;
  std::vector<double> s(std::max(n, 0));
  double m = sink;
  for (int j = lo; j < hi; ++j) {
    const float* kr = key(j);
    double acc = 0;
    for (int d = 0; d < head_dim; ++d) acc += double(qrow[d]) * double(kr[d]);
    s[j - lo] = logit(j, acc * scale);
    m = std::max(m, s[j - lo]);
  }
  if (m == ninf) {  // no key and no sink
    std::memset(out, 0, sizeof(float) * head_dim);
    if (lse) *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  double denom = sink == ninf ? 0.0 : std::exp(sink - m);
  std::vector<double> o(head_dim, 0.0);
  for (int j = lo; j < hi; ++j) {
    const double p = std::exp(s[j - lo] - m);
    denom += p;
    const float* vr = val(j);
    for (int d = 0; d < head_dim; ++d) o[d] += p * double(vr[d]);
  }
  for (int d = 0; d < head_dim; ++d) out[d] = float(o[d] / denom);
  if (lse) *lse = float(m + std::log(denom));
}

template <class KeyFn, class ValFn>
void attend_row(const float* qrow, int n, int head_dim, double scale, KeyFn key, ValFn val, float* out,
                float* lse) {
  attend_range(qrow, 0, std::max(n, 0), head_dim, scale, key, val, [](int, double x) { return x; },
               -std::numeric_limits<double>::infinity(), out, lse);
}

// The variant's logit of query i (of sq) against key j (of sk), head h: soft-cap, then ALiBi.
double variant_logit(const Variant& var, int h, long long i, long long j, int sq, int sk, double x) {
  if (var.softcap > 0.f) x = softcap_logit(x, var.softcap);
  if (var.use_alibi) x -= double(var.alibi_slopes[h]) * double(alibi_distance(i, j, sq, sk, var.queries_after_keys));
  return x;
}

double variant_sink(const Variant& var, int h) {
  return var.use_sinks ? double(var.sinks[h]) : -std::numeric_limits<double>::infinity();
}

}  // namespace

void prefill(const float* q, const float* k, const float* v, const int* cu_q, const int* cu_k,
             int batch, int hq, int hkv, int d, float scale, bool causal, float* out, float* lse) {
  prefill(q, k, v, cu_q, cu_k, batch, hq, hkv, d, scale, causal, Variant{}, out, lse);
}

void prefill(const float* q, const float* k, const float* v, const int* cu_q, const int* cu_k,
             int batch, int hq, int hkv, int d, float scale, bool causal, const Variant& var, float* out,
             float* lse) {
  const int group = hq / hkv;
  const int total_q = cu_q[batch];
  for (int b = 0; b < batch; ++b) {
    const int q0 = cu_q[b], sq = cu_q[b + 1] - cu_q[b];
    const int k0 = cu_k[b], sk = cu_k[b + 1] - cu_k[b];
    for (int i = 0; i < sq; ++i) {
      // Bottom-right aligned causal mask and window (muh/variant.hpp).
      const KeyRange r =
          visible_key_range(i, sq, sk, causal, var.window_left, var.window_right, var.queries_after_keys);
      const int lo = int(r.lo), hi = int(std::max(r.lo, r.hi));
      for (int h = 0; h < hq; ++h) {
        const int kh = h / group;
        const float* qrow = q + (std::int64_t(q0 + i) * hq + h) * d;
        auto key = [&](int j) { return k + (std::int64_t(k0 + j) * hkv + kh) * d; };
        auto val = [&](int j) { return v + (std::int64_t(k0 + j) * hkv + kh) * d; };
        auto logit = [&](int j, double x) { return variant_logit(var, h, i, j, sq, sk, x); };
        attend_range(qrow, lo, hi, d, scale, key, val, logit, variant_sink(var, h),
                     out + (std::int64_t(q0 + i) * hq + h) * d,
                     lse ? lse + std::int64_t(h) * total_q + q0 + i : nullptr);
      }
    }
  }
}

void gather_kv(const float* k_cache, const float* v_cache, const PagedKVShape& kv,
               const int* block_row, int seq_len, float* k_dense, float* v_dense) {
  for (int t = 0; t < seq_len; ++t) {
    const std::int64_t page = block_row[t / kv.page_size];
    const int slot = t % kv.page_size;
    for (int h = 0; h < kv.num_kv_heads; ++h)
      for (int dd = 0; dd < kv.head_dim; ++dd) {
        const std::int64_t o = (std::int64_t(t) * kv.num_kv_heads + h) * kv.head_dim + dd;
        k_dense[o] = k_cache[kv.k_offset(page, slot, h, dd)];
        v_dense[o] = v_cache[kv.v_offset(page, slot, h, dd)];
      }
  }
}

void paged_prefill(const float* q, const float* k_cache, const float* v_cache, const PagedKVShape& kv,
                   const int* block_table, int max_blocks, const int* cu_q, const int* seqused_k, int batch,
                   int hq, float scale, bool causal, float* out, float* lse) {
  std::vector<int> cu_k(std::size_t(batch) + 1, 0);
  for (int b = 0; b < batch; ++b) cu_k[b + 1] = cu_k[b] + seqused_k[b];
  const std::size_t row = std::size_t(kv.num_kv_heads) * kv.head_dim;
  std::vector<float> k(std::size_t(cu_k[batch]) * row), v(k.size());
  for (int b = 0; b < batch; ++b)
    gather_kv(k_cache, v_cache, kv, block_table + std::int64_t(b) * max_blocks, seqused_k[b],
              k.data() + std::size_t(cu_k[b]) * row, v.data() + std::size_t(cu_k[b]) * row);
  prefill(q, k.data(), v.data(), cu_q, cu_k.data(), batch, hq, kv.num_kv_heads, kv.head_dim, scale, causal, out, lse);
}

void paged_decode(const float* q, const float* k_cache, const float* v_cache,
                  const PagedKVShape& kv, const int* block_table, int max_blocks, const int* seq_lens,
                  int num_seqs, int hq, float scale, float* out, float* lse, int kv_begin, int kv_end) {
  const int d = kv.head_dim, group = hq / kv.num_kv_heads;
  for (int s = 0; s < num_seqs; ++s) {
    const int len = seq_lens[s];
    const int lo = std::min(kv_begin, len), hi = kv_end < 0 ? len : std::min(kv_end, len);
    const int* row = block_table + std::int64_t(s) * max_blocks;
    for (int h = 0; h < hq; ++h) {
      const int kh = h / group;
      // Keys are gathered one at a time into kbuf/vbuf (the layouts are strided).
      std::vector<float> keys(std::size_t(std::max(0, hi - lo)) * d), vals(keys.size());
      for (int t = lo; t < hi; ++t) {
        const std::int64_t page = row[t / kv.page_size];
        for (int dd = 0; dd < d; ++dd) {
          keys[std::size_t(t - lo) * d + dd] = k_cache[kv.k_offset(page, t % kv.page_size, kh, dd)];
          vals[std::size_t(t - lo) * d + dd] = v_cache[kv.v_offset(page, t % kv.page_size, kh, dd)];
        }
      }
      attend_row(q + (std::int64_t(s) * hq + h) * d, hi - lo, d, scale,
                 [&](int j) { return keys.data() + std::size_t(j) * d; },
                 [&](int j) { return vals.data() + std::size_t(j) * d; },
                 out + (std::int64_t(s) * hq + h) * d, lse ? lse + std::int64_t(s) * hq + h : nullptr);
    }
  }
}

void paged_decode(const float* q, const float* k_cache, const float* v_cache, const PagedKVShape& kv,
                  const int* block_table, int max_blocks, const int* seq_lens, int num_seqs, int hq, float scale,
                  const Variant& var, float* out, float* lse) {
  const int d = kv.head_dim, group = hq / kv.num_kv_heads;
  for (int s = 0; s < num_seqs; ++s) {
    const int len = seq_lens[s];
    const int* row = block_table + std::int64_t(s) * max_blocks;
    // One query at position len − 1: sq = 1, sk = len (bottom-right aligned), causal.
    const KeyRange r = visible_key_range(0, 1, len, true, var.window_left, var.window_right);
    const int lo = int(r.lo), hi = int(std::max(r.lo, r.hi));
    for (int h = 0; h < hq; ++h) {
      const int kh = h / group;
      std::vector<float> keys(std::size_t(std::max(0, hi - lo)) * d), vals(keys.size());
      for (int t = lo; t < hi; ++t) {
        const std::int64_t page = row[t / kv.page_size];
        for (int dd = 0; dd < d; ++dd) {
          keys[std::size_t(t - lo) * d + dd] = k_cache[kv.k_offset(page, t % kv.page_size, kh, dd)];
          vals[std::size_t(t - lo) * d + dd] = v_cache[kv.v_offset(page, t % kv.page_size, kh, dd)];
        }
      }
      // A sequence of length 0 is padding: out = 0, lse = −inf, sink or not (as the kernels).
      attend_range(q + (std::int64_t(s) * hq + h) * d, lo, hi, d, scale,
                   [&](int j) { return keys.data() + std::size_t(j - lo) * d; },
                   [&](int j) { return vals.data() + std::size_t(j - lo) * d; },
                   [&](int j, double x) { return variant_logit(var, h, 0, j, 1, len, x); },
                   len > 0 ? variant_sink(var, h) : -std::numeric_limits<double>::infinity(),
                   out + (std::int64_t(s) * hq + h) * d, lse ? lse + std::int64_t(s) * hq + h : nullptr);
    }
  }
}

std::uint16_t float_to_bf16_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return std::uint16_t(u >> 16);
}

float bf16_bits_to_float(std::uint16_t h) {
  const std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t float_to_fp16_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t au = u & 0x7fffffffu;
  if (au > 0x7f800000u) return std::uint16_t(sign | 0x7e00u);  // NaN
  if (au >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u);  // overflow (≥ 65520) → inf
  if (au < 0x38800000u) {  // subnormal or zero in fp16: scale by 2^24 and round
    float af;
    std::memcpy(&af, &au, 4);
    const float scaled = af * 16777216.0f;  // exact
    return std::uint16_t(sign | std::uint32_t(std::nearbyint(scaled)));
  }
  // normal: rebias exponent, round mantissa to nearest even
  std::uint32_t m = au + 0xfffu + ((au >> 13) & 1u);
  m -= (127u - 15u) << 23;
  return std::uint16_t(sign | (m >> 13));
}

float fp16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(float(man), -24);
  } else if (exp == 31) {
    f = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    const std::uint32_t u = ((exp + 127u - 15u) << 23) | (man << 13);
    std::memcpy(&f, &u, 4);
  }
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= sign;
  std::memcpy(&f, &u, 4);
  return f;
}

float round_to(float x, DType t) {
  if (t == DType::bf16) return bf16_bits_to_float(float_to_bf16_bits(x));
  if (t == DType::fp16) return fp16_bits_to_float(float_to_fp16_bits(x));
  return x;
}

std::vector<unsigned char> to_storage(const std::vector<float>& x, DType t) {
  std::vector<unsigned char> out(x.size() * dtype_size(t));
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (t == DType::fp32) {
      std::memcpy(out.data() + 4 * i, &x[i], 4);
    } else {
      const std::uint16_t h = t == DType::bf16 ? float_to_bf16_bits(x[i]) : float_to_fp16_bits(x[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

float from_storage(const unsigned char* bytes, std::size_t i, DType t) {
  if (t == DType::fp32) {
    float f;
    std::memcpy(&f, bytes + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, bytes + 2 * i, 2);
  return t == DType::bf16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h);
}

void round_to_bf16(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = bf16_bits_to_float(float_to_bf16_bits(x[i]));
}
void round_to_fp16(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = fp16_bits_to_float(float_to_fp16_bits(x[i]));
}

}  // namespace muh::ref
