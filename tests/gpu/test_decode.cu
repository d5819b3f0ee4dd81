// test_decode.cu — every compiled paged-decode policy, forced, against the CPU reference.
//
// One gtest case per (dispatch target, dtype, head_dim, KV layout, shape): targets from
// MUH_TARGETS, (dtype, head_dim) from MUH_FOR_EACH_INSTANCE, shapes from
// muh::check::decode_shapes() (check/decode_case.hpp, shared with `muh verify`, which also states
// the tolerance: ≤ 2× a naive implementation at the storage precision, outputs pre-filled with
// NaN, NaN in the unused slots of every last page). A target newer than the present device is
// skipped, saying so. Further suites: V2 == V1 for several split counts, seq_len 0, bitwise
// determinism, the same bits with and without the L2 evict-first policy, a CUDA-graph capture +
// replay of a graph-fixed plan, and the C ABI.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "decode_case.hpp"
#include "gpu_test_util.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/muh.h"
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

using testing::device_cc;

const HardwareCapability& device_hw() {
  static const HardwareCapability hw = query_current_device().hw;
  return hw;
}

#define MUH_REQUIRE_TARGET(target)                                                                   \
  do {                                                                                               \
    MUH_REQUIRE_GPU();                                                                               \
    if (!target_runs_on_cc((target), device_cc()))                                                    \
      GTEST_SKIP() << "target " << (target) << " is newer than the device (sm_" << device_cc() << ")"; \
  } while (0)

// A 16-bit instance for the suites below: bf16 hd128 where compiled, else the first 16-bit one.
std::pair<DType, int> a_16bit_instance(int prefer_hd = 128) {
  if (is_compiled_instance(DType::bf16, prefer_hd)) return {DType::bf16, prefer_hd};
  for (const auto& [t, d] : kCompiledInstances)
    if (t != DType::fp32) return {t, d};
  return {kCompiledInstances[0].dtype, kCompiledInstances[0].head_dim};
}

// A case of a 16-bit compiled instance at `target` (the shapes and lengths are the test's).
check::DecodeCase case_at(int target, int q_heads = check::DecodeCase{}.num_q_heads,
                          int kv_heads = check::DecodeCase{}.num_kv_heads) {
  const auto [t, d] = a_16bit_instance();
  check::DecodeCase c;
  c.target = target;
  c.dtype = t;
  c.head_dim = d;
  c.num_q_heads = q_heads;
  c.num_kv_heads = kv_heads;
  return c;
}

// The compiled targets less sm_90a, whose decode rows are sm_90's (check::decode_sweep_targets).
std::vector<int> all_targets() { return check::decode_sweep_targets(); }

std::string layout_name(KVLayout l) { return l == KVLayout::nhd ? "nhd" : "vllm"; }

