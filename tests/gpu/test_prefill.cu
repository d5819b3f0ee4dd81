// test_prefill.cu — every compiled prefill policy, forced, against the CPU reference.
//
// One gtest case per (dispatch target, dtype, head_dim, shape): targets from MUH_TARGETS, (dtype,
// head_dim) from MUH_FOR_EACH_INSTANCE, shapes from muh::check::prefill_cases(); each name ends
// with the agent the forced policy runs (t75_fp16_…_sm75: the Turing agent). A target newer
// than the present device is skipped, saying so. What is checked and the tolerance are described
// in check/prefill_check.hpp (shared with `muh verify`): error ≤ 2× a naive implementation at the
// input precision, no NaN/Inf (outputs pre-filled with NaN), lse, bitwise run-to-run equality.
// The shapes include the tail split forced (prefill_cases()' split_* cases, workspace pre-filled
// with NaN); at the end, the split at the size it is made for (PrefillSplit).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "prefill_check.hpp"
#include "prefill_expect.hpp"
#include "gpu_test_util.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/tuning/policy_io.hpp"
#include "muh/tuning/selectors.hpp"

namespace muh {
namespace {

struct PrefillTestParam {
  int target;
  DType dtype;
  int head_dim;
  std::size_t case_index;
};

// ctest lists parameterised cases with their parameters: print them by name, not as raw bytes.
std::string param_name(const PrefillTestParam& p) {
  return "t" + std::string(p.target == kTargetSm90a ? "90a" : std::to_string(p.target)) + "_" + std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
         "_" + check::prefill_cases()[p.case_index].name + "_" +
         std::string(agent_name(prefill_policy(p.target, p.dtype, p.head_dim).agent));
}
void PrintTo(const PrefillTestParam& p, std::ostream* os) { *os << param_name(p); }

std::vector<PrefillTestParam> all_params() {
  std::vector<PrefillTestParam> v;
  for (std::size_t ti = 0; ti < compiled_targets::size; ++ti)
    for (const auto& [t, d] : kCompiledInstances)
      for (std::size_t c = 0; c < check::prefill_cases().size(); ++c)
        v.push_back({compiled_targets::values[ti], t, d, c});
  return v;
}

using testing::device_cc;

class PrefillForced : public ::testing::TestWithParam<PrefillTestParam> {};

TEST_P(PrefillForced, MatchesReference) {
  MUH_REQUIRE_GPU();
  const PrefillTestParam prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc()))
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  const auto& in = check::cached_prefill_inputs(prm.case_index, prm.dtype, prm.head_dim);
  const check::PrefillResult r = check::run_prefill_case(in, prm.target);
  const PrefillPolicy pol = prefill_policy(prm.target, prm.dtype, prm.head_dim);
  SCOPED_TRACE("policy: " + to_string(pol, prm.dtype, prm.head_dim));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  testing::expect_matches_reference(r, in.naive_err, in.max_ref);
  // A forced tail split must have happened on an agent that splits (the sm80-class body; the
  // portable and sm90 agents run whole tiles), else the case tests nothing new.
  if (check::prefill_cases()[prm.case_index].tail_chunk > 0 && (pol.agent == Agent::sm80 || pol.agent == Agent::sm75))
    EXPECT_GT(r.workspace_bytes, 0u) << "the forced tail split did not run";
  RecordProperty("workspace_bytes", std::to_string(r.workspace_bytes));
  RecordProperty("max_err", std::to_string(r.max_err));
  RecordProperty("tol", std::to_string(r.tol));
}

INSTANTIATE_TEST_SUITE_P(Prefill, PrefillForced, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<PrefillTestParam>& info) { return param_name(info.param); });

// The sm90 agent's persistent schedule with few CTAs: planned for 2 SMs, so that 2 CTAs walk every
// q tile of the case in turn from the counter — tiles of other sequences and heads, short
// sequences' empty tiles skipped, the K/V ring and the Q buffers running on from tile to tile —
// on the real device. Same checks as above, and the schedule must have run.
std::vector<PrefillTestParam> sm90a_params() {
  std::vector<PrefillTestParam> v;
  for (const PrefillTestParam& p : all_params())
    if (p.target == kTargetSm90a && prefill_policy(p.target, p.dtype, p.head_dim).agent == Agent::sm90) v.push_back(p);
  return v;
}

class PrefillPersistent : public ::testing::TestWithParam<PrefillTestParam> {};

