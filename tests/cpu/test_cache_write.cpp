// reshape_and_cache / reshape_and_cache_flash (kernels/cache_write.hpp: the per-token steps the
// kernel runs; src/cache_write.cu: the host checks): slot addressing against vLLM's 5-D/4-D and
// the NHD index formulas written out independently, the kernel's steps run over host buffers
// (both layouts, 16-byte and element chunks, strided key/value views, padded and out-of-range
// slots: every written element is the source's, every other one untouched), the same for fp8
// caches (every written byte is float_to_fp8(key element / k_scale) of muh/kv_quant.hpp, the
// key element read by the reference's own conversion), and every bad input — the fp8 ones too
// (an unknown kv dtype, a zero / negative / NaN / infinite scale, fp32 with fp8, x = 16) —
// refused with a Status before any CUDA call, through the C++ API and the C ABI
// (muh_reshape_and_cache_quant). The kernel itself runs in tests/gpu/test_cache_ops.cu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "muh/cache_write.hpp"
#include "muh/kernels/cache_write.hpp"
#include "muh/kv_quant.hpp"
#include "muh/muh.h"
#include "muh/reference.hpp"

namespace muh {
namespace {

using kernels::cache_write::CacheWriteArgs;
using kernels::cache_write::classify;
using kernels::cache_write::Slot;

TEST(CacheWriteSlots, Classify) {
  EXPECT_EQ(classify(-1, 64), Slot::padding);
  EXPECT_EQ(classify(0, 64), Slot::write);
  EXPECT_EQ(classify(63, 64), Slot::write);
  EXPECT_EQ(classify(64, 64), Slot::out_of_range);
  EXPECT_EQ(classify(-2, 64), Slot::out_of_range);
  EXPECT_EQ(classify(INT64_MIN, 64), Slot::out_of_range);
  EXPECT_EQ(classify(INT64_MAX, 64), Slot::out_of_range);
}

// The shapes as vLLM's tensors have them, indexed with their strides written out.
struct Geometry {
  int pages, page_size, heads, dim, x;
};
// vLLM key [pages, heads, dim/x, page_size, x]
std::int64_t vllm_key(const Geometry& g, std::int64_t page_stride, std::int64_t b, int s, int h, int d) {
  const std::int64_t sx = 1, sbs = g.x, sdx = std::int64_t(g.page_size) * g.x, sh = sdx * (g.dim / g.x);
  return b * page_stride + h * sh + (d / g.x) * sdx + s * sbs + (d % g.x) * sx;
}
// vLLM value [pages, heads, dim, page_size]
std::int64_t vllm_value(const Geometry& g, std::int64_t page_stride, std::int64_t b, int s, int h, int d) {
  return b * page_stride + (std::int64_t(h) * g.dim + d) * g.page_size + s;
}
// NHD [pages, page_size, heads, dim]
std::int64_t nhd(const Geometry& g, std::int64_t page_stride, std::int64_t b, int s, int h, int d) {
  return b * page_stride + (std::int64_t(s) * g.heads + h) * g.dim + d;
}

CacheWriteArgs args_for(const Geometry& g, KVLayout layout, std::int64_t kps, std::int64_t vps) {
  CacheWriteArgs a;
  a.shape.layout = layout;
  a.shape.page_size = g.page_size;
  a.shape.num_kv_heads = g.heads;
  a.shape.head_dim = g.dim;
  a.shape.x = g.x;
  a.num_slots = std::int64_t(g.pages) * g.page_size;
  a.key_page_stride = kps;
  a.value_page_stride = vps;
  return a;
}

// A host write of `slots.size()` tokens: key/value rows token_stride apart, heads head_stride
// apart, into caches of page stride pstride (both).
CacheWriteArgs host_write_args(const Geometry& g, KVLayout layout, std::int64_t pstride, const void* key,
                               const void* value, void* key_cache, void* value_cache,
                               const std::vector<std::int64_t>& slots, std::int64_t token_stride,
                               std::int64_t head_stride) {
  CacheWriteArgs a = args_for(g, layout, pstride, pstride);
  a.key = key;
  a.value = value;
  a.key_cache = key_cache;
  a.value_cache = value_cache;
  a.slot_mapping = slots.data();
  a.num_tokens = int(slots.size());
  a.key_token_stride = a.value_token_stride = token_stride;
  a.key_head_stride = a.value_head_stride = head_stride;
  return a;
}

TEST(CacheWriteSlots, AddressingMatchesVllmAndNhdShapes) {
  for (const Geometry g : {Geometry{5, 16, 2, 64, 8}, Geometry{3, 7, 3, 32, 4}, Geometry{2, 528, 1, 16, 8}}) {
    const std::int64_t page = std::int64_t(g.page_size) * g.heads * g.dim;
    for (std::int64_t pstride : {page, 2 * page + 8}) {  // packed; K/V pages interleaved
      const CacheWriteArgs v = args_for(g, KVLayout::vllm, pstride, pstride);
      const CacheWriteArgs n = args_for(g, KVLayout::nhd, pstride, pstride);
      for (std::int64_t slot = 0; slot < v.num_slots; slot += 5)
        for (int h = 0; h < g.heads; ++h)
          for (int d = 0; d < g.dim; ++d) {
            const std::int64_t b = slot / g.page_size;
            const int s = int(slot % g.page_size);
            ASSERT_EQ(kernels::cache_write::key_at(v, slot, h, d), vllm_key(g, pstride, b, s, h, d));
            ASSERT_EQ(kernels::cache_write::value_at(v, slot, h, d), vllm_value(g, pstride, b, s, h, d));
            ASSERT_EQ(kernels::cache_write::key_at(n, slot, h, d), nhd(g, pstride, b, s, h, d));
            ASSERT_EQ(kernels::cache_write::value_at(n, slot, h, d), nhd(g, pstride, b, s, h, d));
          }
    }
  }
}

// The kernels' steps over host buffers: for each token, classify its slot, then write(t, slot, c)
// for each of its chunks of kVec elements (cache_write.cuh's loops, one thread at a time).
// Returns the out-of-range slots met.
template <int kVec, class Write>
int run_chunks_on_host(const CacheWriteArgs& a, Write write) {
  int bad = 0;
  for (int t = 0; t < a.num_tokens; ++t) {
    const std::int64_t slot = a.slot_mapping[t];
    const Slot kind = classify(slot, a.num_slots);
    if (kind == Slot::out_of_range) ++bad;
    if (kind != Slot::write) continue;
    for (int c = 0; c < kernels::cache_write::chunks_per_token(a, kVec); ++c) write(t, slot, c);
  }
  return bad;
}
// The bitwise copy (write_chunk).
template <class E, int kVec>
int run_on_host(const CacheWriteArgs& a) {
  return run_chunks_on_host<kVec>(
      a, [&](int t, std::int64_t slot, int c) { kernels::cache_write::write_chunk<E, kVec>(a, t, slot, c); });
}

// A slot_mapping for `tokens` tokens over num_slots slots: distinct slots in shuffled order, with
// padding (−1: every 5th token from the 4th) and out-of-range entries (num_slots or −7: every 11th
// from the 8th) mixed in; *expect_bad counts the latter.
std::vector<std::int64_t> mixed_slots(int tokens, std::int64_t num_slots, std::mt19937& rng, int* expect_bad) {
  std::vector<std::int64_t> all(num_slots);
  for (std::int64_t i = 0; i < num_slots; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::int64_t> slots(tokens);
  *expect_bad = 0;
  for (int t = 0; t < tokens; ++t) {
    if (t % 5 == 3) slots[t] = -1;
    else if (t % 11 == 7) {
      slots[t] = (t % 2) ? num_slots : -7;
      ++*expect_bad;
    } else slots[t] = all[t % num_slots];
  }
  return slots;
}

struct WriteCase {
  const char* name;
  KVLayout layout;
  bool fp32;
  bool wide;  // 16-byte chunks
  int heads, dim, page_size, pages;
  int tokens;
  int token_pad;  // extra elements per token row (a qkv slice); 0 = packed
  int head_pad;   // extra elements between heads
  bool interleaved_pages;
};

template <class E, int kVec>
void check_write(const WriteCase& c) {
  const int x = 16 / int(sizeof(E));
  const Geometry g{c.pages, c.page_size, c.heads, c.dim, x};
  const std::int64_t page = std::int64_t(c.page_size) * c.heads * c.dim;
  const std::int64_t pstride = c.interleaved_pages ? 2 * page : page;
  const std::int64_t head_stride = c.dim + c.head_pad;
  const std::int64_t token_stride = c.heads * head_stride + c.token_pad;
  std::mt19937 rng(5);
  std::vector<E> key(std::size_t(c.tokens) * token_stride + 16), value(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) {
    key[i] = E(1 + rng() % 30000);
    value[i] = E(1 + rng() % 30000);
  }
  const E kSentinel = E(0xFFFF);  // a NaN in fp16, never a source value
  std::vector<E> kc(std::size_t(pstride) * c.pages, kSentinel), vc(kc.size(), kSentinel);
  // Slots: distinct, shuffled, with padding and out-of-range entries mixed in.
  const std::int64_t num_slots = std::int64_t(c.pages) * c.page_size;
  int expect_bad = 0;
  const std::vector<std::int64_t> slots = mixed_slots(c.tokens, num_slots, rng, &expect_bad);
  CacheWriteArgs a = host_write_args(g, c.layout, pstride, key.data(), value.data(), kc.data(), vc.data(), slots,
                                     token_stride, head_stride);
  EXPECT_EQ((run_on_host<E, kVec>(a)), expect_bad);

  std::vector<char> written(kc.size(), 0);
  for (int t = 0; t < c.tokens; ++t) {
    if (classify(slots[t], num_slots) != Slot::write) continue;
    const std::int64_t b = slots[t] / c.page_size;
    const int s = int(slots[t] % c.page_size);
    for (int h = 0; h < c.heads; ++h)
      for (int d = 0; d < c.dim; ++d) {
        const std::size_t src = std::size_t(t * token_stride + h * head_stride + d);
        const std::int64_t ko = c.layout == KVLayout::vllm ? vllm_key(g, pstride, b, s, h, d) : nhd(g, pstride, b, s, h, d);
        const std::int64_t vo = c.layout == KVLayout::vllm ? vllm_value(g, pstride, b, s, h, d) : nhd(g, pstride, b, s, h, d);
        ASSERT_EQ(kc[ko], key[src]) << c.name << " token " << t << " head " << h << " dim " << d;
        ASSERT_EQ(vc[vo], value[src]) << c.name << " token " << t << " head " << h << " dim " << d;
        written[ko] |= 1;
        written[vo] |= 2;
      }
  }
  for (std::size_t i = 0; i < kc.size(); ++i) {
    if (!(written[i] & 1)) ASSERT_EQ(kc[i], kSentinel) << c.name << ": key_cache[" << i << "] written";
    if (!(written[i] & 2)) ASSERT_EQ(vc[i], kSentinel) << c.name << ": value_cache[" << i << "] written";
  }
}

const WriteCase kWrites[] = {
    {"nhd_fp16_wide", KVLayout::nhd, false, true, 2, 64, 16, 6, 37, 0, 0, false},
    {"nhd_fp16_elementwise", KVLayout::nhd, false, false, 3, 24, 7, 5, 19, 3, 1, false},
    {"nhd_fp32_wide_qkv_slice", KVLayout::nhd, true, true, 2, 32, 16, 4, 21, 4 * 32, 0, true},
    {"vllm_fp16_wide", KVLayout::vllm, false, true, 2, 64, 16, 6, 37, 0, 0, false},
    {"vllm_fp16_wide_qkv_slice", KVLayout::vllm, false, true, 1, 256, 16, 3, 29, 6 * 256, 0, false},
    {"vllm_fp16_elementwise_odd_page", KVLayout::vllm, false, false, 3, 16, 5, 4, 17, 1, 3, false},
    {"vllm_fp32_wide", KVLayout::vllm, true, true, 4, 16, 8, 5, 33, 0, 0, true},
    {"vllm_fp32_elementwise", KVLayout::vllm, true, false, 2, 12, 3, 7, 1, 0, 0, false},
    {"one_token", KVLayout::nhd, false, true, 1, 8, 1, 1, 1, 0, 0, false},
};

void PrintTo(const WriteCase& c, std::ostream* os) { *os << c.name; }

class CacheWriteOnHost : public ::testing::TestWithParam<WriteCase> {};

TEST_P(CacheWriteOnHost, WritesExactlyTheMappedSlots) {
  const WriteCase& c = GetParam();
  if (c.fp32) {
    if (c.wide) check_write<std::uint32_t, 4>(c);
    else check_write<std::uint32_t, 1>(c);
  } else {
    if (c.wide) check_write<std::uint16_t, 8>(c);
    else check_write<std::uint16_t, 1>(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Both, CacheWriteOnHost, ::testing::ValuesIn(kWrites),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- Bad input: a Status naming the problem, before any CUDA call ---------------------------

alignas(256) unsigned char g_fake[1 << 16];

CacheWriteParams good() {
  CacheWriteParams p;
  p.dtype = DType::fp16;
  p.layout = KVLayout::vllm;
  p.key = g_fake;
  p.value = g_fake + 1024;
  p.key_cache = g_fake + 2048;
  p.value_cache = g_fake + 4096;
  p.slot_mapping = reinterpret_cast<const std::int64_t*>(g_fake + 8192);
  p.num_tokens = 3;
  p.num_kv_heads = 2;
  p.head_dim = 64;
  p.page_size = 16;
  p.num_pages = 10;
  return p;
}

struct BadWrite {
  const char* name;
  void (*mutate)(CacheWriteParams&);
  const char* says;
};

const BadWrite kBadWrites[] = {
    {"dtype_3", [](CacheWriteParams& p) { p.dtype = static_cast<DType>(3); }, "dtype"},
    {"layout_2", [](CacheWriteParams& p) { p.layout = static_cast<KVLayout>(2); }, "layout"},
    {"num_tokens_negative", [](CacheWriteParams& p) { p.num_tokens = -3; }, "num_tokens"},
    {"kv_heads_0", [](CacheWriteParams& p) { p.num_kv_heads = 0; }, "num_kv_heads"},
    {"head_dim_0", [](CacheWriteParams& p) { p.head_dim = 0; }, "head_dim"},
    {"page_size_0", [](CacheWriteParams& p) { p.page_size = 0; }, "page_size"},
    {"num_pages_0", [](CacheWriteParams& p) { p.num_pages = 0; }, "num_pages"},
    {"vllm_head_dim_not_multiple_of_x", [](CacheWriteParams& p) { p.head_dim = 60; }, "multiple of x = 8"},
    {"vllm_fp32_head_dim_not_multiple_of_x",
     [](CacheWriteParams& p) {
       p.dtype = DType::fp32;
       p.head_dim = 66;
     },
     "multiple of x = 4"},
    {"key_token_stride_negative", [](CacheWriteParams& p) { p.key_token_stride = -128; }, "key_token_stride"},
    {"value_head_stride_negative", [](CacheWriteParams& p) { p.value_head_stride = -1; }, "value_head_stride"},
    {"key_page_stride_under_a_page", [](CacheWriteParams& p) { p.key_cache_page_stride = 2047; }, "key_cache_page_stride"},
    {"value_page_stride_negative", [](CacheWriteParams& p) { p.value_cache_page_stride = -2048; }, "value_cache_page_stride"},
    {"key_null", [](CacheWriteParams& p) { p.key = nullptr; }, "key is null"},
    {"value_null", [](CacheWriteParams& p) { p.value = nullptr; }, "value is null"},
    {"key_cache_null", [](CacheWriteParams& p) { p.key_cache = nullptr; }, "key_cache is null"},
    {"value_cache_null", [](CacheWriteParams& p) { p.value_cache = nullptr; }, "value_cache is null"},
    {"slot_mapping_null", [](CacheWriteParams& p) { p.slot_mapping = nullptr; }, "slot_mapping is null"},
    {"key_misaligned", [](CacheWriteParams& p) { p.key = g_fake + 1; }, "aligned"},
    {"value_cache_misaligned_fp32",
     [](CacheWriteParams& p) {
       p.dtype = DType::fp32;
       p.value_cache = g_fake + 4098;
     },
     "aligned"},
    {"slot_mapping_misaligned",
     [](CacheWriteParams& p) { p.slot_mapping = reinterpret_cast<const std::int64_t*>(g_fake + 8196); }, "slot_mapping"},
    {"bad_slots_misaligned", [](CacheWriteParams& p) { p.bad_slots = reinterpret_cast<int*>(g_fake + 8301); }, "bad_slots"},
    // fp8 caches (kv_quant.hpp)
    {"kv_dtype_3", [](CacheWriteParams& p) { p.kv.dtype = static_cast<KVDType>(3); }, "kv dtype 3"},
    {"kv_dtype_255", [](CacheWriteParams& p) { p.kv.dtype = static_cast<KVDType>(255); }, "kv dtype 255"},
    {"fp8_k_scale_0",
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e4m3;
       p.kv.k_scale = 0.f;
     },
     "k_scale must be finite and > 0, got 0"},
    {"fp8_v_scale_negative",
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e5m2;
       p.kv.v_scale = -2.5f;
     },
     "v_scale must be finite and > 0, got -2.5"},
    {"fp8_k_scale_minus_0",
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e4m3;
       p.kv.k_scale = -0.f;
     },
     "k_scale must be finite and > 0, got -0"},
    {"fp8_k_scale_nan",
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e4m3;
       p.kv.k_scale = std::numeric_limits<float>::quiet_NaN();
     },
     "k_scale must be finite and > 0, got nan"},
    {"fp8_v_scale_inf",
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e5m2;
       p.kv.v_scale = std::numeric_limits<float>::infinity();
     },
     "v_scale must be finite and > 0, got inf"},
    {"fp8_bad_scale_with_zero_tokens",  // checked before the zero-token return
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e4m3;
       p.kv.v_scale = 0.f;
       p.num_tokens = 0;
     },
     "v_scale"},
    {"fp8_vllm_head_dim_not_multiple_of_16",
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e4m3;
       p.head_dim = 72;  // a multiple of 8 (fp16's x), not of 16
     },
     "multiple of x = 16 (16 bytes of fp8_e4m3)"},
    {"fp8_key_page_stride_under_a_page",
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e5m2;
       p.key_cache_page_stride = 2047;  // one page: 16 slots · 2 heads · 64 dims = 2048 bytes
     },
     "key_cache_page_stride"},
    {"fp8_key_misaligned",  // key keeps its 2-byte element
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e4m3;
       p.key = g_fake + 1;
     },
     "key must be aligned to its 2-byte element"},
    {"fp8_key_cache_null",
     [](CacheWriteParams& p) {
       p.kv.dtype = KVDType::fp8_e4m3;
       p.key_cache = nullptr;
     },
     "key_cache is null"},
};

