// reshape_and_cache / reshape_and_cache_flash (kernels/cache_write.hpp: the per-token steps the
// kernel runs; src/cache_write.cu: the host checks): slot addressing against vLLM's 5-D/4-D and
// the NHD index formulas written out independently, the kernel's steps run over host buffers
// (both layouts, 16-byte and element chunks, strided key/value views, padded and out-of-range
// slots: every written element is the source's, every other one untouched), and every bad input
// refused with a Status before any CUDA call. The kernel itself runs in tests/gpu/test_cache_ops.cu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "muh/cache_write.hpp"
#include "muh/kernels/cache_write.hpp"
#include "muh/muh.h"

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

// The kernel's steps over host buffers: for each token, classify its slot, then write_chunk for
// each of its chunks (cache_write.cuh's loop, one thread at a time).
template <class E, int kVec>
int run_on_host(const CacheWriteArgs& a) {
  int bad = 0;
  for (int t = 0; t < a.num_tokens; ++t) {
    const std::int64_t slot = a.slot_mapping[t];
    const Slot kind = classify(slot, a.num_slots);
    if (kind == Slot::out_of_range) ++bad;
    if (kind != Slot::write) continue;
    for (int c = 0; c < kernels::cache_write::chunks_per_token(a, kVec); ++c)
      kernels::cache_write::write_chunk<E, kVec>(a, t, slot, c);
  }
  return bad;
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
  std::vector<std::int64_t> all(num_slots);
  for (std::int64_t i = 0; i < num_slots; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::int64_t> slots(c.tokens);
  int expect_bad = 0;
  for (int t = 0; t < c.tokens; ++t) {
    if (t % 5 == 3) slots[t] = -1;
    else if (t % 11 == 7) {
      slots[t] = (t % 2) ? num_slots : -7;
      ++expect_bad;
    } else slots[t] = all[t % num_slots];
  }
  CacheWriteArgs a = args_for(g, c.layout, pstride, pstride);
  a.key = key.data();
  a.value = value.data();
  a.key_cache = kc.data();
  a.value_cache = vc.data();
  a.slot_mapping = slots.data();
  a.num_tokens = c.tokens;
  a.key_token_stride = a.value_token_stride = token_stride;
  a.key_head_stride = a.value_head_stride = head_stride;
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

}  // namespace
}  // namespace muh