TEST_P(PrefillPersistent, TwoCtasWalkEveryTile) {
  MUH_REQUIRE_GPU();
  const PrefillTestParam prm = GetParam();
  if (!target_runs_on_cc(prm.target, device_cc()))
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  const auto& in = check::cached_prefill_inputs(prm.case_index, prm.dtype, prm.head_dim);
  const check::PrefillResult r = check::run_prefill_case(in, prm.target, {}, nullptr, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_TRUE(r.persistent) << "the plan did not take the persistent schedule";
  testing::expect_matches_reference(r, in.naive_err, in.max_ref);
}

// (No sm_90a row compiled: nothing to instantiate.)
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PrefillPersistent);
INSTANTIATE_TEST_SUITE_P(Prefill, PrefillPersistent, ::testing::ValuesIn(sm90a_params()),
                         [](const ::testing::TestParamInfo<PrefillTestParam>& info) { return param_name(info.param); });

}  // namespace
}  // namespace muh

// ---- The K/V ring of the tensor-core agent at depths and shapes the tables do not use --------
// (1 buffer: the synchronous path a profile without cp.async gets; odd depths; 8 warps with Q in
// registers; block_n 32), launched directly with a policy of their own, same shapes and checks.
#include "muh/kernels/prefill_launch.cuh"
#include "muh/launch_args.cuh"

namespace muh {
namespace {

template <int BM, int BN, int W, int S, Agent A = Agent::sm80>
struct RingPolicy {
  constexpr PrefillPolicy operator()() const { return {A, BM, BN, W, S, 232448, "test"}; }
};

struct RingParam {
  const char* name;
  DType dtype;
  int head_dim;
  check::PrefillLauncher launch;
  std::size_t case_index;
  int min_cc = 80;  // the agent's instructions: sm80 (cp.async, m16n8k16) or sm75 (m16n8k8)
};
void PrintTo(const RingParam& p, std::ostream* os) { *os << p.name << "_" << check::prefill_cases()[p.case_index].name; }

template <class G, DType T, int D>
check::PrefillLauncher ring_launcher() {
  return [](const PrefillParams& p) { return kernels::launch_prefill<G, T, D>(detail::make_prefill_args(p), nullptr); };
}

std::vector<RingParam> ring_params() {
  const RingParam base[] = {
      {"bf16_hd128_128x64w4_ring1", DType::bf16, 128, ring_launcher<RingPolicy<128, 64, 4, 1>, DType::bf16, 128>(), 0},
      {"fp16_hd128_128x64w4_ring3", DType::fp16, 128, ring_launcher<RingPolicy<128, 64, 4, 3>, DType::fp16, 128>(), 0},
      {"bf16_hd256_64x64w4_ring3", DType::bf16, 256, ring_launcher<RingPolicy<64, 64, 4, 3>, DType::bf16, 256>(), 0},
      {"bf16_hd96_128x64w8_ring5", DType::bf16, 96, ring_launcher<RingPolicy<128, 64, 8, 5>, DType::bf16, 96>(), 0},
      {"fp16_hd64_64x32w4_ring2", DType::fp16, 64, ring_launcher<RingPolicy<64, 32, 4, 2>, DType::fp16, 64>(), 0},
      // Warp pairs (hd 256, 8 warps of one m16 tile each): one buffer with 16 keys per half, and
      // three buffers (the K copy issued after the softmax).
      {"fp16_hd256_128x32w8_ring1", DType::fp16, 256, ring_launcher<RingPolicy<128, 32, 8, 1>, DType::fp16, 256>(), 0},
      {"bf16_hd256_128x64w8_ring3", DType::bf16, 256, ring_launcher<RingPolicy<128, 64, 8, 3>, DType::bf16, 256>(), 0},
      // The sm75 agent (register-staged copies, m16n8k8) off its table rows: two buffers, two m16
      // tiles per warp with Q in registers, and hd 96 × 16 keys (192 chunks over 128 threads: the
      // generic copy loop with a partial last round).
      {"fp16_hd64_sm75_128x64w4_ring2", DType::fp16, 64,
       ring_launcher<RingPolicy<128, 64, 4, 2, Agent::sm75>, DType::fp16, 64>(), 0, 75},
      {"fp16_hd96_sm75_64x16w4_ring1", DType::fp16, 96,
       ring_launcher<RingPolicy<64, 16, 4, 1, Agent::sm75>, DType::fp16, 96>(), 0, 75},
  };
  std::vector<RingParam> v;
  for (const auto& b : base)
    for (std::size_t c = 0; c < check::prefill_cases().size(); ++c) {
      RingParam r = b;
      r.case_index = c;
      v.push_back(r);
    }
  return v;
}

class PrefillRing : public ::testing::TestWithParam<RingParam> {};

TEST_P(PrefillRing, MatchesReference) {
  MUH_REQUIRE_GPU();
  const RingParam prm = GetParam();
  if (device_cc() < prm.min_cc) GTEST_SKIP() << "this tensor-core agent needs sm_" << prm.min_cc << " or newer";
  const auto& in = check::cached_prefill_inputs(prm.case_index, prm.dtype, prm.head_dim);
  const check::PrefillResult r = check::run_prefill_case(in, -1, prm.launch);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  testing::expect_matches_reference(r, in.naive_err, in.max_ref);
}

INSTANTIATE_TEST_SUITE_P(Prefill, PrefillRing, ::testing::ValuesIn(ring_params()),
                         [](const ::testing::TestParamInfo<RingParam>& info) {
                           return std::string(info.param.name) + "_" + check::prefill_cases()[info.param.case_index].name;
                         });

}  // namespace
}  // namespace muh

