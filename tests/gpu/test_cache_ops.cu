// test_cache_ops.cu — reshape_and_cache (both layouts) and merge_attn_states on the GPU.
//
// Cache writes: a paged-decode problem (check/decode_case.hpp) is built and uploaded; its tokens
// are read back out of the uploaded caches into token-major key/value (packed, or slices of a
// qkv-like buffer with a token stride), with padding tokens (slot −1, junk values) mixed in; the
// caches are refilled with 0xFF bytes (NaN in every dtype), rewritten by reshape_and_cache, and
// then (1) every mapped slot holds the original bits and every other element is still 0xFF
// (padding and unused slots untouched), (2) paged decode over the rewritten caches passes the
// decode suite's reference check (|out − ref| ≤ 2 × a naive same-precision implementation).
// Odd token counts (1 + 17 + 40 tokens plus padding). debug_checks and the kernel's own skip of
// out-of-range slots (counted in bad_slots), and the C ABI, over the same buffers.
//
// fp8 caches (kv_cache_dtype fp8 / fp8_e4m3 / fp8_e5m2): both layouts, both kinds, fp16 and bf16
// key/value, scales other than 1 (0.37, 2.5, 1e-3), key/value packed, as qkv slices (8-element
// chunks) and with an odd token stride (element chunks); sources mixing random bit patterns,
// values across the fp8 range at the scale and past it (saturation), fp8 subnormals, NaN of both
// signs, ±inf, ±0 and ±(largest finite · scale); padding tokens (−1) and one out-of-range slot.
// Every cache byte of a mapped slot must be muh::float_to_fp8(float(x) / scale) computed on the
// host (x read by the reference's own conversion), bit for bit; every other byte keeps its fill.
// The C ABI's muh_reshape_and_cache_quant writes the same bytes.
//
// Merge: the kernel against the same row math on the host (kernels/merge_states.hpp) on the
// storage-rounded inputs: rows with an empty prefix or suffix (−inf and FlashAttention 2's +inf),
// both empty (the output is prefix_output, bit for bit, and lse −inf), NaN in an empty partial's
// output (ignored); odd token counts; head dims that take 16-byte and element chunks; strided
// rows; in place. Outputs pre-filled with NaN. Tolerance: 2 roundings to the storage type of
// the result plus 16 fp32 ulps of the inputs (the device's expf/logf differ from the host's by a
// few ulps; a wrong weight is off by O(1)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "decode_case.hpp"
#include "gpu_test_util.hpp"
#include "muh/cache_write.hpp"
#include "muh/instances.hpp"
#include "muh/kernels/cache_write.hpp"
#include "muh/kernels/merge_states.hpp"
#include "muh/kv_quant.hpp"
#include "muh/merge_states.hpp"
#include "muh/muh.h"

