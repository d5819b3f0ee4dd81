// instances.hpp — what this build compiled, as values: the (dtype, head_dim) instances of
// MUH_FOR_EACH_INSTANCE (build_config.hpp). Selection never depends on it; validation, --explain,
// `muh verify` and the tests read it to know what can run. (Dispatch targets: dispatch.hpp.)
#pragma once

#include <cstddef>
#include <string>

#include "muh/build_config.hpp"
#include "muh/dtype.hpp"
#include "muh/kv_quant.hpp"

namespace muh {

struct CompiledInstance {
  DType dtype;
  int head_dim;
};

// CMake refuses empty MUH_DTYPES / MUH_HEAD_DIMS, so this list is never empty.
inline constexpr CompiledInstance kCompiledInstances[] = {
#define MUH_COMPILED_INSTANCE(t, d) CompiledInstance{DType::t, d},
    MUH_FOR_EACH_INSTANCE(MUH_COMPILED_INSTANCE)
#undef MUH_COMPILED_INSTANCE
};

// The (dtype, head_dim) instances with the general attention-variant kind (muh/variant.hpp;
// CMake's MUH_VARIANTS and MUH_VARIANT_HEAD_DIMS). The sentinel {fp32, 0} keeps the array
// non-empty; it matches no call (head_dim 0 is refused first).
inline constexpr CompiledInstance kCompiledGeneralInstances[] = {
#define MUH_COMPILED_GENERAL_INSTANCE(t, d) CompiledInstance{DType::t, d},
    MUH_FOR_EACH_GENERAL_INSTANCE(MUH_COMPILED_GENERAL_INSTANCE)
#undef MUH_COMPILED_GENERAL_INSTANCE
    CompiledInstance{DType::fp32, 0},
};

constexpr bool is_general_instance(DType t, int head_dim) {
  for (const auto& e : kCompiledGeneralInstances)
    if (e.dtype == t && e.head_dim == head_dim && head_dim > 0) return true;
  return false;
}

// The fp8 KV-cache decode instances (CMake MUH_KV_FP8 and MUH_KV_FP8_HEAD_DIMS; muh/kv_quant.hpp).
// The sentinel {same, fp32, 0} keeps the array non-empty and matches no call.
struct CompiledFp8Instance {
  KVDType kv;
  DType dtype;
  int head_dim;
};
inline constexpr CompiledFp8Instance kCompiledFp8Instances[] = {
#define MUH_COMPILED_FP8_INSTANCE(k, t, d) CompiledFp8Instance{KVDType::k, DType::t, d},
    MUH_FOR_EACH_FP8_INSTANCE(MUH_COMPILED_FP8_INSTANCE)
#undef MUH_COMPILED_FP8_INSTANCE
    CompiledFp8Instance{KVDType::same, DType::fp32, 0},
};
constexpr bool is_fp8_instance(KVDType kv, DType t, int head_dim) {
  for (const auto& e : kCompiledFp8Instances)
    if (e.kv == kv && e.dtype == t && e.head_dim == head_dim && head_dim > 0) return true;
  return false;
}

constexpr bool is_compiled_instance(DType t, int head_dim) {
  for (const auto& e : kCompiledInstances)
    if (e.dtype == t && e.head_dim == head_dim) return true;
  return false;
}

// A table of per-(dtype, head_dim) entry points of type Fn (src/decode.cu, src/prefill.cu, one
// row per MUH_FOR_EACH_INSTANCE entry), and its lookup: nullptr when the pair is not compiled.
template <class Fn>
struct InstanceEntry {
  DType dtype;
  int head_dim;
  Fn fn;
};

template <class Fn, std::size_t N>
constexpr Fn find_instance(const InstanceEntry<Fn> (&table)[N], DType t, int head_dim) {
  for (const auto& e : table)
    if (e.dtype == t && e.head_dim == head_dim) return e.fn;
  return nullptr;
}

// The same for the fp8 KV-cache instances (src/decode.cu, src/prefill.cu, one row per
// MUH_FOR_EACH_FP8_INSTANCE entry, then a sentinel {same, fp32, 0, nullptr} that keeps the table
// non-empty): nullptr when (kv, dtype, head_dim) is not compiled.
template <class Fn>
struct Fp8InstanceEntry {
  KVDType kv;
  DType dtype;
  int head_dim;
  Fn fn;
};

template <class Fn, std::size_t N>
constexpr Fn find_fp8_instance(const Fp8InstanceEntry<Fn> (&table)[N], KVDType kv, DType t, int head_dim) {
  for (const auto& e : table)
    if (e.kv == kv && e.dtype == t && e.head_dim == head_dim && e.fn != nullptr) return e.fn;
  return nullptr;
}

// "fp16/128, bf16/128, ..." for messages.
inline std::string describe_compiled_instances() {
  std::string s;
  for (const auto& e : kCompiledInstances) {
    if (!s.empty()) s += ", ";
    s += std::string(dtype_name(e.dtype)) + "/" + std::to_string(e.head_dim);
  }
  return s;
}

}  // namespace muh
