// test_decode_fp8.cu — paged decode over an fp8 KV cache (muh/kv_quant.hpp): every compiled fp8
// instance (e4m3 / e5m2 × fp16 / bf16 q × head dim) on every compiled target — the sm80 agent's
// rows (GQA 4 — vLLM pages, and NHD pages at hd 128 / 256: the codes' own ldmatrix fragments
// widened in registers; GQA 12: codes widened in shared memory) and the portable agent's (widened
// in registers) —
// forced, both layouts, query heads on the MMA's columns (GQA 4) and rows (GQA 12), against the
// CPU reference on the dequantised cache (code · scale) with check/decode_case.hpp's tolerance
// (2× a naive same-precision implementation over the same dequantised values: widening the codes
// is exact, so an fp8 cache must be as accurate as a 16-bit one holding the same values).
//
// Shapes: length 1; lengths that are multiples of neither the page nor the tile; many partitions
// (V2 at 2 … 7 splits, each against V1); scales ≠ 1 (0.37, 2.5); values at the format's range
// limit and past it (saturated codes); an empty sequence; with the general variant kind (where
// compiled) a window, soft-cap, sinks and ALiBi at once; NHD pages of 8 and pages of 32 (both
// layouts) at GQA 4, 12 and 8 — the cp.async forms (`muh verify --quick` found the NHD one failing
// on an H100). Outputs pre-filled with NaN, unused cache slots hold the NaN code (a masking leak
// shows), two runs bitwise equal.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode_case.hpp"
#include "decode_splits.hpp"
#include "gpu_test_util.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/muh.h"
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

struct Heads {
  int q, kv;
};
const Heads kHeads[] = {{8, 2}, {12, 1}, {16, 2}};  // GQA 4, 12, and 8 (with pages of 8: muh verify's shape)

struct Fp8Shape {
  const char* name;
  std::vector<int> seq_lens;
  float softmax_scale;
  float k_scale, v_scale, amp;
  bool variant;  // the general kind: window 64, soft-cap 30, sinks, ALiBi
  int page_size = 16;
};

const std::vector<Fp8Shape>& shapes() {
  static const std::vector<Fp8Shape> s = {
      {"len1", {1, 1, 1}, 0.f, 1.f, 1.f, 1.f, false},
      {"ragged", {3, 17, 41, 333}, 0.f, 1.f, 1.f, 1.f, false},
      {"scaled", {1, 250, 1000}, 0.f, 0.37f, 2.5f, 1.f, false},
      // e4m3's largest value is 448: amp 600 with scale 1 saturates ~1/4 of the codes; the scores
      // are brought back to a few units by the softmax scale.
      {"range_limit", {77, 300}, 1.f / 4000.f, 1.f, 1.f, 600.f, false},
      {"empty_and_long", {0, 1500, 2}, 0.f, 0.8f, 0.6f, 1.f, false},
      {"variants", {0, 65, 1, 900}, 0.3f, 0.5f, 1.5f, 1.f, true},
      // Pages other than 16 take the cp.async form (no TMA) of the kernels that read the codes
      // themselves. NHD pages of 8 (a tile's 16 tokens from two pages) are `muh verify`'s
      // nhd/ragged, which died with an illegal instruction at sm_90 (ptxas 13.0 had left two
      // uniform registers of those copies unwritten: decode_sm80.cuh, cp_async16_generic_dst);
      // vLLM pages of an fp8 cache are multiples of 16, so pages of 32 cover that layout's form.
      {"page8", {17, 1, 200, 33}, 0.f, 1.f, 1.f, 1.f, false, 8},
      {"page32", {17, 1, 200, 33}, 0.f, 0.5f, 2.f, 1.f, false, 32},
  };
  return s;
}

struct Param {
  int target;
  KVDType kv;
  DType dtype;
  int head_dim;
  KVLayout layout;
  std::size_t shape;
  int heads;
};

std::string param_name(const Param& p) {
  return "t" + std::to_string(p.target) + "_" + std::string(kv_dtype_name(p.kv)) + "_" +
         std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         (p.layout == KVLayout::nhd ? "_nhd_" : "_vllm_") + "g" + std::to_string(kHeads[p.heads].q / kHeads[p.heads].kv) +
         "_" + shapes()[p.shape].name;
}
void PrintTo(const Param& p, std::ostream* os) { *os << param_name(p); }

// Every compiled target (both decode agents read fp8).
std::vector<Param> all_params() {
  std::vector<Param> v;
  for (const int target : check::decode_sweep_targets()) {  // (sm_90a's rows are sm_90's: run once)
    for (const auto& e : kCompiledFp8Instances) {
      if (e.head_dim == 0) continue;
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        for (int h = 0; h < 3; ++h)
          for (std::size_t s = 0; s < shapes().size(); ++s) {
            if (h == 2 && shapes()[s].page_size == 16) continue;  // GQA 8: the pages of 8 and 32 only
            if (shapes()[s].variant && !is_general_instance(e.dtype, e.head_dim)) continue;
            if (l == KVLayout::vllm && shapes()[s].page_size % 16 != 0) continue;
            v.push_back({target, e.kv, e.dtype, e.head_dim, l, s, h});
          }
    }
  }
  return v;
}

