// test_decode_variants.cu — the general variant kind (muh/variant.hpp) of the paged decode: every
// compiled target's decode row (the portable agent's and the sm80 agent's, its cp.async and TMA
// kernels, query heads on the MMA's columns — GQA 4 — and on its rows — GQA 12, rows 12..15
// padding), forced, against the CPU reference
// — sliding windows (smaller than a page, a page, many pages, longer than the sequence), soft-cap
// 30 / 50 on sharp scores, sinks far above and below the scores, ALiBi with GQA, all at once with
// an empty sequence — for V1 and V2 at every split count 2 … 7: each against the reference (the
// tolerance of check/decode_case.hpp: 2× a naive same-precision implementation that applies the
// same variant), and V2 against V1 within the same bound (the sink and the window are where split-
// KV bugs live: a sink counted per partition, a partition before the window left unwritten).
// Outputs and workspace pre-filled with NaN; two runs bitwise equal.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode_case.hpp"
#include "decode_splits.hpp"
#include "gpu_test_util.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

// The GQA shapes: 8 q / 2 kv heads (group 4: the sm80 agent's heads-on-N tile), 12 q / 1 kv
// (group 12: heads on the MMA's rows, 4 of the 16 padding) and 6 q / 1 kv (the seed's 27B model
// at TP4: the portable agent's 6-head pass).
struct Heads {
  int q, kv;
};
const Heads kHeads[] = {{8, 2}, {12, 1}, {6, 1}};

struct VariantShape {
  const char* name;
  std::vector<int> seq_lens;
  float softmax_scale;
  check::VariantSpec v;
};

check::VariantSpec win(int left) {
  check::VariantSpec v;
  v.window_left = left;
  return v;
}

const std::vector<VariantShape>& shapes() {
  static const std::vector<VariantShape> s = [] {
    std::vector<VariantShape> r;
    r.push_back({"win5", {1, 17, 300, 1000}, 0.f, win(5)});
    r.push_back({"win_page16", {16, 17, 511}, 0.f, win(16)});
    r.push_back({"win100", {99, 100, 101, 1000}, 0.f, win(100)});
    r.push_back({"win_longer_than_seq", {3, 700}, 0.f, win(5000)});
    check::VariantSpec c30, c50;
    c30.softcap = 30.f;
    c50.softcap = 50.f;
    r.push_back({"softcap30_sharp", {1, 333}, 0.6f, c30});
    r.push_back({"softcap50_sharp", {257}, 0.6f, c50});
    check::VariantSpec sk;
    sk.sinks = testing::kDecodeSinks;
    r.push_back({"sinks", {1, 40, 600}, 0.f, sk});
    check::VariantSpec al;
    al.alibi = testing::kDecodeAlibi;
    r.push_back({"alibi_gqa4", {5, 800}, 0.f, al});
    check::VariantSpec all = win(64);
    all.softcap = 30.f;
    all.sinks = testing::kDecodeSinks;
    all.alibi = testing::kDecodeAlibi;
    r.push_back({"all_with_empty_seq", {0, 65, 1, 900}, 0.3f, all});
    return r;
  }();
  return s;
}

struct Param {
  int target;
  DType dtype;
  int head_dim;
  KVLayout layout;
  std::size_t shape;
  int heads;  // index into kHeads
};

std::string param_name(const Param& p) {
  return "t" + std::to_string(p.target) + "_" + std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         (p.layout == KVLayout::nhd ? "_nhd_" : "_vllm_") + "g" +
         std::to_string(kHeads[p.heads].q / kHeads[p.heads].kv) + "_" + shapes()[p.shape].name;
}
void PrintTo(const Param& p, std::ostream* os) { *os << param_name(p); }

// Every compiled decode target (check::decode_sweep_targets), for every instance of the general kind.
std::vector<Param> all_params() {
  std::vector<Param> v;
  for (const int target : check::decode_sweep_targets())  // (sm_90a's rows are sm_90's: run once)
    for (const auto& [t, d] : kCompiledInstances) {
      if (!is_general_instance(t, d)) continue;
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        for (int h = 0; h < 3; ++h)
          for (std::size_t s = 0; s < shapes().size(); ++s) v.push_back({target, t, d, l, s, h});
    }
  return v;
}

check::DecodeCase make_case(const Param& p) {
  check::DecodeCase c;
  c.target = p.target;
  c.dtype = p.dtype;
  c.head_dim = p.head_dim;
  c.layout = p.layout;
  c.page_size = 16;
  c.num_q_heads = kHeads[p.heads].q;
  c.num_kv_heads = kHeads[p.heads].kv;
  c.seq_lens = shapes()[p.shape].seq_lens;
  c.softmax_scale = shapes()[p.shape].softmax_scale;
  c.variant = shapes()[p.shape].v;
  for (auto* per_head : {&c.variant.sinks, &c.variant.alibi})
    if (!per_head->empty()) per_head->resize(c.num_q_heads);
  c.seed = 11u + unsigned(p.shape) * 13u;
  c.shape = shapes()[p.shape].name;
  return c;
}

using testing::device_cc;

class DecodeVariantForced : public ::testing::TestWithParam<Param> {};

TEST_P(DecodeVariantForced, EverySplitCountMatchesReferenceAndV1) {
  MUH_REQUIRE_GPU();
  const Param prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc())) GTEST_SKIP() << "target " << prm.target << " is newer than the device";
  check::DecodeProblem pr(make_case(prm));
  ASSERT_EQ(pr.upload(), "");
  HardwareCapability hw;
  ASSERT_TRUE(device_profile(-1, &hw).ok());
  check::DecodeOutcome v1, v2;
  ASSERT_NO_FATAL_FAILURE(testing::expect_v1(pr, hw, &v1));
  EXPECT_EQ(v1.num_splits, 1);
  for (int splits = 2; splits <= 7; ++splits) {
    ASSERT_NO_FATAL_FAILURE(testing::expect_v2(pr, hw, v1, splits, &v2));
    const check::DecodeOutcome v2b = pr.run(hw, splits);
    EXPECT_EQ(v2b.out_bytes, v2.out_bytes) << splits << " splits: two runs differ bitwise";
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, DecodeVariantForced, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& i) { return param_name(i.param); });

}  // namespace
}  // namespace muh
