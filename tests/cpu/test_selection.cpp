// test_selection.cpp — the one selection (select.hpp) as every caller sees it. For profiles across
// the whole range — the presets (BI-V100, T4, A100, L40S, H100, H200) and synthetic ones (a
// consumer Blackwell: cc 12.0 with 99 KB; an sm_80 part with 48 KB; a 16-SM cc 9.0 partition) —
// and every dtype × head dim × family:
//   * `muh config`'s choice (select_attention_config), the plan's (plan_prefill / plan_decode) and
//     the launcher's (the policy of the instantiation dispatch_target() resolves for the plan's
//     target) are the same row;
//   * the row fits the profile (shared memory, cp.async, tensor cores);
//   * the walk took the highest compiled target whose row fits: every compiled target above it,
//     up to where the walk started, was passed over, and its trace says why.
// Two regression tests pin the cases where the callers used to disagree.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "muh/attention.hpp"
#include "muh/config.hpp"
#include "muh/dispatch.hpp"
#include "muh/select.hpp"

namespace muh {
namespace {

struct Profile {
  const char* id;
  HardwareCapability hw;
};

HardwareCapability synthetic(const char* name, int cc, int smem_optin, int sms) {
  HardwareCapability hw = presets::h200;
  std::snprintf(hw.name, sizeof hw.name, "%s", name);
  hw.compute_capability = cc;
  hw.max_shared_memory_per_block_optin = smem_optin;
  hw.sm_count = sms;
  return with_arch_flags(hw);
}

const std::vector<Profile>& profiles() {
  static const std::vector<Profile> p = {
      {"bi_v100", presets::bi_v100},
      {"t4", presets::t4},
      {"a100", presets::a100},
      {"l40s", presets::l40s},
      {"h100", presets::h100},
      {"h200", presets::h200},
      {"cc120_99k", synthetic("cc12.0-99k", 120, 101376, 84)},
      {"cc80_48k", synthetic("cc8.0-48k", 80, 49152, 108)},
      {"cc90_16sm", synthetic("cc9.0-16sm", 90, 232448, 16)},
  };
  return p;
}

// Whether the profile can run `p` for dtype t: what choose_*() checks, said again as the test's
// own oracle.
template <class Policy>
bool runs_on(const Policy& p, int bytes, DType t, const HardwareCapability& hw) {
  if (bytes > hw.smem_limit()) return false;
  if (p.agent == Agent::portable) return true;
  if (p.agent == Agent::sm80 && !hw.async_copy) return false;
  return t == DType::bf16 ? hw.bf16_tensor_cores : t == DType::fp16 && hw.fp16_tensor_cores;
}

PrefillParams prefill_shape(DType t, int hd) {
  PrefillParams p;
  p.dtype = t;
  p.head_dim = hd;
  p.batch = 2;
  p.total_q = p.total_k = 2000;
  p.max_seqlen_q = p.max_seqlen_k = 1000;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  return p;
}

DecodeParams decode_shape(DType t, int hd) {
  DecodeParams p;
  p.dtype = t;
  p.head_dim = hd;
  p.num_seqs = 2;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.page_size = 16;
  p.max_seq_len = 4096;
  p.max_blocks_per_seq = 256;
  p.num_pages = 1000;
  return p;
}

struct Key {
  int profile;
  DType dtype;
  int head_dim;
};

std::vector<Key> keys() {
  std::vector<Key> k;
  for (int i = 0; i < int(profiles().size()); ++i)
    for (DType t : {DType::fp16, DType::bf16, DType::fp32})
      for (int d : kSupportedHeadDims) k.push_back({i, t, d});
  return k;
}

class SelectionAgrees : public ::testing::TestWithParam<Key> {};

// The walk's own invariants: it began at start_target(), passed over exactly the compiled targets
// between there and the chosen one (highest first, each with a reason that holds), and the
// chosen row fits.
template <class S, class RowOf, class BytesOf>
void expect_highest_fitting(const S& s, const HardwareCapability& hw, DType t, RowOf row, BytesOf bytes) {
  ASSERT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(s.start, start_target(hw));
  EXPECT_TRUE(runs_on(s.policy, bytes(s.policy), t, hw)) << describe(s);
  EXPECT_TRUE(s.policy == row(s.target));
  std::vector<int> above;
  for (int i = int(compiled_targets::size) - 1; i >= 0; --i) {
    const int c = compiled_targets::values[i];
    // An arch-specific target (sm_90a) without a row of its own is no candidate (select.hpp).
    if (target_is_arch_specific(c) && i > 0 && row(c) == row(compiled_targets::values[i - 1])) continue;
    if (c > s.target && c <= s.start) above.push_back(c);
  }
  ASSERT_EQ(s.passed_count, int(above.size())) << describe(s);
  for (int i = 0; i < s.passed_count; ++i) {
    EXPECT_EQ(s.passed[i].target, above[i]);
    EXPECT_FALSE(runs_on(row(above[i]), bytes(row(above[i])), t, hw)) << "target " << above[i] << " fits: " << describe(s);
    if (s.passed[i].why == Pass::smem) EXPECT_GT(s.passed[i].need_bytes, s.passed[i].have_bytes);
  }
}

TEST_P(SelectionAgrees, ConfigPlanAndLauncherTakeTheSameRow) {
  const Key k = GetParam();
  const HardwareCapability& hw = profiles()[k.profile].hw;
  const AttentionConfig c = select_attention_config(hw, k.dtype, k.head_dim, 4096, 2);

  // Prefill.
  PrefillPlan pp;
  ASSERT_TRUE(plan_prefill(prefill_shape(k.dtype, k.head_dim), hw, {}, &pp).ok());
  EXPECT_EQ(pp.target, c.prefill_target());
  EXPECT_TRUE(pp.policy == c.prefill);
  expect_highest_fitting(
      pp.selection, hw, k.dtype, [&](int t) { return prefill_policy(t, k.dtype, k.head_dim); },
      [&](const PrefillPolicy& p) { return prefill_smem_bytes(p, k.dtype, k.head_dim); });

  // Decode.
  DecodePlan dp;
  ASSERT_TRUE(plan_decode(decode_shape(k.dtype, k.head_dim), hw, {}, &dp).ok());
  EXPECT_EQ(dp.target, c.decode_target());
  EXPECT_TRUE(dp.policy == c.decode);
  expect_highest_fitting(
      dp.selection, hw, k.dtype, [&](int t) { return decode_policy(t, k.dtype, k.head_dim); },
      [&](const DecodePolicy& p) { return decode_smem_bytes(p, k.dtype, k.head_dim); });

  // The launchers: dispatch_target(Selector, plan.target) runs the instantiation of the lowest
  // compiled target with an equal policy — the plan's row.
  with_selectors(k.dtype, k.head_dim, [&](auto ps, auto ds) {
    EXPECT_TRUE(ps(instantiation_target(ps, pp.target)) == pp.policy);
    EXPECT_TRUE(ds(instantiation_target(ds, dp.target)) == dp.policy);
  });
}

std::string key_name(const ::testing::TestParamInfo<Key>& info) {
  return std::string(profiles()[info.param.profile].id) + "_" + std::string(dtype_name(info.param.dtype)) + "_hd" +
         std::to_string(info.param.head_dim);
}

INSTANTIATE_TEST_SUITE_P(Profiles, SelectionAgrees, ::testing::ValuesIn(keys()), key_name);

// ---- Regressions: the callers disagreed here before the one selection --------------------------

// A consumer Blackwell (cc 12.0, 99 KB): `muh config` showed the portable 32×32 row for bf16 hd 256
// while prefill() took sm_90's 209 KB row and failed at cudaFuncSetAttribute. Now every caller
// takes sm_89's 64×64 row, which fits.
TEST(SelectionRegression, ConsumerBlackwellPrefillTakesTheSm89Row) {
  const HardwareCapability hw = synthetic("cc12.0-99k", 120, 101376, 84);
  ASSERT_TRUE(compiled_target_set().contains(89) && compiled_target_set().contains(90)) << "needs targets 89, 90";
  const PrefillSelection s = choose_prefill(hw, DType::bf16, 256);
  EXPECT_EQ(s.start, 90);
  EXPECT_EQ(s.target, 89);
  EXPECT_EQ(s.policy.agent, Agent::sm80);
  EXPECT_EQ(s.policy.block_m, 64);
  EXPECT_EQ(s.policy.block_n, 64);
  EXPECT_LE(prefill_smem_bytes(s.policy, DType::bf16, 256), 101376);
  ASSERT_EQ(s.passed_count, 1);
  EXPECT_EQ(s.passed[0].target, 90);
  // sm_90's ping-pong row: (128 + 4·64)·256·2 + 8 warps·(32·64 + 128) + 2·4 mbarriers·8 = 214,080 B.
  EXPECT_EQ(s.passed[0].need_bytes, 214080);
  EXPECT_EQ(describe(s), "sm_89 row: sm_90's 214,080 B > 101,376 B");
  EXPECT_EQ(select_attention_config(hw, DType::bf16, 256, 100000, 4).prefill_target(), 89);
}

// Decode hd 128 on a 99 KB part with sm_90 code: the fallbacks jumped from sm_90's row (108,800 B)
// straight to the portable one, skipping sm_89's, which fits (73,984 B).
TEST(SelectionRegression, Decode99KbTakesTheSm89RowNotPortable) {
  const HardwareCapability hw = synthetic("cc12.0-99k", 120, 101376, 84);
  ASSERT_TRUE(compiled_target_set().contains(89) && compiled_target_set().contains(90)) << "needs targets 89, 90";
  const DecodeSelection s = choose_decode(hw, DType::bf16, 128);
  EXPECT_EQ(decode_smem_bytes(decode_policy(90, DType::bf16, 128), DType::bf16, 128), 108800);
  EXPECT_EQ(s.target, 89);
  EXPECT_EQ(s.policy.agent, Agent::sm80);
  EXPECT_EQ(decode_smem_bytes(s.policy, DType::bf16, 128), 73984);
  EXPECT_EQ(describe(s), "sm_89 row: sm_90's 108,800 B > 101,376 B");
  DecodePlan plan;
  ASSERT_TRUE(plan_decode(decode_shape(DType::bf16, 128), hw, {}, &plan).ok());
  EXPECT_EQ(plan.target, 89);
}

// A build without sm_90a keeps the sm80-class agent's sm_90 row on Hopper, and the selection says so.
TEST(SelectionSm90a, ABuildWithoutItRunsSm90sRowAndSaysSo) {
  TargetSet without{};
  for (int i = 0; i < kKnownTargets.count; ++i)
    if (kKnownTargets.values[i] != kTargetSm90a) without.values[without.count++] = kKnownTargets.values[i];
  const PrefillSelection s = choose_prefill(presets::h200, DType::bf16, 128, SelectOptions{}, without);
  EXPECT_EQ(s.target, 90);
  EXPECT_EQ(s.policy.agent, Agent::sm80);
  EXPECT_NE(describe(s).find("sm_90a, the Hopper agent, is not compiled"), std::string::npos) << describe(s);
  const PrefillSelection with = choose_prefill(presets::h200, DType::bf16, 128, SelectOptions{}, kKnownTargets);
  EXPECT_EQ(with.target, kTargetSm90a);
  EXPECT_EQ(with.policy.agent, Agent::sm90);
  EXPECT_EQ(describe(with).find("not compiled"), std::string::npos) << describe(with);
  EXPECT_EQ(target_name(with.target), "sm_90a");
  // sm_90a runs on cc 9.0 only: a newer GPU starts at sm_90, and forcing sm_90a there has no row.
  HardwareCapability b200 = presets::h200;
  b200.compute_capability = 100;
  EXPECT_EQ(start_target(b200, kKnownTargets), 90);
  EXPECT_EQ(choose_prefill(b200, DType::bf16, 128, SelectOptions{kTargetSm90a}, kKnownTargets).error,
            NoRow::forced_too_new);
  EXPECT_EQ(parse_target("90a"), kTargetSm90a);
  EXPECT_EQ(parse_target("sm_90a"), kTargetSm90a);
  EXPECT_EQ(parse_target("90"), 90);
  EXPECT_EQ(parse_target("91"), -1);
  EXPECT_EQ(parse_target("x"), -1);
}

// ---- Forcing, and selections without a row --------------------------------------------------------

TEST(SelectionForced, TakesExactlyTheForcedRowOrSaysWhyNot) {
  const PrefillSelection on_h200 = choose_prefill(presets::h200, DType::fp16, 128, SelectOptions{75});
  EXPECT_EQ(on_h200.target, 75);
  EXPECT_TRUE(on_h200.forced);
  EXPECT_EQ(describe(on_h200), "sm_75 row: forced (PlanOptions::force_target)");
  EXPECT_TRUE(on_h200.policy == prefill_policy(75, DType::fp16, 128));

  const PrefillSelection too_new = choose_prefill(presets::a100, DType::bf16, 128, SelectOptions{90});
  EXPECT_FALSE(too_new.ok());
  EXPECT_EQ(too_new.error, NoRow::forced_too_new);
  EXPECT_EQ(selection_status(too_new, "x: ", presets::a100).code(), StatusCode::unsupported);

  const PrefillSelection missing = choose_prefill(presets::h200, DType::bf16, 128, SelectOptions{88});
  EXPECT_EQ(missing.error, NoRow::forced_not_compiled);
  const Status st = selection_status(missing, "plan_prefill: ", presets::h200);
  EXPECT_EQ(st.code(), StatusCode::not_compiled);
  EXPECT_NE(st.message().find("target sm_88 is not compiled"), std::string::npos) << st.message();

  HardwareCapability small = presets::h200;
  small.max_shared_memory_per_block_optin = 101376;
  const PrefillSelection no_fit = choose_prefill(small, DType::bf16, 256, SelectOptions{90});
  EXPECT_EQ(no_fit.error, NoRow::forced_does_not_fit);
  EXPECT_NE(describe(no_fit).find("forced sm_90's"), std::string::npos) << describe(no_fit);

  EXPECT_EQ(choose_decode(presets::bi_v100, DType::fp16, 128, SelectOptions{80}).error, NoRow::forced_too_new);
  EXPECT_EQ(choose_decode(presets::h200, DType::fp16, 80).error, NoRow::bad_head_dim);
}

// A profile without cp.async passes over the sm80 agent's rows for that reason (not their size).
TEST(SelectionPasses, NoAsyncCopyPassesTheSm80Rows) {
  HardwareCapability hw = presets::a100;
  hw.async_copy = false;
  const PrefillSelection s = choose_prefill(hw, DType::fp16, 128);
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s.policy.agent, Agent::sm80);
  ASSERT_GE(s.passed_count, 1);
  EXPECT_EQ(s.passed[0].why, Pass::no_async_copy);
  EXPECT_NE(describe(s).find("needs cp.async"), std::string::npos) << describe(s);
  EXPECT_EQ(s.policy.num_stages, 1) << "the seed's rule: nothing to pipeline without async copy";
}

// Own arch: the walk starts and ends at the portable target (the seed's table).
TEST(SelectionPasses, OwnArchIsPortableOnly) {
  const DecodeSelection s = choose_decode(presets::bi_v100, DType::bf16, 256);
  EXPECT_EQ(s.start, 0);
  EXPECT_EQ(s.target, 0);
  EXPECT_EQ(s.passed_count, 0);
  EXPECT_EQ(describe(s), "portable (0) row: the profile's target (portable class)");
}

}  // namespace
}  // namespace muh