// ---- The forced-policy sweep ----------------------------------------------------------------
}  // namespace
// gtest prints parameters through PrintTo found by ADL (here: in KVLayout's and DecodeCase's
// namespaces), so that ctest lists cases by name rather than as raw bytes.
void PrintTo(KVLayout l, std::ostream* os) { *os << layout_name(l); }
namespace check {
void PrintTo(const DecodeCase& c, std::ostream* os) { *os << c.name(); }
}  // namespace check
namespace {

class DecodeForced : public ::testing::TestWithParam<check::DecodeCase> {};

TEST_P(DecodeForced, MatchesReference) {
  const check::DecodeCase c = GetParam();
  MUH_REQUIRE_TARGET(c.target);
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  const check::DecodeOutcome r = pr.run(device_hw(), c.force_splits);
  EXPECT_TRUE(r.pass()) << c.name() << ": " << r.summary();
}

INSTANTIATE_TEST_SUITE_P(Sweep, DecodeForced, ::testing::ValuesIn(check::decode_sweep_cases(false, 1)),
                         [](const auto& info) { return info.param.name(); });

// ---- V2 == V1 for several split counts --------------------------------------------------------

// The suites' parameters are small structs with a name() (structured bindings read them as they
// read tuples): the test name and gtest's "GetParam() = ..." both print the case, e.g.
// t90_hd128_nhd_x5, where a tuple printed as (90, 128, nhd, 5).
struct SplitParam {
  int target, head_dim;
  KVLayout layout;
  int splits;
  std::string name() const {
    return "t" + std::to_string(target) + "_hd" + std::to_string(head_dim) + "_" + layout_name(layout) + "_x" +
           std::to_string(splits);
  }
};
void PrintTo(const SplitParam& p, std::ostream* os) { *os << p.name(); }

class DecodeSplits : public ::testing::TestWithParam<SplitParam> {};

TEST_P(DecodeSplits, V2MatchesV1) {
  const auto [target, hd, layout, splits] = GetParam();
  MUH_REQUIRE_TARGET(target);
  const auto [t, d] = a_16bit_instance(hd);
  check::DecodeCase c;
  c.target = target;
  c.dtype = t;
  c.head_dim = d;
  c.layout = layout;
  c.page_size = 16;
  c.num_q_heads = 16;
  c.num_kv_heads = 4;
  c.seq_lens = {1000, 513, 64, 1};
  c.seed = 11;
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  const check::DecodeOutcome v1 = pr.run(device_hw(), 1);
  ASSERT_TRUE(v1.pass()) << "V1: " << v1.summary();
  ASSERT_EQ(v1.num_splits, 1);
  const check::DecodeOutcome v2 = pr.run(device_hw(), splits);
  ASSERT_TRUE(v2.pass()) << "V2 x" << splits << ": " << v2.summary();
  EXPECT_EQ(v2.num_splits, splits);
  double diff = 0;
  for (std::size_t i = 0; i < v1.out.size(); ++i) diff = std::max(diff, double(std::fabs(v1.out[i] - v2.out[i])));
  EXPECT_LE(diff, v1.tol) << "V2 with " << splits << " partitions differs from V1 by " << diff;
}

std::vector<SplitParam> split_params() {
  std::vector<SplitParam> v;
  for (int target : all_targets())
    for (int hd : {128, 256})
      for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
        for (int s : {2, 3, 5, 8, 13}) v.push_back({target, hd, l, s});
  return v;
}

std::string split_name(const ::testing::TestParamInfo<SplitParam>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(Splits, DecodeSplits, ::testing::ValuesIn(split_params()), split_name);

// ---- seq_len 0: out = 0, lse = −inf, for V1 and V2 -------------------------------------------

struct TargetSplits {
  int target, splits;
  std::string name() const { return "t" + std::to_string(target) + "_x" + std::to_string(splits); }
};
void PrintTo(const TargetSplits& p, std::ostream* os) { *os << p.name(); }

std::string target_split_name(const ::testing::TestParamInfo<TargetSplits>& info) { return info.param.name(); }

class DecodeZeroLength : public ::testing::TestWithParam<TargetSplits> {};

TEST_P(DecodeZeroLength, ZerosAndMinusInf) {
  const auto [target, splits] = GetParam();
  MUH_REQUIRE_TARGET(target);
  check::DecodeCase c = case_at(target, 8, 2);
  // All empty under V1; under V2 one sequence has tokens, so there is a workspace to merge.
  c.seq_lens = splits > 1 ? std::vector<int>{0, 0, 0, 40} : std::vector<int>{0, 0, 0};
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  const check::DecodeOutcome r = pr.run(device_hw(), splits);
  EXPECT_TRUE(r.pass()) << r.summary();
  EXPECT_EQ(r.empty_bad, 0u);
}

std::vector<TargetSplits> target_split_params() {
  std::vector<TargetSplits> v;
  for (int target : all_targets())
    for (int s : {1, 3}) v.push_back({target, s});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Empty, DecodeZeroLength, ::testing::ValuesIn(target_split_params()), target_split_name);

// ---- Bitwise determinism across repeated runs ---------------------------------------------------

class DecodeDeterminism : public ::testing::TestWithParam<TargetSplits> {};

TEST_P(DecodeDeterminism, BitwiseEqualAcrossRuns) {
  const auto [target, splits] = GetParam();
  MUH_REQUIRE_TARGET(target);
  check::DecodeCase c = case_at(target, 32, 8);
  c.seq_lens = {2049, 100, 7, 1500};
  c.seed = 5;
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  const check::DecodeOutcome first = pr.run(device_hw(), splits);
  ASSERT_TRUE(first.pass()) << first.summary();
  for (int i = 0; i < 3; ++i) {
    const check::DecodeOutcome again = pr.run(device_hw(), splits);
    ASSERT_TRUE(again.error.empty()) << again.error;
    EXPECT_TRUE(again.out_bytes == first.out_bytes) << "run " << i + 2 << " differs bitwise from run 1";
  }
}

INSTANTIATE_TEST_SUITE_P(Repeat, DecodeDeterminism, ::testing::ValuesIn(target_split_params()), target_split_name);

// ---- The L2 cache policy of the K/V copies changes speed, never bits -------------------------

struct L2Param {
  int target;
  KVLayout layout;
  int splits;
  std::string name() const {
    return "t" + std::to_string(target) + "_" + layout_name(layout) + "_x" + std::to_string(splits);
  }
};
void PrintTo(const L2Param& p, std::ostream* os) { *os << p.name(); }

class DecodeL2Policy : public ::testing::TestWithParam<L2Param> {};

// The plan keeps the evict-first policy for small calls and drops it for large ones (plan.cpp);
// the test shapes are small, so the sweep above runs with it: here both forms, forced, must pass
// the reference check and agree bit for bit.
TEST_P(DecodeL2Policy, SameBitsWithAndWithoutEvictFirst) {
  const auto [target, layout, splits] = GetParam();
  MUH_REQUIRE_TARGET(target);
  check::DecodeCase c = case_at(target, 32, 8);
  c.layout = layout;
  c.seq_lens = {2049, 100, 7, 1500, 1};
  c.seed = 9;
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  const check::DecodeOutcome on = pr.run(device_hw(), splits, false, 1);
  ASSERT_TRUE(on.pass()) << "evict-first: " << on.summary();
  const check::DecodeOutcome off = pr.run(device_hw(), splits, false, 0);
  ASSERT_TRUE(off.pass()) << "no L2 policy: " << off.summary();
  EXPECT_EQ(on.num_splits, off.num_splits);
  EXPECT_TRUE(on.out_bytes == off.out_bytes) << "the L2 policy changed the output bits";
}

std::vector<L2Param> l2_params() {
  std::vector<L2Param> v;
  for (int target : all_targets())
    for (KVLayout l : {KVLayout::nhd, KVLayout::vllm})
      for (int s : {1, 3}) v.push_back({target, l, s});
  return v;
}

std::string l2_name(const ::testing::TestParamInfo<L2Param>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(L2, DecodeL2Policy, ::testing::ValuesIn(l2_params()), l2_name);

// ---- CUDA graph: capture a graph-fixed plan once, replay with other seq_lens ------------------

class DecodeGraph : public ::testing::TestWithParam<TargetSplits> {};

TEST_P(DecodeGraph, CaptureAndReplay) {
  const auto [target, splits] = GetParam();
  MUH_REQUIRE_TARGET(target);
  check::DecodeCase c = case_at(target, 16, 4);
  c.seq_lens = {900, 0, 333, 1};  // the capacity: max_seq_len 900
  c.seed = 23;
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  const check::DecodeOutcome captured = pr.run(device_hw(), splits, /*graph=*/true);
  ASSERT_TRUE(captured.pass()) << "first launch of the graph: " << captured.summary();
  const check::DecodeOutcome replayed = pr.replay();
  EXPECT_TRUE(replayed.pass()) << "replay: " << replayed.summary();
  EXPECT_TRUE(replayed.out_bytes == captured.out_bytes) << "replay differs bitwise";
  // The same graph, new seq_lens written to the device between replays (each within the
  // pages its sequence owns: 900 → 450, 333 → 7, 1 → 0).
  pr.set_seq_lens({450, 0, 7, 0});
  ASSERT_EQ(pr.upload_seq_lens(), "");
  const check::DecodeOutcome changed = pr.replay();
  EXPECT_TRUE(changed.pass()) << "replay with new seq_lens: " << changed.summary();
}

INSTANTIATE_TEST_SUITE_P(Graph, DecodeGraph, ::testing::ValuesIn(target_split_params()), target_split_name);

// ---- The wide row (tuning_sm90.hpp's kDecodeWide) ---------------------------------------------
// The forced sweep runs it on every shape it reads (`*_wide` cases). Here: a wide plan replayed
// over pages its kernels do not read runs the target's own row (the same results), and a CUDA
// graph of a wide plan replays with other seq_lens.

// The compiled 16-bit (dtype, head dim) with a wide row on sm_90, if any.
bool wide_instance(DType* t, int* d) {
  for (const auto& [dt, hd] : kCompiledInstances)
    if (dt != DType::fp32 && is_compiled_target(90) && has_decode_wide_policy(90, dt, hd)) {
      *t = dt;
      *d = hd;
      return true;
    }
  return false;
}

TEST(DecodeWide, APlanForPagesOf16RunsOnPagesItCannotRead) {
  MUH_REQUIRE_TARGET(90);
  DType t;
  int d;
  if (!wide_instance(&t, &d)) GTEST_SKIP() << "no wide decode row in this build (sm_90, a 16-bit head dim with one)";
  for (const auto& [layout, page] : {std::pair{KVLayout::vllm, 32}, std::pair{KVLayout::nhd, 8}}) {
    check::DecodeCase c;
    c.target = 90;
    c.dtype = t;
    c.head_dim = d;
    c.layout = layout;
    c.page_size = page;
    c.num_q_heads = 4;
    c.num_kv_heads = 1;
    c.seq_lens = {2100, 333, 1};
    c.seed = 29;
    c.shape = "wide_plan_other_pages";
    SCOPED_TRACE(c.name());
    check::DecodeProblem pr(c);
    ASSERT_EQ(pr.upload(), "");
    DecodeParams p16 = pr.params();
    p16.page_size = 16;
    p16.max_blocks_per_seq = (p16.max_seq_len + 15) / 16;
    DecodePlan plan;
    ASSERT_TRUE(plan_decode(p16, device_hw(), PlanOptions{90, 3, false, -1, 1}, &plan).ok());
    ASSERT_TRUE(plan.wide);
    const check::DecodeOutcome r = pr.run_planned(plan);
    EXPECT_TRUE(r.pass()) << r.summary();
  }
}

TEST(DecodeWide, GraphCaptureAndReplay) {
  MUH_REQUIRE_TARGET(90);
  DType t;
  int d;
  if (!wide_instance(&t, &d)) GTEST_SKIP() << "no wide decode row in this build (sm_90, a 16-bit head dim with one)";
  check::DecodeCase c;
  c.target = 90;
  c.dtype = t;
  c.head_dim = d;
  c.layout = KVLayout::vllm;
  c.num_q_heads = 6;
  c.num_kv_heads = 1;
  c.seq_lens = {4000, 0, 333, 1};
  c.wide_row = 1;
  c.seed = 31;
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  const check::DecodeOutcome captured = pr.run(device_hw(), 5, /*graph=*/true);
  ASSERT_TRUE(captured.pass()) << "first launch of the graph: " << captured.summary();
  pr.set_seq_lens({2049, 0, 17, 0});
  ASSERT_EQ(pr.upload_seq_lens(), "");
  const check::DecodeOutcome changed = pr.replay();
  EXPECT_TRUE(changed.pass()) << "replay with new seq_lens: " << changed.summary();
}

// ---- debug_checks: device-side tables checked on the host, nothing launched on failure ---------

// What the test corrupts (an unscoped enum: the test reads it as the int it was).
enum BadTable { block_id_past_num_pages = 0, negative_block_id = 1, seq_len_past_max = 2 };
const char* bad_table_name(BadTable b) {
  return b == block_id_past_num_pages ? "block_id_past_num_pages"
         : b == negative_block_id     ? "negative_block_id"
                                      : "seq_len_past_max";
}
void PrintTo(BadTable b, std::ostream* os) { *os << bad_table_name(b); }

class DecodeDebugChecks : public ::testing::TestWithParam<BadTable> {};

TEST_P(DecodeDebugChecks, RefusesBadDeviceTables) {
  const int what = GetParam();  // 0: a block id past num_pages, 1: a negative block id, 2: seq_len > max
  MUH_REQUIRE_GPU();
  check::DecodeCase c = case_at(-1);
  c.seq_lens = {40, 100};
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  DecodeParams p = pr.params();
  DecodePlan plan;
  ASSERT_TRUE(plan_decode(p, device_hw(), {}, &plan).ok());
  testing::DeviceBuffer ws(plan.workspace_bytes);
  if (what == 2) {
    const int too_long = p.max_seq_len + 1;
    MUH_CUDA_CHECK(cudaMemcpy(const_cast<int*>(p.seq_lens) + 1, &too_long, 4, cudaMemcpyHostToDevice));
  } else {
    const int bad = what == 0 ? p.num_pages + 5 : -1;
    MUH_CUDA_CHECK(cudaMemcpy(const_cast<int*>(p.block_table) + p.max_blocks_per_seq + 2, &bad, 4,
                              cudaMemcpyHostToDevice));
  }
  RunOptions opt;
  opt.debug_checks = true;
  const Status s = paged_decode(p, plan, ws.p, plan.workspace_bytes, opt);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.message();
  EXPECT_NE(s.message().find(what == 2 ? "seq_lens" : "block_table"), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Debug, DecodeDebugChecks,
                         ::testing::Values(block_id_past_num_pages, negative_block_id, seq_len_past_max),
                         [](const auto& info) { return std::string(bad_table_name(info.param)); });

// ---- The C ABI (muh.h) over the same buffers ------------------------------------------------------

TEST(DecodeCApi, MatchesTheCppApi) {
  MUH_REQUIRE_GPU();
  check::DecodeCase c = case_at(-1, 8, 2);  // the device's own target
  c.seq_lens = {3000, 17};
  check::DecodeProblem pr(c);
  ASSERT_EQ(pr.upload(), "");
  const check::DecodeOutcome cpp = pr.run(device_hw(), 0);
  ASSERT_TRUE(cpp.pass()) << cpp.summary();
  const DecodeParams p = pr.params();
  size_t ws = 0;
  ASSERT_EQ(muh_decode_workspace_size(int(p.dtype), int(p.layout), p.num_seqs, p.num_q_heads, p.num_kv_heads,
                                      p.head_dim, p.page_size, p.max_seq_len, -1, 0, 0, &ws),
            MUH_OK)
      << muh_last_error();
  testing::DeviceBuffer work(ws);
  ASSERT_EQ(muh_paged_decode(int(p.dtype), int(p.layout), p.q, p.k_cache, p.v_cache, p.out, p.lse, p.block_table,
                             p.seq_lens, p.num_seqs, p.num_q_heads, p.num_kv_heads, p.head_dim, p.page_size,
                             p.num_pages, p.max_blocks_per_seq, p.max_seq_len, p.softmax_scale, work.p, ws, -1, 0,
                             0, nullptr),
            MUH_OK)
      << muh_last_error();
  EXPECT_TRUE(testing::device_bytes_equal(p.out, cpp.out_bytes, cpp.out.size() * dtype_size(c.dtype)))
      << "C ABI output differs from the C++ API's";
  // A bad call through the C ABI: a code and a message, nothing launched.
  EXPECT_EQ(muh_paged_decode(int(p.dtype), int(p.layout), p.q, p.k_cache, p.v_cache, p.out, p.lse, p.block_table,
                             p.seq_lens, p.num_seqs, p.num_q_heads, 3, p.head_dim, p.page_size, p.num_pages,
                             p.max_blocks_per_seq, p.max_seq_len, 0.f, work.p, ws, -1, 0, 0, nullptr),
            MUH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(muh_last_error()).find("multiple"), std::string::npos) << muh_last_error();
}

}  // namespace
}  // namespace muh
