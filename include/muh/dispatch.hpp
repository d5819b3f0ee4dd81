// dispatch.hpp — from a runtime target (the present arch, or a profile forced for emulation) to
// the kernel instantiations compiled into the binary. Modelled on CCCL's
// cub/detail/cc_dispatch.cuh (dispatch_compute_cap, policy_getter, lowest_cc_resolver):
//
//   * a selector is a stateless type with `constexpr Policy operator()(int arch) const`;
//   * dispatch hands the callable a *getter type* (C++17 cannot pass a policy struct as a template
//     argument), so kernels read their policy at compile time: `constexpr auto p = Getter{}();`
//   * targets whose policies compare equal share one getter type — the one of the lowest such
//     target — so they share one instantiation (the collapse);
//   * a target that is not in the compiled list gives a clear Status, never a launch.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "muh/build_config.hpp"
#include "muh/status.hpp"

namespace muh {

template <int... Targets>
struct target_list {
  static constexpr std::size_t size = sizeof...(Targets);
  static constexpr int values[sizeof...(Targets) > 0 ? sizeof...(Targets) : 1] = {Targets...};
};

// The dispatch targets compiled into this build (0 = portable/own arch, then compute
// capabilities), from CMake's MUH_TARGETS.
using compiled_targets = target_list<MUH_TARGET_LIST>;

// A nullary functor type returning Selector's policy for Target, usable in constant expressions.
template <class Selector, int Target>
struct policy_getter : Selector {
  static constexpr int target = Target;
  constexpr auto operator()() const { return Selector::operator()(Target); }
};

namespace detail {

// For each target of the list, the lowest target of the list with an equal policy
// (CCCL's lowest_cc_resolver). Targets must be listed in ascending order.
template <class Selector, int... Ts>
struct lowest_target_resolver {
  static constexpr int targets[] = {Ts...};
  static constexpr std::size_t n = sizeof...(Ts);

  static constexpr int lowest_with_same_policy(int target) {
    std::size_t i = 0;
    while (i < n && targets[i] != target) ++i;
    if (i == n) return target;
    const auto policy = Selector{}(target);
    std::size_t lo = i;
    for (std::size_t j = 0; j < i; ++j) {
      if (Selector{}(targets[j]) == policy) {
        lo = j;
        break;
      }
    }
    return targets[lo];
  }

  // Number of distinct policies over the list = number of instantiations dispatch creates.
  static constexpr std::size_t distinct_policies() {
    std::size_t count = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (lowest_with_same_policy(targets[i]) == targets[i]) ++count;
    return count;
  }
};

template <int... Ts>
constexpr bool ascending() {
  const int v[] = {Ts..., 0x7fffffff};
  for (std::size_t i = 0; i + 1 < sizeof...(Ts); ++i)
    if (v[i] >= v[i + 1]) return false;
  return true;
}

std::string describe_targets(const int* targets, std::size_t n);

}  // namespace detail

// Calls f(policy_getter<Selector, T'>{}) where T' is the lowest compiled target whose policy
// equals Selector{}(target). Returns f's Status, or not_compiled when target is not in the list.
template <class Selector, class F, int... Ts>
Status dispatch_target(Selector, int target, F&& f, target_list<Ts...>) {
  static_assert(detail::ascending<Ts...>(), "dispatch targets must be listed in ascending order");
  using resolver = detail::lowest_target_resolver<Selector, Ts...>;
  Status s{StatusCode::not_compiled,
           "target " + std::to_string(target) + " is not compiled into this build (compiled: " +
               detail::describe_targets(resolver::targets, resolver::n) +
               "); rebuild with MUH_TARGETS including it"};
  (void)((target == Ts
              ? ((void)(s = f(policy_getter<Selector, resolver::lowest_with_same_policy(Ts)>{})), true)
              : false) ||
         ...);
  return s;
}

template <class Selector, class F>
Status dispatch_target(Selector sel, int target, F&& f) {
  return dispatch_target(sel, target, std::forward<F>(f), compiled_targets{});
}

// Runtime view of the same resolution (for --explain and plans): which compiled target's
// instantiation serves `target`, or -1 when it is not compiled.
template <class Selector, int... Ts>
constexpr int instantiation_target(Selector, int target, target_list<Ts...>) {
  using resolver = detail::lowest_target_resolver<Selector, Ts...>;
  for (int t : resolver::targets)
    if (t == target) return resolver::lowest_with_same_policy(target);
  return -1;
}

template <class Selector>
constexpr int instantiation_target(Selector sel, int target) {
  return instantiation_target(sel, target, compiled_targets{});
}

template <class Selector, int... Ts>
constexpr std::size_t distinct_policy_count(Selector, target_list<Ts...>) {
  return detail::lowest_target_resolver<Selector, Ts...>::distinct_policies();
}

// Whether `target` is one of this build's dispatch targets (MUH_TARGETS).
constexpr bool is_compiled_target(int target) {
  for (std::size_t i = 0; i < compiled_targets::size; ++i)
    if (compiled_targets::values[i] == target) return true;
  return false;
}

}  // namespace muh