void PrintTo(const BadWrite& c, std::ostream* os) { *os << c.name; }

class CacheWriteBadInput : public ::testing::TestWithParam<BadWrite> {};

TEST_P(CacheWriteBadInput, RefusedWithAClearStatus) {
  const BadWrite& c = GetParam();
  CacheWriteParams p = good();
  c.mutate(p);
  RunOptions debug;
  debug.debug_checks = true;  // the host checks come before the slot copy
  for (const Status& s : {check_cache_write(p), reshape_and_cache(p), reshape_and_cache(p, debug)}) {
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << c.name << ": " << s.message();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.name << ": '" << s.message() << "' lacks '" << c.says << "'";
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
  }
}

INSTANTIATE_TEST_SUITE_P(Write, CacheWriteBadInput, ::testing::ValuesIn(kBadWrites),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CacheWriteInput, GoodParamsPassTheHostChecks) {
  for (KVLayout l : {KVLayout::nhd, KVLayout::vllm}) {
    CacheWriteParams p = good();
    p.layout = l;
    EXPECT_TRUE(check_cache_write(p).ok()) << check_cache_write(p).message();
    p.key_token_stride = p.value_token_stride = 3 * 128;  // slices of a qkv row
    p.key_cache_page_stride = p.value_cache_page_stride = 2 * 2048;  // K/V pages interleaved
    p.head_dim = l == KVLayout::nhd ? 60 : 64;  // NHD takes any head_dim
    EXPECT_TRUE(check_cache_write(p).ok()) << check_cache_write(p).message();
  }
}