// ---- The tail split at the size it is made for (prefill_plan.hpp) -----------------------------
namespace muh {
namespace {

// The plan's slots assume prefill_ctas_per_sm(); the runtime's occupancy of each compiled
// tensor-core policy at the device's own target must agree, or the plan splits the wrong tail.
TEST(PrefillSplit, PlannedSlotsMatchTheRuntimeOccupancy) {
  MUH_REQUIRE_GPU();
  for (const auto& [t, d] : kCompiledInstances) {
    PrefillParams p;
    p.dtype = t;
    p.head_dim = d;
    p.batch = 4;
    p.max_seqlen_q = p.max_seqlen_k = 4096;
    p.total_q = p.total_k = 4 * 4096;
    p.num_q_heads = p.num_kv_heads = 4096 / d;
    HardwareCapability hw;
    ASSERT_TRUE(device_profile(-1, &hw).ok());
    PrefillPlan plan;
    Status s = plan_prefill(p, hw, {}, &plan);
    ASSERT_TRUE(s.ok()) << s.message();
    SCOPED_TRACE(std::string(dtype_name(t)) + " hd" + std::to_string(d) + " target " + std::to_string(plan.target));
    if (plan.policy.agent == Agent::portable) continue;  // never split
    int device_ctas_per_sm = 0;
    s = prefill_runtime_occupancy(plan, &device_ctas_per_sm);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_GT(device_ctas_per_sm, 0);
    EXPECT_EQ(plan.split.slots, plan.sm_count * device_ctas_per_sm);
  }
}

// The issue's hd 128 4k cell (bf16, batch 4, 32 heads, MHA): inputs on the device, the plan's
// workspace (on the H200: the last 136 of 4096 tiles split; 0 bytes where the plan does not
// split) pre-filled with NaN, so that a slot read but never written shows.
struct Split4kCell {
  static constexpr int batch = 4, seq = 4096, heads = 32, hd = 128;
  static constexpr std::size_t n = std::size_t(batch) * seq * heads * hd, nl = std::size_t(batch) * seq * heads;
  testing::DeviceBuffer qkv{3 * n * 2}, cu{(batch + 1) * 4};
  testing::DeviceBuffer ws;
  PrefillParams p;
  PrefillPlan plan;        // the plan's own split (workspace ws)
  PrefillPlan whole_plan;  // every tile whole
  std::size_t ws_bytes = 0;