check::DecodeCase make_case(const Param& p) {
  const Fp8Shape& sh = shapes()[p.shape];
  check::DecodeCase c;
  c.target = p.target;
  c.dtype = p.dtype;
  c.head_dim = p.head_dim;
  c.layout = p.layout;
  c.page_size = sh.page_size;
  c.num_q_heads = kHeads[p.heads].q;
  c.num_kv_heads = kHeads[p.heads].kv;
  c.seq_lens = sh.seq_lens;
  c.softmax_scale = sh.softmax_scale;
  c.kv = p.kv;
  c.k_scale = sh.k_scale;
  c.v_scale = sh.v_scale;
  c.kv_amp = sh.amp;
  if (sh.variant) {
    c.variant.window_left = 64;
    c.variant.softcap = 30.f;
    c.variant.sinks.assign(testing::kDecodeSinks.begin(), testing::kDecodeSinks.begin() + c.num_q_heads);
    c.variant.alibi.assign(testing::kDecodeAlibi.begin(), testing::kDecodeAlibi.begin() + c.num_q_heads);
  }
  c.seed = 29u + unsigned(p.shape) * 7u + unsigned(p.head_dim);
  c.shape = sh.name;
  return c;
}

using testing::device_cc;

class DecodeFp8Forced : public ::testing::TestWithParam<Param> {};

TEST_P(DecodeFp8Forced, EverySplitCountMatchesReferenceAndV1) {
  MUH_REQUIRE_GPU();
  const Param prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc())) GTEST_SKIP() << "target " << prm.target << " is newer than the device";
  check::DecodeProblem pr(make_case(prm));
  ASSERT_EQ(pr.upload(), "");
  HardwareCapability hw;
  ASSERT_TRUE(device_profile(-1, &hw).ok());
  check::DecodeOutcome v1, v2;
  ASSERT_NO_FATAL_FAILURE(testing::expect_v1(pr, hw, &v1));
  for (int splits = 2; splits <= 7; ++splits) ASSERT_NO_FATAL_FAILURE(testing::expect_v2(pr, hw, v1, splits, &v2));
  // The plan's own choice, and a captured graph of it.
  const check::DecodeOutcome planned = pr.run(hw, 0);
  EXPECT_TRUE(planned.pass()) << "planned: " << planned.summary();
  const check::DecodeOutcome graph = pr.run(hw, 0, true);
  EXPECT_TRUE(graph.pass()) << "graph: " << graph.summary();
}

INSTANTIATE_TEST_SUITE_P(Fp8, DecodeFp8Forced, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& i) { return param_name(i.param); });

// The C ABI over an fp8 cache: muh_decode_workspace_size_quant sizes the cache type's own plan
// (plan.cpp: on many SMs more partitions than the 16-bit cache's), MUH_KV_AUTO is
// muh_decode_workspace_size, and muh_paged_decode_quant with that workspace writes what the C++
// API writes, bit for bit.
TEST(DecodeFp8CApi, WorkspaceOfTheCacheTypeRunsItsPlan) {
  MUH_REQUIRE_GPU();
  const auto& e = kCompiledFp8Instances[0];
  if (e.head_dim == 0) GTEST_SKIP() << "no fp8 instance in this build";
  check::DecodeCase c = make_case(Param{-1, e.kv, e.dtype, e.head_dim, KVLayout::vllm, 1, 0});
  c.seq_lens = {20000, 3};  // long enough to split on any SM count
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  HardwareCapability hw;
  ASSERT_TRUE(device_profile(-1, &hw).ok());
  const check::DecodeOutcome cpp = pr.run(hw, 0);
  ASSERT_TRUE(cpp.pass()) << cpp.summary();
  const DecodeParams p = pr.params();
  size_t ws = 0, ws16 = 0, ws_auto = 0;
  ASSERT_EQ(muh_decode_workspace_size_quant(int(p.dtype), int(p.layout), p.num_seqs, p.num_q_heads, p.num_kv_heads,
                                            p.head_dim, p.page_size, p.max_seq_len, -1, 0, 0, nullptr, &ws,
                                            int(p.kv.dtype)),
            MUH_OK)
      << muh_last_error();
  ASSERT_EQ(muh_decode_workspace_size_quant(int(p.dtype), int(p.layout), p.num_seqs, p.num_q_heads, p.num_kv_heads,
                                            p.head_dim, p.page_size, p.max_seq_len, -1, 0, 0, nullptr, &ws_auto,
                                            MUH_KV_AUTO),
            MUH_OK);
  ASSERT_EQ(muh_decode_workspace_size(int(p.dtype), int(p.layout), p.num_seqs, p.num_q_heads, p.num_kv_heads,
                                      p.head_dim, p.page_size, p.max_seq_len, -1, 0, 0, &ws16),
            MUH_OK);
  EXPECT_EQ(ws_auto, ws16);
  DecodePlan plan;
  ASSERT_TRUE(plan_decode(p, hw, PlanOptions{}, &plan).ok());
  EXPECT_EQ(ws, plan.workspace_bytes);
  testing::DeviceBuffer work(ws);
  const muh_kv_quant kv{int(p.kv.dtype), p.kv.k_scale, p.kv.v_scale};
  ASSERT_EQ(muh_paged_decode_quant(int(p.dtype), int(p.layout), p.q, p.k_cache, p.v_cache, p.out, p.lse,
                                   p.block_table, p.seq_lens, p.num_seqs, p.num_q_heads, p.num_kv_heads, p.head_dim,
                                   p.page_size, p.num_pages, p.max_blocks_per_seq, p.max_seq_len, p.softmax_scale,
                                   work.p, ws, -1, 0, 0, nullptr, nullptr, &kv),
            MUH_OK)
      << muh_last_error();
  EXPECT_TRUE(testing::device_bytes_equal(p.out, cpp.out_bytes, cpp.out.size() * dtype_size(c.dtype)))
      << "C ABI output differs from the C++ API's";
}

}  // namespace
}  // namespace muh
