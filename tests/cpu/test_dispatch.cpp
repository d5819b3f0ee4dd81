// Compile-time dispatch (dispatch.hpp): targets with equal policies share ONE instantiation,
// distinct policies get one each, a target that is not compiled gives a clear Status.
//
// The instantiations are counted, not inferred: every getter type the dispatch lambda is
// instantiated with registers itself (a template static member runs once per distinct type at
// program start), so the count is what the compiler actually generated.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "muh/config.hpp"
#include "muh/dispatch.hpp"
#include "muh/select.hpp"

namespace muh {
namespace {

// ---- Toy selectors ------------------------------------------------------------------------------

struct ToyPolicy {
  int tile = 0;
  int smem_cap = 0;  // like the real policies' cap: not part of ==
  friend constexpr bool operator==(const ToyPolicy& a, const ToyPolicy& b) { return a.tile == b.tile; }
};

// Every target the same policy (caps differ, as sm_80 and sm_90 rows do).
struct SameSelector {
  using policy_type = ToyPolicy;
  constexpr ToyPolicy operator()(int arch) const { return {64, arch * 1000}; }
};
// portable and sm_75 share one policy; sm_80 and sm_90 another.
struct TwoWaySelector {
  using policy_type = ToyPolicy;
  constexpr ToyPolicy operator()(int arch) const { return {arch >= 80 ? 128 : 64, 0}; }
};
// Every target its own policy.
struct DistinctSelector {
  using policy_type = ToyPolicy;
  constexpr ToyPolicy operator()(int arch) const { return {arch + 1, 0}; }
};

using Targets = target_list<0, 75, 80, 90>;

// ---- Counting instantiations ----------------------------------------------------------------------

template <class Selector>
std::set<std::type_index>& instantiated() {
  static std::set<std::type_index> s;
  return s;
}

template <class Getter>
struct SelectorOf;
template <class S, int T>
struct SelectorOf<policy_getter<S, T>> {
  using type = S;
};

template <class Getter>
struct Registrar {
  static const bool done;
};
template <class Getter>
const bool Registrar<Getter>::done =
    (instantiated<typename SelectorOf<Getter>::type>().insert(std::type_index(typeid(Getter))), true);

// The "kernel launch": reads the policy at compile time, as the kernels do, and records which
// getter ran. Instantiating it for a getter type registers that type.
struct Launch {
  std::vector<int>* ran_targets;
  std::vector<int>* tiles;
  template <class Getter>
  Status operator()(Getter) const {
    (void)Registrar<Getter>::done;
    constexpr auto policy = Getter{}();  // usable in constant expressions
    static_assert(policy.tile > 0, "");
    ran_targets->push_back(Getter::target);
    tiles->push_back(policy.tile);
    return Status::Ok();
  }
};

template <class Selector>
std::set<int> dispatch_every_target(std::vector<int>& tiles) {
  std::vector<int> ran;
  for (int t : {0, 75, 80, 90}) {
    const Status s = dispatch_target(Selector{}, t, Launch{&ran, &tiles}, Targets{});
    EXPECT_TRUE(s.ok()) << s.message();
  }
  return std::set<int>(ran.begin(), ran.end());
}

TEST(Dispatch, EqualPoliciesShareOneInstantiation) {
  std::vector<int> tiles;
  const std::set<int> ran = dispatch_every_target<SameSelector>(tiles);
  EXPECT_EQ(instantiated<SameSelector>().size(), 1u);  // one getter type was compiled
  EXPECT_EQ(ran, std::set<int>{0});                    // the lowest target's getter serves all four
  EXPECT_EQ(tiles, (std::vector<int>{64, 64, 64, 64}));
  EXPECT_EQ(distinct_policy_count(SameSelector{}, Targets{}), 1u);
}

TEST(Dispatch, TwoDistinctPoliciesGiveTwoInstantiations) {
  std::vector<int> tiles;
  const std::set<int> ran = dispatch_every_target<TwoWaySelector>(tiles);
  EXPECT_EQ(instantiated<TwoWaySelector>().size(), 2u);
  EXPECT_EQ(ran, (std::set<int>{0, 80}));
  EXPECT_EQ(tiles, (std::vector<int>{64, 64, 128, 128}));
  EXPECT_EQ(distinct_policy_count(TwoWaySelector{}, Targets{}), 2u);
}

TEST(Dispatch, AllDistinctPoliciesGiveOneInstantiationEach) {
  std::vector<int> tiles;
  const std::set<int> ran = dispatch_every_target<DistinctSelector>(tiles);
  EXPECT_EQ(instantiated<DistinctSelector>().size(), 4u);
  EXPECT_EQ(ran, (std::set<int>{0, 75, 80, 90}));
  EXPECT_EQ(distinct_policy_count(DistinctSelector{}, Targets{}), 4u);
}

TEST(Dispatch, InstantiationTargetIsTheLowestWithAnEqualPolicy) {
  static_assert(instantiation_target(TwoWaySelector{}, 75, Targets{}) == 0);
  static_assert(instantiation_target(TwoWaySelector{}, 90, Targets{}) == 80);
  static_assert(instantiation_target(SameSelector{}, 90, Targets{}) == 0);
  static_assert(instantiation_target(DistinctSelector{}, 90, Targets{}) == 90);
  EXPECT_EQ(instantiation_target(TwoWaySelector{}, 86, Targets{}), -1);  // not in the list
}

TEST(Dispatch, TargetNotCompiledIsAClearStatusNotACrash) {
  std::vector<int> ran, tiles;
  const Status s = dispatch_target(TwoWaySelector{}, 86, Launch{&ran, &tiles}, Targets{});
  EXPECT_EQ(s.code(), StatusCode::not_compiled);
  EXPECT_NE(s.message().find("target 86 is not compiled"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("portable, sm_75, sm_80, sm_90"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("MUH_TARGETS"), std::string::npos) << s.message();
  EXPECT_TRUE(ran.empty());  // nothing launched
}

TEST(Dispatch, NegativeTargetIsNotCompiled) {
  std::vector<int> ran, tiles;
  const Status s = dispatch_target(SameSelector{}, -1, Launch{&ran, &tiles}, Targets{});
  EXPECT_EQ(s.code(), StatusCode::not_compiled);
  EXPECT_TRUE(ran.empty());
}

TEST(Dispatch, LauncherStatusIsReturned) {
  const Status s = dispatch_target(SameSelector{}, 80, [](auto) { return unsupported("from the launcher"); }, Targets{});
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_EQ(s.message(), "from the launcher");
}

// ---- The real selectors ------------------------------------------------------------------------------

using AllTargets = target_list<0, 75, 80, 86, 89, 90>;

TEST(DispatchRealTables, Fp32RunsOnlyThePortableInstantiation) {
  static_assert(distinct_policy_count(PrefillSelector<DType::fp32, 128>{}, AllTargets{}) == 1);
  static_assert(distinct_policy_count(DecodeSelector<DType::fp32, 256>{}, AllTargets{}) == 1);
  EXPECT_EQ(instantiation_target(PrefillSelector<DType::fp32, 64>{}, 90, AllTargets{}), 0);
}

TEST(DispatchRealTables, Sm75Fp16PrefillHasItsOwnInstantiationTheRestCollapseOntoPortable) {
  // tuning_sm75.hpp: fp16 prefill runs the sm75 agent (its own getter); bf16/fp32 prefill and
  // every decode return the portable rows and share the portable instantiation.
  for (int t : {0, 80, 86, 89, 90}) EXPECT_NE(prefill_policy(t, DType::fp16, 128), prefill_policy(75, DType::fp16, 128));
  EXPECT_EQ(instantiation_target(PrefillSelector<DType::fp16, 128>{}, 75, AllTargets{}), 75);
  EXPECT_EQ(instantiation_target(PrefillSelector<DType::fp16, 256>{}, 75, AllTargets{}), 75);
  EXPECT_EQ(instantiation_target(PrefillSelector<DType::bf16, 128>{}, 75, AllTargets{}), 0);
  EXPECT_EQ(instantiation_target(PrefillSelector<DType::fp32, 64>{}, 75, AllTargets{}), 0);
  EXPECT_EQ(instantiation_target(DecodeSelector<DType::fp16, 128>{}, 75, AllTargets{}), 0);
  EXPECT_EQ(instantiation_target(DecodeSelector<DType::bf16, 256>{}, 75, AllTargets{}), 0);
}

TEST(DispatchRealTables, FewerInstantiationsThanTargets) {
  // The point of the collapse: 6 targets, fewer getters (portable/sm75 share; so do cap-only
  // differences such as sm_80 vs sm_90).
  EXPECT_LT(distinct_policy_count(PrefillSelector<DType::bf16, 128>{}, AllTargets{}), AllTargets::size);
  EXPECT_LT(distinct_policy_count(DecodeSelector<DType::bf16, 128>{}, AllTargets{}), AllTargets::size);
}

// ---- start_target over this build's MUH_TARGETS: where the selection's walk begins -------------

HardwareCapability profile_with_cc(int cc) {
  HardwareCapability hw = presets::h200;
  hw.compute_capability = cc;
  return with_arch_flags(hw);
}

class StartTarget : public ::testing::TestWithParam<int> {};

TEST_P(StartTarget, HighestCompiledTargetNotAboveTheDevice) {
  const int cc = GetParam();
  const int start = start_target(profile_with_cc(cc));
  int want = 0;  // portable when no NVIDIA target runs on cc
  for (std::size_t i = 0; i < compiled_targets::size; ++i) {
    const int t = compiled_targets::values[i];
    // sm_90a (targets.hpp) runs on cc 9.0 only; every other target on its arch and newer.
    const bool runs = t == kTargetSm90a ? cc == 90 : t <= cc;
    if (runs && t > want) want = t;
  }
  EXPECT_EQ(start, want);
  EXPECT_TRUE(is_compiled_target(start)) << start;
}

INSTANTIATE_TEST_SUITE_P(DeviceArchs, StartTarget, ::testing::Values(60, 70, 75, 80, 86, 87, 89, 90, 100, 120),
                         [](const auto& info) { return "cc" + std::to_string(info.param); });

TEST(StartTarget, EveryBuildCarriesPortableAndAnOwnArchStartsThere) {
  EXPECT_EQ(compiled_targets::values[0], 0);  // CMake insists on the portable target
  const int top = compiled_targets::values[compiled_targets::size - 1];
  EXPECT_EQ(start_target(profile_with_cc(top == 0 ? 75 : target_arch(top))), top == 0 ? 0 : top);
  // A newer device starts at the newest target that is not arch-specific (sm_90a is Hopper's only).
  const int portable_top = top == kTargetSm90a ? compiled_targets::values[compiled_targets::size - 2] : top;
  EXPECT_EQ(start_target(profile_with_cc(target_arch(top) + 10)), portable_top);
  EXPECT_EQ(start_target(presets::bi_v100), 0);
}

}  // namespace
}  // namespace muh