  // A function, not the constructor: MUH_CUDA_CHECK asserts (SetUp wraps it in ASSERT_NO_FATAL_FAILURE).
  void init() {
    std::mt19937 rng(11);
    const std::vector<unsigned char> host = ref::to_storage(testing::random_vector(3 * n, rng), DType::bf16);
    MUH_CUDA_CHECK(cudaMemcpy(qkv.p, host.data(), 3 * n * 2, cudaMemcpyHostToDevice));
    std::vector<int> hcu(batch + 1);
    for (int b = 0; b <= batch; ++b) hcu[b] = b * seq;
    MUH_CUDA_CHECK(cudaMemcpy(cu.p, hcu.data(), hcu.size() * 4, cudaMemcpyHostToDevice));
    p.dtype = DType::bf16;
    p.q = qkv.p;
    p.k = static_cast<char*>(qkv.p) + n * 2;
    p.v = static_cast<char*>(qkv.p) + 2 * n * 2;
    p.cu_seqlens_q = p.cu_seqlens_k = static_cast<const int*>(cu.p);
    p.batch = batch;
    p.total_q = p.total_k = batch * seq;
    p.max_seqlen_q = p.max_seqlen_k = seq;
    p.num_q_heads = p.num_kv_heads = heads;
    p.head_dim = hd;
    HardwareCapability hw;
    ASSERT_TRUE(device_profile(-1, &hw).ok());
    ASSERT_TRUE(plan_prefill(p, hw, {}, &plan).ok());
    ASSERT_TRUE(plan_prefill(p, hw, PrefillPlanOptions{-1, kPrefillTailOff}, &whole_plan).ok());
    ws_bytes = plan.workspace_bytes;
    if (ws_bytes > 0) {
      ws.alloc(ws_bytes);
      MUH_CUDA_CHECK(cudaMemset(ws.p, 0xFF, ws_bytes));
    }
  }
};

// The tests on that cell: skipped without a GPU, without bf16 hd 128 in the build, or where the
// plan does not split it.
class PrefillSplitAt4k : public ::testing::Test {
 protected:
  void SetUp() override {
    MUH_REQUIRE_GPU();
    if (!is_compiled_instance(DType::bf16, 128)) GTEST_SKIP() << "bf16 hd 128 is not compiled into this build";
    ASSERT_NO_FATAL_FAILURE(c.init());
    if (c.ws_bytes == 0)
      GTEST_SKIP() << "the plan neither splits this shape on this device (its SM count) nor runs it persistent";
  }
  Split4kCell c;
};

// With the plan's own split (on the sm80 agent: the last 136 of 4096 tiles by key range on 132
// SMs) against the same call with every tile whole: out within 2 bf16 roundings of the largest
// output, lse within 1e-3, both finite everywhere, the split run bitwise repeatable. Where the plan
// runs the sm90 agent's persistent schedule instead (sm_90a compiled, an H100/H200), the same
// checks and bitwise equality with whole tiles.
TEST_F(PrefillSplitAt4k, AutoSplitMatchesWholeTiles) {
  const std::size_t n = c.n, nl = c.nl;
  testing::DeviceBuffer out_split(n * 2), out_split2(n * 2), out_whole(n * 2), lse_split(nl * 4), lse_whole(nl * 4);
  MUH_CUDA_CHECK(cudaMemset(out_split.p, 0xFF, n * 2));
  MUH_CUDA_CHECK(cudaMemset(out_whole.p, 0xFF, n * 2));
  PrefillParams p = c.p;
  p.out = out_split.p;
  p.lse = static_cast<float*>(lse_split.p);
  ASSERT_TRUE(prefill(p, c.plan, c.ws.p, c.ws_bytes).ok());
  p.out = out_split2.p;
  ASSERT_TRUE(prefill(p, c.plan, c.ws.p, c.ws_bytes).ok());
  p.out = out_whole.p;
  p.lse = static_cast<float*>(lse_whole.p);
  ASSERT_TRUE(prefill(p, c.whole_plan, nullptr, 0).ok());
  MUH_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned char> s(n * 2), s2(n * 2), w(n * 2);
  std::vector<float> ls(nl), lw(nl);
  MUH_CUDA_CHECK(cudaMemcpy(s.data(), out_split.p, n * 2, cudaMemcpyDeviceToHost));
  MUH_CUDA_CHECK(cudaMemcpy(s2.data(), out_split2.p, n * 2, cudaMemcpyDeviceToHost));
  MUH_CUDA_CHECK(cudaMemcpy(w.data(), out_whole.p, n * 2, cudaMemcpyDeviceToHost));
  MUH_CUDA_CHECK(cudaMemcpy(ls.data(), lse_split.p, nl * 4, cudaMemcpyDeviceToHost));
  MUH_CUDA_CHECK(cudaMemcpy(lw.data(), lse_whole.p, nl * 4, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(s == s2) << "two split runs differ bitwise";
  double max_diff = 0, max_out = 0, max_lse_diff = 0;
  std::size_t nonfinite = 0, differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = ref::from_storage(s.data(), i, DType::bf16), b = ref::from_storage(w.data(), i, DType::bf16);
    if (!std::isfinite(a) || !std::isfinite(b)) {
      ++nonfinite;
      continue;
    }
    differ += std::memcmp(&s[2 * i], &w[2 * i], 2) != 0;
    max_diff = std::max(max_diff, double(std::fabs(a - b)));
    max_out = std::max(max_out, double(std::fabs(b)));
  }
  for (std::size_t i = 0; i < nl; ++i) max_lse_diff = std::max(max_lse_diff, double(std::fabs(ls[i] - lw[i])));
  EXPECT_EQ(nonfinite, 0u);
  EXPECT_LE(max_diff, 2 * std::ldexp(max_out, -8)) << "max |split − whole| over max |out| " << max_out;
  EXPECT_LE(max_lse_diff, 1e-3);
  // The sm90 agent's persistent schedule (its plan has no split) computes each q tile as a CTA of
  // its own would: bitwise the same.
  if (c.plan.split.split())
    EXPECT_GT(differ, 0u) << "no output differs at all: did the split run?";
  else
    EXPECT_EQ(differ, 0u) << "the persistent schedule (" << c.plan.persistent.ctas << " CTAs) differs from whole tiles";
  RecordProperty("workspace_bytes", std::to_string(c.ws_bytes));
  RecordProperty("max_diff", std::to_string(max_diff));
}

// On sm_90 the tail kernel runs beside the whole-tile kernel (a dependent launch,
// prefill_launch.cuh). Stream order must still hold: a copy of out and lse queued right after the
// call, on the same (non-blocking) stream, sees every row — none of the NaN the outputs were
// filled with, and the same bits as out and lse read after a full synchronisation.
// What it does not catch: with the tail kernel's closing grid-dependency wait removed it still
// passed (3 of 3 repetitions on the H200): at this shape the whole tiles' last round ends
// nearly together and the tail CTAs, which take only the slots it frees, do not outlive it.
TEST_F(PrefillSplitAt4k, WorkQueuedAfterTheCallSeesEveryRow) {
  const std::size_t n = c.n, nl = c.nl;
  testing::DeviceBuffer out(n * 2), lse(nl * 4), out_copy(n * 2), lse_copy(nl * 4);
  cudaStream_t stream = nullptr;
  MUH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int rep = 0; rep < 3; ++rep) {
    SCOPED_TRACE("repetition " + std::to_string(rep));
    MUH_CUDA_CHECK(cudaMemsetAsync(out.p, 0xFF, n * 2, stream));
    MUH_CUDA_CHECK(cudaMemsetAsync(lse.p, 0xFF, nl * 4, stream));
    PrefillParams p = c.p;
    p.out = out.p;
    p.lse = static_cast<float*>(lse.p);
    RunOptions opt;
    opt.stream = stream;
    ASSERT_TRUE(prefill(p, c.plan, c.ws.p, c.ws_bytes, opt).ok());
    MUH_CUDA_CHECK(cudaMemcpyAsync(out_copy.p, out.p, n * 2, cudaMemcpyDeviceToDevice, stream));
    MUH_CUDA_CHECK(cudaMemcpyAsync(lse_copy.p, lse.p, nl * 4, cudaMemcpyDeviceToDevice, stream));
    MUH_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<unsigned char> o(n * 2), oc(n * 2);
    std::vector<float> l(nl), lc(nl);
    MUH_CUDA_CHECK(cudaMemcpy(o.data(), out.p, n * 2, cudaMemcpyDeviceToHost));
    MUH_CUDA_CHECK(cudaMemcpy(oc.data(), out_copy.p, n * 2, cudaMemcpyDeviceToHost));
    MUH_CUDA_CHECK(cudaMemcpy(l.data(), lse.p, nl * 4, cudaMemcpyDeviceToHost));
    MUH_CUDA_CHECK(cudaMemcpy(lc.data(), lse_copy.p, nl * 4, cudaMemcpyDeviceToHost));
    std::size_t nonfinite = 0;
    for (std::size_t i = 0; i < n; ++i) nonfinite += !std::isfinite(ref::from_storage(oc.data(), i, DType::bf16));
    for (std::size_t i = 0; i < nl; ++i) nonfinite += !std::isfinite(lc[i]);
    EXPECT_EQ(nonfinite, 0u) << "the copy queued after the call saw unwritten rows";
    EXPECT_TRUE(o == oc) << "out read after synchronising differs from the copy queued after the call";
    EXPECT_EQ(std::memcmp(l.data(), lc.data(), nl * 4), 0);
  }
  MUH_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace muh