// An fp8 cache holds bytes: any cache address will do, head_dim a multiple of 16 in the vllm
// layout; a `same` cache never reads the scales.
TEST(CacheWriteInput, GoodFp8ParamsPassTheHostChecks) {
  for (KVDType kv : {KVDType::fp8_e4m3, KVDType::fp8_e5m2})
    for (DType t : {DType::fp16, DType::bf16})
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm}) {
        CacheWriteParams p = good();
        p.dtype = t;
        p.layout = l;
        p.kv = {kv, 0.37f, 2.5f};
        p.key_cache = g_fake + 2049;  // odd: 1-byte elements
        p.value_cache = g_fake + 4099;
        p.head_dim = l == KVLayout::nhd ? 40 : 48;
        p.key_cache_page_stride = p.value_cache_page_stride = 2 * 16 * 2 * 48 + 1;  // bytes
        EXPECT_TRUE(check_cache_write(p).ok()) << check_cache_write(p).message();
      }
  CacheWriteParams p = good();
  p.kv = {KVDType::same, 0.f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(check_cache_write(p).ok()) << check_cache_write(p).message();
  p.dtype = DType::fp32;
  EXPECT_TRUE(check_cache_write(p).ok()) << check_cache_write(p).message();
}

// fp32 key and value with an fp8 cache: refused as unsupported (muh writes fp8 from 16-bit only),
// before any CUDA call.
TEST(CacheWriteInput, Fp32WithAnFp8CacheIsUnsupported) {
  for (KVDType kv : {KVDType::fp8_e4m3, KVDType::fp8_e5m2}) {
    CacheWriteParams p = good();
    p.dtype = DType::fp32;
    p.kv.dtype = kv;
    RunOptions debug;
    debug.debug_checks = true;
    for (const Status& s : {check_cache_write(p), reshape_and_cache(p), reshape_and_cache(p, debug)}) {
      EXPECT_EQ(s.code(), StatusCode::unsupported) << s.message();
      EXPECT_NE(s.message().find("dtype fp32"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(std::string(kv_dtype_name(kv))), std::string::npos) << s.message();
      EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
    }
  }
}

TEST(CacheWriteInput, ZeroTokensIsANoOpWithoutPointers) {
  CacheWriteParams p;
  p.dtype = DType::bf16;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.num_pages = 4;
  const Status s = reshape_and_cache(p);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(CacheWriteCApi, EnumsOutOfRangeDoNotWrap) {
  const CacheWriteParams p = good();
  EXPECT_EQ(muh_reshape_and_cache(256, 1, p.key, p.value, p.key_cache, p.value_cache, p.slot_mapping, 3, 2, 64, 16,
                                  10, 0, 0, 0, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("dtype"), std::string::npos) << muh_last_error();
  EXPECT_EQ(muh_reshape_and_cache(MUH_FP16, 258, p.key, p.value, p.key_cache, p.value_cache, p.slot_mapping, 3, 2,
                                  64, 16, 10, 0, 0, 0, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("layout"), std::string::npos) << muh_last_error();
}

TEST(CacheWriteCApi, ShapeAndPointerErrors) {
  const CacheWriteParams p = good();
  EXPECT_EQ(muh_reshape_and_cache(MUH_FP16, MUH_KV_VLLM, p.key, p.value, p.key_cache, p.value_cache, p.slot_mapping, 3,
                                  2, 60, 16, 10, 0, 0, 1, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("multiple of x"), std::string::npos) << muh_last_error();
  EXPECT_EQ(muh_reshape_and_cache(MUH_FP16, MUH_KV_NHD, p.key, p.value, p.key_cache, p.value_cache, nullptr, 3, 2, 64,
                                  16, 10, 0, 0, 0, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("slot_mapping is null"), std::string::npos) << muh_last_error();
}

// The C ABI's fp8 entry: kv_dtype range-checked before the cast (256 would wrap onto MUH_KV_AUTO),
// the scales and dtype checked by the C++ API; MUH_KV_AUTO is muh_reshape_and_cache.
TEST(CacheWriteCApi, QuantBadInputs) {
  const CacheWriteParams p = good();
  auto call = [&](int dtype, int tokens, int kv, float ks, float vs) {
    return muh_reshape_and_cache_quant(dtype, MUH_KV_VLLM, p.key, p.value, p.key_cache, p.value_cache, p.slot_mapping,
                                       tokens, 2, 64, 16, 10, 0, 0, 0, nullptr, kv, ks, vs);
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int kv : {3, -1, 256, 257}) {
    EXPECT_EQ(call(MUH_FP16, 3, kv, 1.f, 1.f), MUH_INVALID_ARGUMENT) << kv;
    EXPECT_NE(std::string(muh_last_error()).find("kv_dtype " + std::to_string(kv)), std::string::npos) << muh_last_error();
  }
  EXPECT_EQ(call(MUH_FP16, 3, MUH_KV_FP8_E4M3, 0.f, 1.f), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("k_scale must be finite and > 0, got 0"), std::string::npos)
      << muh_last_error();
  EXPECT_EQ(call(MUH_BF16, 3, MUH_KV_FP8_E5M2, 1.f, -1.f), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("v_scale must be finite and > 0, got -1"), std::string::npos)
      << muh_last_error();
  EXPECT_EQ(call(MUH_BF16, 3, MUH_KV_FP8_E4M3, nan, 1.f), MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("k_scale"), std::string::npos) << muh_last_error();
  EXPECT_EQ(call(MUH_FP16, 0, MUH_KV_FP8_E4M3, 1.f, nan), MUH_INVALID_ARGUMENT) << "zero tokens: still checked";
  EXPECT_NE(std::string(muh_last_error()).find("v_scale"), std::string::npos) << muh_last_error();
  EXPECT_EQ(call(MUH_FP32, 3, MUH_KV_FP8_E4M3, 1.f, 1.f), MUH_UNSUPPORTED);
  EXPECT_NE(std::string(muh_last_error()).find("dtype fp32"), std::string::npos) << muh_last_error();
  // The vllm layout's x is 16 for fp8: head_dim 72 is fine for fp16's x = 8, not here.
  EXPECT_EQ(muh_reshape_and_cache_quant(MUH_FP16, MUH_KV_VLLM, p.key, p.value, p.key_cache, p.value_cache,
                                        p.slot_mapping, 3, 2, 72, 16, 10, 0, 0, 0, nullptr, MUH_KV_FP8_E5M2, 1.f, 1.f),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("multiple of x = 16"), std::string::npos) << muh_last_error();
  // Good calls with no tokens write nothing and touch no device: MUH_OK (auto ignores the scales).
  EXPECT_EQ(call(MUH_FP16, 0, MUH_KV_AUTO, nan, 0.f), MUH_OK) << muh_last_error();
  EXPECT_EQ(call(MUH_FP32, 0, MUH_KV_AUTO, 1.f, 1.f), MUH_OK) << muh_last_error();
  EXPECT_EQ(call(MUH_BF16, 0, MUH_KV_FP8_E5M2, 0.37f, 2.5f), MUH_OK) << muh_last_error();
  // The enum's values are muh::KVDType's.
  static_assert(MUH_KV_AUTO == int(KVDType::same) && MUH_KV_FP8_E4M3 == int(KVDType::fp8_e4m3) &&
                MUH_KV_FP8_E5M2 == int(KVDType::fp8_e5m2));
}

// ---- fp8 caches: the kernel's steps over host buffers ---------------------------------------------

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// widen<T> (the kernel's 16-bit → float) is the reference's conversion for every bit pattern; a
// NaN keeps its sign.
TEST(CacheWriteFp8, WidenIsExactForEvery16BitPattern) {
  using kernels::cache_write::widen;
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const std::uint16_t h = static_cast<std::uint16_t>(i);
    const float f = widen<DType::fp16>(h), rf = ref::fp16_bits_to_float(h);
    if (std::isnan(rf)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), std::signbit(rf)) << std::hex << h;
    } else {
      ASSERT_EQ(bits_of(f), bits_of(rf)) << "fp16 " << std::hex << h;
    }
    const float b = widen<DType::bf16>(h), rb = ref::bf16_bits_to_float(h);
    ASSERT_EQ(bits_of(b), bits_of(rb)) << "bf16 " << std::hex << h;
  }
  EXPECT_EQ(widen<DType::fp16>(0x3c00), 1.f);
  EXPECT_EQ(widen<DType::fp16>(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(widen<DType::fp16>(0xfbff), -65504.f);
  EXPECT_EQ(widen<DType::bf16>(0x3f80), 1.f);
  EXPECT_EQ(widen<DType::bf16>(0xc2e0), -112.f);
}

// quantise = float_to_fp8(x / scale): one fp32 division, then the codec; NaN keeps its sign.
TEST(CacheWriteFp8, QuantiseDividesThenRounds) {
  using kernels::cache_write::quantise;
  std::mt19937 rng(11);
  for (KVDType kv : {KVDType::fp8_e4m3, KVDType::fp8_e5m2})
    for (float scale : {1.f, 0.37f, 2.5f, 1e-3f}) {
      const float top = fp8_format(kv).max_finite * scale;
      for (int i = 0; i < 20000; ++i) {
        const float x = std::uniform_real_distribution<float>(-1.2f * top, 1.2f * top)(rng);
        ASSERT_EQ(quantise(x, scale, kv), float_to_fp8(x / scale, kv)) << x << " / " << scale;
      }
      EXPECT_EQ(quantise(2 * top, scale, kv), kv == KVDType::fp8_e4m3 ? 0x7e : 0x7b) << "saturates";
      EXPECT_EQ(quantise(-std::numeric_limits<float>::infinity(), scale, kv), kv == KVDType::fp8_e4m3 ? 0xfe : 0xfb);
      EXPECT_EQ(quantise(std::numeric_limits<float>::quiet_NaN(), scale, kv), 0x7f);
      EXPECT_EQ(quantise(-std::numeric_limits<float>::quiet_NaN(), scale, kv), 0xff) << "NaN keeps its sign";
    }
  // 2.125 / 2 = 1.0625, halfway between e4m3's 1 and 1.125: to even, 1.0 (0x38); 2.375 / 2 = 1.1875 → 1.25.
  EXPECT_EQ(quantise(2.125f, 2.f, KVDType::fp8_e4m3), 0x38);
  EXPECT_EQ(quantise(2.375f, 2.f, KVDType::fp8_e4m3), 0x3a);
  EXPECT_EQ(quantise(-448.f * 2.5f, 2.5f, KVDType::fp8_e4m3), 0xfe);
  // A float whose x / 0.37 and x · (1 / 0.37) round to different codes: quantise divides. (No
  // fp16 or bf16 value at scales 0.37, 2.5, 0.1, 3 or 0.7 tells the two apart.)
  const float x = 0x1.4b851ep-9f;
  EXPECT_EQ(quantise(x, 0.37f, KVDType::fp8_e4m3), 3);
  EXPECT_EQ(float_to_fp8(x * (1.f / 0.37f), KVDType::fp8_e4m3), 4) << "the case tells division from a reciprocal";
}

struct Fp8Case {
  const char* name;
  KVLayout layout;
  DType dtype;
  KVDType kv;
  bool wide;  // 8-element chunks
  int heads, dim, page_size, pages, tokens, token_pad, head_pad;
  bool interleaved_pages;
  float k_scale, v_scale;
};
void PrintTo(const Fp8Case& c, std::ostream* os) { *os << c.name; }

// A 16-bit source element: random bits (NaN, ±inf, huge, tiny), values across the fp8 range at
// the scale (beyond it: saturation), or fp8 subnormals at the scale.
std::uint16_t fp8_source(std::mt19937& rng, DType t, KVDType kv, float scale) {
  const Fp8Format f = fp8_format(kv);
  float x = 0.f;
  switch (rng() % 4) {
    case 0: return static_cast<std::uint16_t>(rng());
    case 1:
    case 2: x = std::uniform_real_distribution<float>(-1.2f, 1.2f)(rng) * f.max_finite * scale; break;
    default: x = std::uniform_real_distribution<float>(-4.f, 4.f)(rng) * std::ldexp(scale, 1 - f.bias); break;
  }
  return t == DType::bf16 ? ref::float_to_bf16_bits(x) : ref::float_to_fp16_bits(x);
}

// The edges, one every 13 elements: NaN of both signs, ±inf, ±0, ±the largest finite code at the
// scale, just beyond it (rounds past it: saturates), far beyond it.
std::uint16_t fp8_special(int i, DType t, KVDType kv, float scale) {
  const float top = fp8_format(kv).max_finite * scale, inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float v[] = {nan, -nan, inf, -inf, 0.f, -0.f, top, -top, top * 1.07f, -top * 1.07f, top * 30.f, -top * 30.f};
  const float x = v[i % (sizeof v / sizeof v[0])];
  return t == DType::bf16 ? ref::float_to_bf16_bits(x) : ref::float_to_fp16_bits(x);
}

// The fp8 write (write_chunk_fp8).
template <DType In, KVDType Kv, int kVec>
int run_fp8_on_host(const CacheWriteArgs& a) {
  return run_chunks_on_host<kVec>(
      a, [&](int t, std::int64_t slot, int c) { kernels::cache_write::write_chunk_fp8<In, Kv, kVec>(a, t, slot, c); });
}

template <DType In, KVDType Kv>
int run_fp8(const CacheWriteArgs& a, bool wide) {
  return wide ? run_fp8_on_host<In, Kv, 8>(a) : run_fp8_on_host<In, Kv, 1>(a);
}

void check_write_fp8(const Fp8Case& c, std::uint8_t sentinel) {
  const Geometry g{c.pages, c.page_size, c.heads, c.dim, 16};
  const std::int64_t page = std::int64_t(c.page_size) * c.heads * c.dim;  // bytes
  const std::int64_t pstride = c.interleaved_pages ? 2 * page : page;
  const std::int64_t head_stride = c.dim + c.head_pad;
  const std::int64_t token_stride = c.heads * head_stride + c.token_pad;
  std::mt19937 rng(7);
  std::vector<std::uint16_t> key(std::size_t(c.tokens) * token_stride + 16), value(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) {
    key[i] = i % 13 == 0 ? fp8_special(int(i / 13), c.dtype, c.kv, c.k_scale) : fp8_source(rng, c.dtype, c.kv, c.k_scale);
    value[i] = i % 13 == 6 ? fp8_special(int(i / 13), c.dtype, c.kv, c.v_scale) : fp8_source(rng, c.dtype, c.kv, c.v_scale);
  }
  std::vector<std::uint8_t> kc(std::size_t(pstride) * c.pages, sentinel), vc(kc.size(), sentinel);
  const std::int64_t num_slots = std::int64_t(c.pages) * c.page_size;
  int expect_bad = 0;
  const std::vector<std::int64_t> slots = mixed_slots(c.tokens, num_slots, rng, &expect_bad);
  CacheWriteArgs a = host_write_args(g, c.layout, pstride, key.data(), value.data(), kc.data(), vc.data(), slots,
                                     token_stride, head_stride);
  a.k_scale = c.k_scale;
  a.v_scale = c.v_scale;
  int bad = -1;
  if (c.dtype == DType::fp16)
    bad = c.kv == KVDType::fp8_e4m3 ? run_fp8<DType::fp16, KVDType::fp8_e4m3>(a, c.wide)
                                    : run_fp8<DType::fp16, KVDType::fp8_e5m2>(a, c.wide);
  else
    bad = c.kv == KVDType::fp8_e4m3 ? run_fp8<DType::bf16, KVDType::fp8_e4m3>(a, c.wide)
                                    : run_fp8<DType::bf16, KVDType::fp8_e5m2>(a, c.wide);
  EXPECT_EQ(bad, expect_bad);

  // Expected: the reference's widening, the host's division, the codec.
  const auto* kb = reinterpret_cast<const unsigned char*>(key.data());
  const auto* vb = reinterpret_cast<const unsigned char*>(value.data());
  std::vector<char> written(kc.size(), 0);
  std::size_t nan_seen = 0, saturated = 0;
  for (int t = 0; t < c.tokens; ++t) {
    if (classify(slots[t], num_slots) != Slot::write) continue;
    const std::int64_t b = slots[t] / c.page_size;
    const int s = int(slots[t] % c.page_size);
    for (int h = 0; h < c.heads; ++h)
      for (int d = 0; d < c.dim; ++d) {
        const std::size_t src = std::size_t(t * token_stride + h * head_stride + d);
        const std::int64_t ko = c.layout == KVLayout::vllm ? vllm_key(g, pstride, b, s, h, d) : nhd(g, pstride, b, s, h, d);
        const std::int64_t vo = c.layout == KVLayout::vllm ? vllm_value(g, pstride, b, s, h, d) : nhd(g, pstride, b, s, h, d);
        const float kx = ref::from_storage(kb, src, c.dtype), vx = ref::from_storage(vb, src, c.dtype);
        const std::uint8_t kwant = float_to_fp8(kx / c.k_scale, c.kv), vwant = float_to_fp8(vx / c.v_scale, c.kv);
        ASSERT_EQ(int(kc[ko]), int(kwant)) << c.name << " token " << t << " head " << h << " dim " << d << ": key " << kx;
        ASSERT_EQ(int(vc[vo]), int(vwant)) << c.name << " token " << t << " head " << h << " dim " << d << ": value " << vx;
        nan_seen += std::isnan(kx);
        saturated += std::fabs(kx / c.k_scale) > fp8_format(c.kv).max_finite;
        written[ko] |= 1;
        written[vo] |= 2;
      }
  }
  EXPECT_GT(nan_seen, 0u) << c.name << ": the case is meant to write NaN keys";
  EXPECT_GT(saturated, 0u) << c.name << ": the case is meant to saturate keys";
  for (std::size_t i = 0; i < kc.size(); ++i) {
    if (!(written[i] & 1)) ASSERT_EQ(kc[i], sentinel) << c.name << ": key_cache[" << i << "] written";
    if (!(written[i] & 2)) ASSERT_EQ(vc[i], sentinel) << c.name << ": value_cache[" << i << "] written";
  }
}

const Fp8Case kFp8Writes[] = {
    {"nhd_fp16_e4m3_wide", KVLayout::nhd, DType::fp16, KVDType::fp8_e4m3, true, 2, 64, 16, 6, 37, 0, 0, false, 0.37f, 2.5f},
    {"nhd_bf16_e5m2_wide_qkv_slice", KVLayout::nhd, DType::bf16, KVDType::fp8_e5m2, true, 2, 32, 16, 4, 41, 4 * 32, 0, true,
     2.5f, 0.37f},
    {"nhd_bf16_e4m3_elementwise", KVLayout::nhd, DType::bf16, KVDType::fp8_e4m3, false, 3, 24, 7, 5, 19, 3, 1, false, 1.f,
     0.37f},
    {"vllm_fp16_e5m2_wide", KVLayout::vllm, DType::fp16, KVDType::fp8_e5m2, true, 2, 64, 16, 6, 37, 0, 0, false, 0.37f, 2.5f},
    {"vllm_bf16_e4m3_wide_qkv_slice", KVLayout::vllm, DType::bf16, KVDType::fp8_e4m3, true, 1, 128, 16, 3, 29, 6 * 128, 0,
     true, 2.5f, 2.5f},
    {"vllm_fp16_e4m3_elementwise_odd_page", KVLayout::vllm, DType::fp16, KVDType::fp8_e4m3, false, 3, 32, 5, 4, 17, 1, 3,
     false, 0.37f, 1.f},
    {"vllm_bf16_e5m2_elementwise", KVLayout::vllm, DType::bf16, KVDType::fp8_e5m2, false, 2, 16, 3, 7, 21, 0, 0, true, 1e-3f,
     3.f},
};

class CacheWriteFp8OnHost : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(CacheWriteFp8OnHost, WritesTheCodesOfExactlyTheMappedSlots) {
  for (std::uint8_t sentinel : {std::uint8_t(0x5a), std::uint8_t(0xa5)}) check_write_fp8(GetParam(), sentinel);
}

INSTANTIATE_TEST_SUITE_P(Both, CacheWriteFp8OnHost, ::testing::ValuesIn(kFp8Writes),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace muh
