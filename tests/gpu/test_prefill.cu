// test_prefill.cu — every compiled prefill policy, forced, against the CPU reference.
//
// One gtest case per (dispatch target, dtype, head_dim, shape): targets from MUH_TARGETS, (dtype,
// head_dim) from MUH_FOR_EACH_INSTANCE, shapes from muh::check::prefill_cases(); each name ends
// with the agent the forced policy runs (t75_fp16_…_sm75: the Turing agent). A target newer
// than the present device is skipped, saying so. What is checked and the tolerance are described
// in tools/prefill_check.hpp (shared with `muh verify`): error ≤ 2× a naive implementation at the
// input precision, no NaN/Inf (outputs pre-filled with NaN), lse, bitwise run-to-run equality.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "../../tools/prefill_check.hpp"
#include "gpu_test_util.hpp"
#include "muh/build_config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
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
  return "t" + std::to_string(p.target) + "_" + std::string(dtype_name(p.dtype)) + "_hd" + std::to_string(p.head_dim) +
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
  if (prm.target > device_cc())
    GTEST_SKIP() << "target " << prm.target << " is newer than the device (sm_" << device_cc() << ")";
  const auto& in = check::cached_prefill_inputs(prm.case_index, prm.dtype, prm.head_dim);
  const check::PrefillResult r = check::run_prefill_case(in, prm.target);
  const PrefillPolicy pol = prefill_policy(prm.target, prm.dtype, prm.head_dim);
  SCOPED_TRACE(std::string("policy: ") + std::string(agent_name(pol.agent)) + " " + std::to_string(pol.block_m) +
               "x" + std::to_string(pol.block_n) + " w" + std::to_string(pol.num_warps) + " s" +
               std::to_string(pol.num_stages));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.nonfinite, 0u) << "outputs left NaN/Inf (pre-filled with NaN)";
  EXPECT_EQ(r.lse_mismatch, 0u) << "max finite lse error " << r.max_lse_err;
  EXPECT_TRUE(r.deterministic) << "two runs differ bitwise";
  EXPECT_LE(r.max_err, r.tol) << "naive error at the input precision " << in.naive_err << ", max |ref| " << in.max_ref;
  RecordProperty("max_err", std::to_string(r.max_err));
  RecordProperty("tol", std::to_string(r.tol));
}

INSTANTIATE_TEST_SUITE_P(Prefill, PrefillForced, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<PrefillTestParam>& info) { return param_name(info.param); });

}  // namespace
}  // namespace muh

// ---- The K/V ring of the tensor-core agent at depths and shapes the tables do not use --------
// (1 buffer: the synchronous path a profile without cp.async gets; odd depths; 8 warps with Q in
// registers; block_n 32), launched directly with a policy of their own, same shapes and checks.
#include "muh/kernels/prefill_launch.cuh"

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
  return [](const PrefillParams& p) { return kernels::launch_prefill<G, T, D>(kernels::make_prefill_args(p), nullptr); };
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
  EXPECT_EQ(r.nonfinite, 0u) << "outputs left NaN/Inf (pre-filled with NaN)";
  EXPECT_EQ(r.lse_mismatch, 0u) << "max finite lse error " << r.max_lse_err;
  EXPECT_TRUE(r.deterministic) << "two runs differ bitwise";
  EXPECT_LE(r.max_err, r.tol) << "naive error at the input precision " << in.naive_err;
}

INSTANTIATE_TEST_SUITE_P(Prefill, PrefillRing, ::testing::ValuesIn(ring_params()),
                         [](const ::testing::TestParamInfo<RingParam>& info) {
                           return std::string(info.param.name) + "_" + check::prefill_cases()[info.param.case_index].name;
                         });

}  // namespace
}  // namespace muh