namespace muh {
namespace {

const HardwareCapability& device_hw() {
  static const HardwareCapability hw = query_current_device().hw;
  return hw;
}

std::vector<unsigned char> download(const void* d, std::size_t bytes) {
  std::vector<unsigned char> h(bytes);
  EXPECT_EQ(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// ---- Cache writes -------------------------------------------------------------------------------

// The dtype of a compiled 16-bit decode instance (the suites that also decode).
DType a_compiled_16bit() {
  for (const auto& e : kCompiledInstances)
    if (e.dtype != DType::fp32) return e.dtype;
  return kCompiledInstances[0].dtype;
}

struct WriteCase {
  DType dtype;
  KVLayout layout;
  bool qkv_slices;  // key/value as slices of one [T, (Hq + 2 Hkv) · D] buffer; else packed
  std::string name() const {
    return std::string(dtype_name(dtype)) + (layout == KVLayout::nhd ? "_nhd" : "_vllm") + (qkv_slices ? "_qkv" : "_packed");
  }
};
void PrintTo(const WriteCase& c, std::ostream* os) { *os << c.name(); }

// A decode problem whose caches the test rewrites, and the tokens it holds.
struct Rewrite {
  check::DecodeCase dc;
  DecodeParams dp;
  std::size_t cache_bytes = 0;
  std::vector<unsigned char> k_orig, v_orig;  // the uploaded caches
  std::vector<std::int64_t> slots;            // per token, −1 for padding
  std::vector<unsigned char> tokens;          // the key/value buffer (host)
  std::int64_t token_stride = 0, key_off = 0, value_off = 0;  // elements
  std::vector<char> mapped;                   // per cache element: written by some token
};

check::DecodeCase decode_case(const WriteCase& w) {
  check::DecodeCase c;
  c.target = -1;  // the device's own
  c.dtype = w.dtype;
  c.head_dim = is_compiled_instance(w.dtype, 128) ? 128 : kCompiledInstances[0].head_dim;
  c.layout = w.layout;
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.page_size = 16;
  c.seq_lens = {1, 17, 40};
  c.seed = 3;
  return c;
}

// The host addressing of a decode problem's caches (kernels/cache_write.hpp, packed pages).
kernels::cache_write::CacheWriteArgs host_addressing(const DecodeParams& p) {
  kernels::cache_write::CacheWriteArgs a;
  a.shape.layout = p.layout;
  a.shape.page_size = p.page_size;
  a.shape.num_kv_heads = p.num_kv_heads;
  a.shape.head_dim = p.head_dim;
  a.shape.x = 16 / dtype_size(p.dtype);
  a.key_page_stride = a.value_page_stride = a.shape.page_elems();
  return a;
}

// Reads the problem's tokens out of its uploaded caches into the token buffer, with a padding
// token (slot −1, junk) after every 5th real one.
void build_tokens(const WriteCase& w, check::DecodeProblem& pr, Rewrite& r) {
  r.dp = pr.params();
  const DecodeParams& p = r.dp;
  const std::size_t e = dtype_size(p.dtype);
  const kernels::cache_write::CacheWriteArgs a = host_addressing(p);
  r.cache_bytes = std::size_t(p.num_pages) * a.shape.page_elems() * e;
  r.k_orig = download(p.k_cache, r.cache_bytes);
  r.v_orig = download(p.v_cache, r.cache_bytes);
  const std::vector<unsigned char> bt = download(p.block_table, std::size_t(p.num_seqs) * p.max_blocks_per_seq * 4);
  const int* table = reinterpret_cast<const int*>(bt.data());
  std::vector<std::pair<std::int64_t, bool>> order;  // (slot, real)
  for (int s = 0; s < p.num_seqs; ++s)
    for (int j = 0; j < r.dc.seq_lens[s]; ++j) {
      order.push_back({std::int64_t(table[s * p.max_blocks_per_seq + j / p.page_size]) * p.page_size + j % p.page_size, true});
      if (order.size() % 6 == 5) order.push_back({-1, false});
    }
  // Packed: all keys, then all values. qkv slices: one row of q, k, v per token.
  const std::int64_t T = static_cast<std::int64_t>(order.size()), row = std::int64_t(p.num_kv_heads) * p.head_dim;
  r.token_stride = w.qkv_slices ? std::int64_t(p.num_q_heads) * p.head_dim + 2 * row : row;
  r.key_off = w.qkv_slices ? std::int64_t(p.num_q_heads) * p.head_dim : 0;
  r.value_off = w.qkv_slices ? r.key_off + row : T * row;
  std::mt19937 rng(9);
  r.tokens.resize(std::size_t(w.qkv_slices ? T * r.token_stride : 2 * T * row) * e);
  for (auto& b : r.tokens) b = static_cast<unsigned char>(rng());  // junk: q parts, padding tokens
  r.slots.clear();
  r.mapped.assign(r.cache_bytes / e, 0);
  for (std::int64_t t = 0; t < T; ++t) {
    r.slots.push_back(order[t].first);
    if (!order[t].second) continue;
    for (int h = 0; h < p.num_kv_heads; ++h)
      for (int d = 0; d < p.head_dim; ++d) {
        const std::int64_t ko = kernels::cache_write::key_at(a, order[t].first, h, d);
        const std::int64_t vo = kernels::cache_write::value_at(a, order[t].first, h, d);
        const std::int64_t i = t * r.token_stride + std::int64_t(h) * p.head_dim + d;
        std::memcpy(r.tokens.data() + (r.key_off + i) * e, r.k_orig.data() + ko * e, e);
        std::memcpy(r.tokens.data() + (r.value_off + i) * e, r.v_orig.data() + vo * e, e);
        r.mapped[ko] |= 1;
        r.mapped[vo] |= 2;
      }
  }
}

// Every mapped element holds the original bits; every other one is still 0xFF.
void expect_caches(const Rewrite& r, const char* what) {
  const std::size_t e = dtype_size(r.dp.dtype);
  const std::vector<unsigned char> k = download(r.dp.k_cache, r.cache_bytes), v = download(r.dp.v_cache, r.cache_bytes);
  std::size_t k_bad = 0, v_bad = 0, k_touched = 0, v_touched = 0;
  for (std::size_t i = 0; i < r.mapped.size(); ++i)
    for (std::size_t b = 0; b < e; ++b) {
      const std::size_t at = i * e + b;
      if (r.mapped[i] & 1) k_bad += k[at] != r.k_orig[at];
      else k_touched += k[at] != 0xff;
      if (r.mapped[i] & 2) v_bad += v[at] != r.v_orig[at];
      else v_touched += v[at] != 0xff;
    }
  EXPECT_EQ(k_bad, 0u) << what << ": key bytes differing from the source";
  EXPECT_EQ(v_bad, 0u) << what << ": value bytes differing from the source";
  EXPECT_EQ(k_touched, 0u) << what << ": key_cache bytes written outside the mapped slots";
  EXPECT_EQ(v_touched, 0u) << what << ": value_cache bytes written outside the mapped slots";
}

struct Uploaded {
  testing::DeviceBuffer tokens, slots, bad;
};

CacheWriteParams write_params(const Rewrite& r, Uploaded& u) {
  const std::size_t e = dtype_size(r.dp.dtype);
  EXPECT_TRUE(u.tokens.alloc(r.tokens.size()) && u.slots.alloc(r.slots.size() * 8) && u.bad.alloc(4));
  EXPECT_EQ(cudaMemcpy(u.tokens.p, r.tokens.data(), r.tokens.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(u.slots.p, r.slots.data(), r.slots.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemset(u.bad.p, 0, 4), cudaSuccess);
  EXPECT_EQ(cudaMemset(const_cast<void*>(r.dp.k_cache), 0xff, r.cache_bytes), cudaSuccess);
  EXPECT_EQ(cudaMemset(const_cast<void*>(r.dp.v_cache), 0xff, r.cache_bytes), cudaSuccess);
  CacheWriteParams p;
  p.dtype = r.dp.dtype;
  p.layout = r.dp.layout;
  p.key = static_cast<unsigned char*>(u.tokens.p) + r.key_off * e;
  p.value = static_cast<unsigned char*>(u.tokens.p) + r.value_off * e;
  p.key_cache = const_cast<void*>(r.dp.k_cache);
  p.value_cache = const_cast<void*>(r.dp.v_cache);
  p.slot_mapping = static_cast<const std::int64_t*>(u.slots.p);
  p.bad_slots = static_cast<int*>(u.bad.p);
  p.num_tokens = static_cast<int>(r.slots.size());
  p.num_kv_heads = r.dp.num_kv_heads;
  p.head_dim = r.dp.head_dim;
  p.page_size = r.dp.page_size;
  p.num_pages = r.dp.num_pages;
  p.key_token_stride = p.value_token_stride = r.token_stride;
  return p;
}

int read_int(const void* d) {
  int v = -1;
  EXPECT_EQ(cudaMemcpy(&v, d, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

class CacheWrite : public ::testing::TestWithParam<WriteCase> {};

TEST_P(CacheWrite, DecodeReadsBackWhatWasWritten) {
  MUH_REQUIRE_GPU();
  const WriteCase w = GetParam();
  Rewrite r;
  r.dc = decode_case(w);
  check::DecodeProblem pr(r.dc);
  ASSERT_EQ(pr.upload(), "");
  build_tokens(w, pr, r);
  ASSERT_EQ(r.slots.size() % 2, 1u) << "the case is meant to have an odd token count";
  Uploaded u;
  const CacheWriteParams p = write_params(r, u);
  const Status s = reshape_and_cache(p);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_caches(r, "reshape_and_cache");
  EXPECT_EQ(read_int(u.bad.p), 0) << "no slot is out of range";
  if (!is_compiled_instance(w.dtype, r.dc.head_dim)) {
    std::printf("[ note ] %s: no decode instance of this dtype compiled; the cache bytes were checked\n", w.name().c_str());
    return;
  }
  const check::DecodeOutcome o = pr.run(device_hw(), 0);
  EXPECT_TRUE(o.pass()) << o.summary();
}

std::vector<WriteCase> write_cases() {
  std::vector<WriteCase> v;
  for (DType t : {DType::fp16, DType::bf16, DType::fp32})
    for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
      for (bool qkv : {false, true}) v.push_back({t, l, qkv});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, CacheWrite, ::testing::ValuesIn(write_cases()),
                         [](const auto& info) { return info.param.name(); });

// A slot past the cache: with debug_checks the call fails before the launch (caches untouched);
// without, the kernel skips that token, counts it, and writes the others.
TEST(CacheWriteSlots, OutOfRangeSlot) {
  MUH_REQUIRE_GPU();
  const WriteCase w{a_compiled_16bit(), KVLayout::vllm, true};
  Rewrite r;
  r.dc = decode_case(w);
  check::DecodeProblem pr(r.dc);
  ASSERT_EQ(pr.upload(), "");
  build_tokens(w, pr, r);
  const std::size_t victim = 3;  // a real token: its elements leave the expected set
  ASSERT_GE(r.slots[victim], 0);
  const std::int64_t num_slots = std::int64_t(r.dp.num_pages) * r.dp.page_size;
  for (std::int64_t bad : {num_slots, std::int64_t(-5)}) {
    Rewrite rb = r;
    // Unmap the victim's elements (it is not written).
    const kernels::cache_write::CacheWriteArgs a = host_addressing(rb.dp);
    for (int h = 0; h < rb.dp.num_kv_heads; ++h)
      for (int d = 0; d < rb.dp.head_dim; ++d) {
        rb.mapped[kernels::cache_write::key_at(a, rb.slots[victim], h, d)] &= ~1;
        rb.mapped[kernels::cache_write::value_at(a, rb.slots[victim], h, d)] &= ~2;
      }
    rb.slots[victim] = bad;
    Uploaded u;
    const CacheWriteParams p = write_params(rb, u);
    RunOptions debug;
    debug.debug_checks = true;
    const Status s = reshape_and_cache(p, debug);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
    EXPECT_NE(s.message().find("slot_mapping[" + std::to_string(victim) + "]"), std::string::npos) << s.message();
    Rewrite untouched = rb;
    std::fill(untouched.mapped.begin(), untouched.mapped.end(), 0);
    expect_caches(untouched, "refused call");
    ASSERT_TRUE(reshape_and_cache(p).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(read_int(u.bad.p), 1) << "the skipped slot is counted";
    expect_caches(rb, "skipped slot");
  }
}

TEST(CacheWriteCApi, MatchesTheCppApi) {
  MUH_REQUIRE_GPU();
  const WriteCase w{a_compiled_16bit(), KVLayout::nhd, true};
  Rewrite r;
  r.dc = decode_case(w);
  check::DecodeProblem pr(r.dc);
  ASSERT_EQ(pr.upload(), "");
  build_tokens(w, pr, r);
  Uploaded u;
  const CacheWriteParams p = write_params(r, u);
  ASSERT_EQ(muh_reshape_and_cache(int(p.dtype), int(p.layout), p.key, p.value, p.key_cache, p.value_cache,
                                  p.slot_mapping, p.num_tokens, p.num_kv_heads, p.head_dim, p.page_size, p.num_pages,
                                  p.key_token_stride, p.value_token_stride, 1, nullptr),
            MUH_OK)
      << muh_last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_caches(r, "muh_reshape_and_cache");
}

// ---- fp8 caches ------------------------------------------------------------------------------------

enum class Fp8View { packed, qkv_slices, odd_stride };

struct Fp8Case {
  DType dtype;
  KVDType kv;
  KVLayout layout;
  Fp8View view;
  float k_scale, v_scale;
  std::string name() const {
    const char* v = view == Fp8View::packed ? "packed" : view == Fp8View::qkv_slices ? "qkv" : "odd_stride";
    auto sc = [](float x) {
      std::string t = std::to_string(x);
      for (char& ch : t)
        if (ch == '.') ch = 'p';
      t = t.substr(0, t.find_last_not_of('0') + 1);
      return t.back() == 'p' ? t.substr(0, t.size() - 1) : t;
    };
    return std::string(dtype_name(dtype)) + "_" + std::string(kv_dtype_name(kv)) +
           (layout == KVLayout::nhd ? "_nhd_" : "_vllm_") + v + "_k" + sc(k_scale) + "_v" + sc(v_scale);
  }
};
void PrintTo(const Fp8Case& c, std::ostream* os) { *os << c.name(); }

// One source element (16-bit bits of t): every 13th an edge value (NaN of both signs, ±inf, ±0,
// ±top, just past ±top, far past it; top = largest finite · scale), else random bits, values
// across ±1.2 top, or fp8 subnormals at the scale.
std::uint16_t fp8_source(std::size_t i, std::mt19937& rng, DType t, KVDType kv, float scale) {
  const Fp8Format f = fp8_format(kv);
  const float top = f.max_finite * scale, inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float x;
  if (i % 13 == 0) {
    const float edge[] = {nan, -nan, inf, -inf, 0.f, -0.f, top, -top, top * 1.07f, -top * 1.07f, top * 30.f, -top * 30.f};
    x = edge[(i / 13) % (sizeof edge / sizeof edge[0])];
  } else {
    switch (rng() % 4) {
      case 0: return static_cast<std::uint16_t>(rng());
      case 1:
      case 2: x = std::uniform_real_distribution<float>(-1.2f, 1.2f)(rng) * top; break;
      default: x = std::uniform_real_distribution<float>(-4.f, 4.f)(rng) * std::ldexp(scale, 1 - f.bias); break;
    }
  }
  return t == DType::bf16 ? ref::float_to_bf16_bits(x) : ref::float_to_fp16_bits(x);
}

class CacheWriteFp8 : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(CacheWriteFp8, CodesAreTheHostFunctionsBitForBit) {
  MUH_REQUIRE_GPU();
  const Fp8Case c = GetParam();
  const int H = 2, D = 128, P = 16, pages = 6;
  const std::int64_t num_slots = std::int64_t(pages) * P, row = std::int64_t(H) * D;
  std::mt19937 rng(std::hash<std::string>{}(c.name()) & 0xffff);
  // Slots: distinct, shuffled, a padding token after every 5th real one, one slot out of range.
  std::vector<std::int64_t> perm(num_slots);
  for (std::int64_t i = 0; i < num_slots; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::int64_t> slots;
  for (int i = 0; i < 71; ++i) {  // 71 real tokens + 14 padding: 85
    slots.push_back(perm[i]);
    if ((i + 1) % 5 == 0) slots.push_back(-1);
  }
  slots[7] = num_slots + 3;  // a real token's slot: perm[6] stays unwritten
  const std::int64_t T = static_cast<std::int64_t>(slots.size());
  ASSERT_EQ(T % 2, 1) << "an odd token count";
  // Token buffer (elements): packed: keys then values; qkv: [T, (4 + 2H) · D] rows of q, k, v;
  // odd stride: rows of row + 3 elements, the value rows after the key rows at an odd offset.
  std::int64_t S = row, key_off = 0, value_off = T * row, total = 2 * T * row;
  if (c.view == Fp8View::qkv_slices) {
    S = (4 + 2 * H) * std::int64_t(D);
    key_off = 4 * std::int64_t(D);
    value_off = key_off + row;
    total = T * S;
  } else if (c.view == Fp8View::odd_stride) {
    S = row + 3;
    value_off = T * S + 5;
    total = value_off + T * S;
  }
  // (Junk between rows and q's columns take the key's scale: they are never read.)
  auto is_value = [&](std::int64_t i) {
    return c.view == Fp8View::qkv_slices ? i % S >= value_off : i >= value_off;
  };
  std::vector<std::uint16_t> buf(static_cast<std::size_t>(total));
  for (std::size_t i = 0; i < buf.size(); ++i)
    buf[i] = fp8_source(i, rng, c.dtype, c.kv, is_value(std::int64_t(i)) ? c.v_scale : c.k_scale);
  // The expected caches: the fill, then the host's code at every mapped element.
  kernels::cache_write::CacheWriteArgs a;
  a.shape.layout = c.layout;
  a.shape.page_size = P;
  a.shape.num_kv_heads = H;
  a.shape.head_dim = D;
  a.shape.x = 16;
  a.key_page_stride = a.value_page_stride = a.shape.page_elems();
  const std::size_t cache_bytes = static_cast<std::size_t>(pages * a.shape.page_elems());
  constexpr unsigned char kFill = 0xa5;
  std::vector<unsigned char> kwant(cache_bytes, kFill), vwant(cache_bytes, kFill);
  const auto* bytes = reinterpret_cast<const unsigned char*>(buf.data());
  std::size_t nans = 0, saturated = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    if (kernels::cache_write::classify(slots[t], num_slots) != kernels::cache_write::Slot::write) continue;
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < D; ++d) {
        const std::size_t ki = static_cast<std::size_t>(key_off + t * S + h * D + d);
        const std::size_t vi = static_cast<std::size_t>(value_off + t * S + h * D + d);
        const float kx = ref::from_storage(bytes, ki, c.dtype), vx = ref::from_storage(bytes, vi, c.dtype);
        kwant[kernels::cache_write::key_at(a, slots[t], h, d)] = float_to_fp8(kx / c.k_scale, c.kv);
        vwant[kernels::cache_write::value_at(a, slots[t], h, d)] = float_to_fp8(vx / c.v_scale, c.kv);
        nans += std::isnan(kx) + std::isnan(vx);
        const float top = fp8_format(c.kv).max_finite;
        saturated += (std::fabs(kx / c.k_scale) > top) + (std::fabs(vx / c.v_scale) > top);
      }
  }
  ASSERT_GT(nans, 0u) << "the case writes NaN elements";
  ASSERT_GT(saturated, 0u) << "the case writes elements past the largest finite value";

  testing::DeviceBuffer dbuf(buf.size() * 2), dslots(slots.size() * 8), kc(cache_bytes), vc(cache_bytes), bad(4);
  MUH_CUDA_CHECK(cudaMemcpy(dbuf.p, buf.data(), buf.size() * 2, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(dslots.p, slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
  CacheWriteParams p;
  p.dtype = c.dtype;
  p.layout = c.layout;
  p.kv = {c.kv, c.k_scale, c.v_scale};
  p.key = static_cast<const std::uint16_t*>(dbuf.p) + key_off;
  p.value = static_cast<const std::uint16_t*>(dbuf.p) + value_off;
  p.key_cache = kc.p;
  p.value_cache = vc.p;
  p.slot_mapping = static_cast<const std::int64_t*>(dslots.p);
  p.bad_slots = static_cast<int*>(bad.p);
  p.num_tokens = static_cast<int>(T);
  p.num_kv_heads = H;
  p.head_dim = D;
  p.page_size = P;
  p.num_pages = pages;
  p.key_token_stride = p.value_token_stride = S;

  auto expect_caches_fp8 = [&](const char* what) {
    const std::vector<unsigned char> k = download(kc.p, cache_bytes), v = download(vc.p, cache_bytes);
    std::size_t k_bad = 0, v_bad = 0;
    std::string first;
    for (std::size_t i = 0; i < cache_bytes; ++i) {
      if (k[i] != kwant[i] && first.empty())
        first = "key_cache[" + std::to_string(i) + "] = " + std::to_string(k[i]) + ", want " + std::to_string(kwant[i]);
      if (v[i] != vwant[i] && first.empty())
        first = "value_cache[" + std::to_string(i) + "] = " + std::to_string(v[i]) + ", want " + std::to_string(vwant[i]);
      k_bad += k[i] != kwant[i];
      v_bad += v[i] != vwant[i];
    }
    EXPECT_EQ(k_bad, 0u) << c.name() << " " << what << ": key_cache bytes differ (" << first << ")";
    EXPECT_EQ(v_bad, 0u) << c.name() << " " << what << ": value_cache bytes differ (" << first << ")";
  };

  MUH_CUDA_CHECK(cudaMemset(kc.p, kFill, cache_bytes));
  MUH_CUDA_CHECK(cudaMemset(vc.p, kFill, cache_bytes));
  MUH_CUDA_CHECK(cudaMemset(bad.p, 0, 4));
  const Status st = reshape_and_cache(p);
  ASSERT_TRUE(st.ok()) << st.message();
  MUH_CUDA_CHECK(cudaDeviceSynchronize());
  expect_caches_fp8("reshape_and_cache");
  EXPECT_EQ(read_int(bad.p), 1) << "the out-of-range slot is skipped and counted";

  // The C ABI: the same bytes.
  MUH_CUDA_CHECK(cudaMemset(kc.p, kFill, cache_bytes));
  MUH_CUDA_CHECK(cudaMemset(vc.p, kFill, cache_bytes));
  ASSERT_EQ(muh_reshape_and_cache_quant(int(p.dtype), int(p.layout), p.key, p.value, p.key_cache, p.value_cache,
                                        p.slot_mapping, p.num_tokens, H, D, P, pages, S, S, 0, nullptr, int(c.kv),
                                        c.k_scale, c.v_scale),
            MUH_OK)
      << muh_last_error();
  MUH_CUDA_CHECK(cudaDeviceSynchronize());
  expect_caches_fp8("muh_reshape_and_cache_quant");
}

std::vector<Fp8Case> fp8_cases() {
  std::vector<Fp8Case> v;
  for (DType t : {DType::fp16, DType::bf16})
    for (KVDType kv : {KVDType::fp8_e4m3, KVDType::fp8_e5m2})
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        for (Fp8View view : {Fp8View::packed, Fp8View::qkv_slices, Fp8View::odd_stride}) {
          const bool a = (int(t) + int(kv) + int(l) + int(view)) % 2 == 0;
          v.push_back({t, kv, l, view, a ? 0.37f : 2.5f, a ? 2.5f : 0.37f});
        }
  v.push_back({DType::bf16, KVDType::fp8_e4m3, KVLayout::vllm, Fp8View::packed, 1e-3f, 1.f});
  v.push_back({DType::fp16, KVDType::fp8_e5m2, KVLayout::nhd, Fp8View::qkv_slices, 1.f, 3.f});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, CacheWriteFp8, ::testing::ValuesIn(fp8_cases()),
                         [](const auto& info) { return info.param.name(); });

// With a device present: a zero scale, and fp32 key/value with an fp8 cache, are refused before
// the launch; the caches keep their bytes.
TEST(CacheWriteFp8Input, BadScaleLeavesTheCachesUntouched) {
  MUH_REQUIRE_GPU();
  const std::size_t bytes = 16 * 2 * 128;
  testing::DeviceBuffer key(2 * 128 * 2 * 3), kc(bytes), vc(bytes), slots(8 * 3);
  MUH_CUDA_CHECK(cudaMemset(kc.p, 0x11, bytes));
  MUH_CUDA_CHECK(cudaMemset(vc.p, 0x11, bytes));
  MUH_CUDA_CHECK(cudaMemset(slots.p, 0, 8 * 3));
  CacheWriteParams p;
  p.dtype = DType::bf16;
  p.layout = KVLayout::nhd;
  p.kv = {KVDType::fp8_e4m3, 0.f, 1.f};
  p.key = p.value = key.p;
  p.key_cache = kc.p;
  p.value_cache = vc.p;
  p.slot_mapping = static_cast<const std::int64_t*>(slots.p);
  p.num_tokens = 3;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.page_size = 16;
  p.num_pages = 1;
  const Status s = reshape_and_cache(p);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
  EXPECT_NE(s.message().find("k_scale"), std::string::npos) << s.message();
  p.kv = {KVDType::fp8_e4m3, 1.f, 1.f};
  p.dtype = DType::fp32;
  EXPECT_EQ(reshape_and_cache(p).code(), StatusCode::unsupported);
  MUH_CUDA_CHECK(cudaDeviceSynchronize());
  for (const auto& b : {download(kc.p, bytes), download(vc.p, bytes)})
    for (unsigned char x : b) ASSERT_EQ(x, 0x11) << "a refused call wrote the cache";
}

// ---- merge_attn_states ---------------------------------------------------------------------------

enum class Rows { packed, strided, in_place };

struct MergeCase {
  DType dtype;
  int num_tokens, num_heads, head_dim;
  Rows rows;
  bool with_lse;
  std::string name() const {
    const char* r = rows == Rows::packed ? "packed" : rows == Rows::strided ? "strided" : "in_place";
    return std::string(dtype_name(dtype)) + "_t" + std::to_string(num_tokens) + "_h" + std::to_string(num_heads) + "_d" +
           std::to_string(head_dim) + "_" + r + (with_lse ? "_lse" : "");
  }
};
void PrintTo(const MergeCase& c, std::ostream* os) { *os << c.name(); }

class MergeStates : public ::testing::TestWithParam<MergeCase> {};

// What row r's lse are: the special rows first, then random ones.
std::pair<float, float> lse_of_row(int r, std::mt19937& rng) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::uniform_real_distribution<float> u(-6.f, 12.f);
  switch (r % 9) {
    case 0: return {-inf, u(rng)};  // empty prefix (FA3)
    case 1: return {u(rng), inf};   // empty suffix (FA2's +inf)
    case 2: return {-inf, -inf};    // both empty: prefix_output
    case 3: return {inf, -inf};     // both empty, mixed conventions
    case 4: return {u(rng), u(rng) + 40.f};  // far apart
    default: return {u(rng), u(rng)};
  }
}

TEST_P(MergeStates, MatchesTheHostRowMath) {
  MUH_REQUIRE_GPU();
  const MergeCase c = GetParam();
  const int T = c.num_tokens, H = c.num_heads, D = c.head_dim;
  const std::size_t e = dtype_size(c.dtype);
  const std::int64_t row = std::int64_t(H) * D;
  const std::int64_t stride = c.rows == Rows::strided ? row + 8 + (D % 2) : row;  // 16-B multiple or not
  std::mt19937 rng(std::hash<std::string>{}(c.name()) & 0xffff);
  std::vector<float> pf(std::size_t(T) * stride), sf(pf.size());
  for (auto& x : pf) x = ref::round_to(std::uniform_real_distribution<float>(-2.f, 2.f)(rng), c.dtype);
  for (auto& x : sf) x = ref::round_to(std::uniform_real_distribution<float>(-2.f, 2.f)(rng), c.dtype);
  std::vector<float> pl(std::size_t(H) * T), sl(pl.size());
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const int r = t * H + h;
      std::tie(pl[std::size_t(h) * T + t], sl[std::size_t(h) * T + t]) = lse_of_row(r, rng);
      // An empty partial's output may be anything (an unwritten buffer): NaN there is ignored.
      if (r % 9 == 0)
        for (int d = 0; d < D; ++d) pf[t * stride + std::int64_t(h) * D + d] = std::nanf("");
    }
  // The expected result: the row math on the host, rounded to the storage type.
  std::vector<float> want(std::size_t(T) * row), want_lse(pl.size());
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const MergeWeights w = kernels::merge_states::row_weights(pl[std::size_t(h) * T + t], sl[std::size_t(h) * T + t]);
      want_lse[std::size_t(h) * T + t] = w.lse;
      for (int d = 0; d < D; ++d) {
        const std::int64_t i = t * stride + std::int64_t(h) * D + d;
        want[t * row + std::int64_t(h) * D + d] = ref::round_to(kernels::merge_states::merged(pf[i], sf[i], w), c.dtype);
      }
    }

  testing::DeviceBuffer po(pf.size() * e), so(sf.size() * e), out(pf.size() * e), plse(pl.size() * 4),
      slse(sl.size() * 4), olse(pl.size() * 4);
  MUH_CUDA_CHECK(cudaMemcpy(po.p, ref::to_storage(pf, c.dtype).data(), pf.size() * e, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(so.p, ref::to_storage(sf, c.dtype).data(), sf.size() * e, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(plse.p, pl.data(), pl.size() * 4, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(slse.p, sl.data(), sl.size() * 4, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemset(out.p, 0xff, pf.size() * e));  // NaN
  MUH_CUDA_CHECK(cudaMemset(olse.p, 0xff, pl.size() * 4));
  MergeStatesParams p;
  p.dtype = c.dtype;
  p.output = c.rows == Rows::in_place ? po.p : out.p;
  p.output_lse = c.with_lse ? static_cast<float*>(olse.p) : nullptr;
  p.prefix_output = po.p;
  p.prefix_lse = static_cast<const float*>(plse.p);
  p.suffix_output = so.p;
  p.suffix_lse = static_cast<const float*>(slse.p);
  p.num_tokens = T;
  p.num_heads = H;
  p.head_dim = D;
  p.output_token_stride = p.prefix_token_stride = p.suffix_token_stride = stride;
  const Status s = merge_attn_states(p);
  ASSERT_TRUE(s.ok()) << s.message();
  MUH_CUDA_CHECK(cudaDeviceSynchronize());

  const std::vector<unsigned char> got_b = download(p.output, pf.size() * e);
  const std::vector<unsigned char> got_lse_b = download(olse.p, pl.size() * 4);
  const float* got_lse = reinterpret_cast<const float*>(got_lse_b.data());
  const double u = ref::unit_roundoff(c.dtype), ulp32 = 1.0 / 16777216;
  std::size_t bad = 0, bad_lse = 0, bad_copy = 0;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const std::size_t li = std::size_t(h) * T + t;
      const bool both_empty = (t * H + h) % 9 == 2 || (t * H + h) % 9 == 3;
      for (int d = 0; d < D; ++d) {
        const std::int64_t i = t * stride + std::int64_t(h) * D + d;
        const float g = ref::from_storage(got_b.data(), i, c.dtype), w = want[t * row + std::int64_t(h) * D + d];
        if (both_empty) {
          bad_copy += std::memcmp(&g, &pf[i], 4) != 0;  // prefix_output, bit for bit
          continue;
        }
        // (An empty prefix's NaN output has weight 0: it does not count in the bound.)
        const double mag = (std::isnan(pf[i]) ? 0.0 : std::fabs(pf[i])) + std::fabs(sf[i]);
        const double tol = 2 * u * std::fabs(w) + 16 * ulp32 * mag + 1e-30;
        bad += !(std::fabs(double(g) - w) <= tol);  // NaN fails
      }
      if (c.with_lse) {
        const float g = got_lse[li], w = want_lse[li];
        if (std::isinf(w)) bad_lse += g != w;
        else bad_lse += !(std::fabs(g - w) <= 4e-6 * std::max(1.f, std::fabs(w)));
      }
    }
  EXPECT_EQ(bad, 0u) << c.name() << ": merged elements off the host math";
  EXPECT_EQ(bad_copy, 0u) << c.name() << ": both-empty rows must be prefix_output";
  EXPECT_EQ(bad_lse, 0u) << c.name() << ": output_lse off the host math";
  if (!c.with_lse) {
    std::size_t touched = 0;
    for (unsigned char b : got_lse_b) touched += b != 0xff;
    EXPECT_EQ(touched, 0u) << "no output_lse given: nothing written there";
  }
  if (c.rows == Rows::strided) {  // the gap between rows is not written
    std::size_t touched = 0;
    for (int t = 0; t < T; ++t)
      for (std::int64_t i = row; i < stride; ++i)
        for (std::size_t b = 0; b < e; ++b) touched += got_b[(t * stride + i) * e + b] != 0xff;
    EXPECT_EQ(touched, 0u) << "bytes between strided rows were written";
  }
}

std::vector<MergeCase> merge_cases() {
  std::vector<MergeCase> v;
  for (DType t : {DType::fp16, DType::bf16, DType::fp32})
    for (int tokens : {1, 7, 33})
      for (int d : {128, 36, 13}) v.push_back({t, tokens, 5, d, Rows::packed, true});
  for (DType t : {DType::fp16, DType::bf16, DType::fp32})
    for (Rows r : {Rows::strided, Rows::in_place}) {
      v.push_back({t, 7, 3, 64, r, true});
      v.push_back({t, 33, 4, 36, r, false});
    }
  v.push_back({DType::bf16, 1000, 8, 256, Rows::packed, true});  // many CTAs
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, MergeStates, ::testing::ValuesIn(merge_cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(MergeStatesCApi, MatchesTheCppApi) {
  MUH_REQUIRE_GPU();
  const int T = 9, H = 4, D = 64;
  std::mt19937 rng(1);
  std::vector<float> pf = testing::random_vector(std::size_t(T) * H * D, rng), sf = testing::random_vector(pf.size(), rng);
  std::vector<float> pl = testing::random_vector(std::size_t(H) * T, rng, -3, 3), sl = testing::random_vector(pl.size(), rng, -3, 3);
  const DType t = DType::fp16;
  testing::DeviceBuffer po(pf.size() * 2), so(pf.size() * 2), o1(pf.size() * 2), o2(pf.size() * 2), plse(pl.size() * 4),
      slse(pl.size() * 4), l1(pl.size() * 4), l2(pl.size() * 4);
  MUH_CUDA_CHECK(cudaMemcpy(po.p, ref::to_storage(pf, t).data(), pf.size() * 2, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(so.p, ref::to_storage(sf, t).data(), sf.size() * 2, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(plse.p, pl.data(), pl.size() * 4, cudaMemcpyHostToDevice));
  MUH_CUDA_CHECK(cudaMemcpy(slse.p, sl.data(), sl.size() * 4, cudaMemcpyHostToDevice));
  MergeStatesParams p;
  p.dtype = t;
  p.output = o1.p;
  p.output_lse = static_cast<float*>(l1.p);
  p.prefix_output = po.p;
  p.prefix_lse = static_cast<const float*>(plse.p);
  p.suffix_output = so.p;
  p.suffix_lse = static_cast<const float*>(slse.p);
  p.num_tokens = T;
  p.num_heads = H;
  p.head_dim = D;
  ASSERT_TRUE(merge_attn_states(p).ok());
  ASSERT_EQ(muh_merge_attn_states(MUH_FP16, o2.p, static_cast<float*>(l2.p), po.p, p.prefix_lse, so.p, p.suffix_lse, T,
                                  H, D, nullptr),
            MUH_OK)
      << muh_last_error();
  MUH_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(download(o1.p, pf.size() * 2), download(o2.p, pf.size() * 2));
  EXPECT_EQ(download(l1.p, pl.size() * 4), download(l2.p, pl.size() * 4));
}

}  // namespace
}  // namespace muh
