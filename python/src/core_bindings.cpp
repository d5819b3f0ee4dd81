// core_bindings.cpp — muh._core: the C++ selector, presets and device query for Python (pybind11).
//
// No torch here. Values cross the boundary as plain dicts; muh/__init__.py wraps them in the
// seed's dataclasses (HardwareCapability, AttentionConfig), so every number a Python caller sees
// is computed by the constexpr C++ selector in include/muh/config.hpp — one source of truth.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "muh/build_config.hpp"
#include "muh/config.hpp"
#include "muh/hardware.hpp"
#include "muh/heuristics.hpp"
#include "muh/instances.hpp"
#include "muh/models.hpp"
#include "muh/shapes.hpp"

namespace py = pybind11;

namespace muh::python {
namespace {

py::dict hw_to_dict(const HardwareCapability& hw) {
  py::dict d;
  d["name"] = std::string(hw.name);
  d["warp_size"] = hw.warp_size;
  d["max_threads_per_block"] = hw.max_threads_per_block;
  d["max_shared_memory_per_block"] = hw.max_shared_memory_per_block;
  d["sm_count"] = hw.sm_count;
  d["memory_bandwidth_gbps"] = hw.memory_bandwidth_gbps;
  d["l2_cache_size_bytes"] = hw.l2_cache_size_bytes;
  d["max_shared_memory_per_block_optin"] = hw.max_shared_memory_per_block_optin;
  d["compute_capability"] = hw.compute_capability;
  d["async_copy"] = hw.async_copy;
  d["tma"] = hw.tma;
  d["wgmma"] = hw.wgmma;
  d["fp16_tensor_cores"] = hw.fp16_tensor_cores;
  d["bf16_tensor_cores"] = hw.bf16_tensor_cores;
  return d;
}

// Reads a hardware profile from any object with the seed's attribute names (muh's dataclass, or
// the seed's own HardwareCapability, which has only the first six: require_profile() insists on
// those). One of muh's own fields that is absent keeps the BI-V100 value, as the seed's defaults
// do; max_shared_memory_per_block_optin defaults to, and is never below,
// max_shared_memory_per_block (opt-in only raises the limit).
template <class T>
void read_attr(py::handle obj, const char* name, T* field, const char* owner = "hw") {
  if (!py::hasattr(obj, name)) return;
  py::object v = obj.attr(name);
  if (v.is_none()) return;
  try {
    *field = v.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(std::string(owner) + "." + name + " must be " +
                         (std::is_same_v<T, bool> ? "a bool" : "an int") + ", got " +
                         std::string(py::str(py::type::of(v).attr("__name__"))));
  }
}

// The seed's HardwareCapability fields: every profile object must have them. Without this
// check None, 42 or a dict became the BI-V100 (every attribute "absent", so every default kept),
// and a misspelt attribute (sm_cout) silently kept the BI-V100's value.
constexpr const char* kSeedHwFields[] = {"warp_size", "max_threads_per_block", "max_shared_memory_per_block",
                                         "sm_count", "memory_bandwidth_gbps", "l2_cache_size_bytes"};

std::string type_name(py::handle obj) { return py::str(py::type::of(obj).attr("__name__")); }

void require_profile(py::handle obj) {
  std::string missing;
  for (const char* f : kSeedHwFields)
    if (!py::hasattr(obj, f) || obj.attr(f).is_none()) missing += (missing.empty() ? "" : ", ") + std::string(f);
  if (missing.empty()) return;
  throw py::type_error("hw must be a muh.HardwareCapability (or an object with the seed's fields) or a "
                       "preset name, got " + type_name(obj) + " (no " + missing + ")");
}

HardwareCapability hw_from_obj(py::handle obj) {
  require_profile(obj);
  HardwareCapability hw = presets::bi_v100;
  if (py::hasattr(obj, "name")) {
    py::object n = obj.attr("name");
    if (!n.is_none()) {
      const std::string s = py::str(n);
      const std::size_t len = std::min(s.size(), sizeof hw.name - 1);
      std::memcpy(hw.name, s.data(), len);
      hw.name[len] = '\0';
    }
  }
  read_attr(obj, "warp_size", &hw.warp_size);
  read_attr(obj, "max_threads_per_block", &hw.max_threads_per_block);
  read_attr(obj, "max_shared_memory_per_block", &hw.max_shared_memory_per_block);
  hw.max_shared_memory_per_block_optin = hw.max_shared_memory_per_block;
  read_attr(obj, "max_shared_memory_per_block_optin", &hw.max_shared_memory_per_block_optin);
  hw.max_shared_memory_per_block_optin =
      std::max(hw.max_shared_memory_per_block_optin, hw.max_shared_memory_per_block);
  read_attr(obj, "sm_count", &hw.sm_count);
  read_attr(obj, "memory_bandwidth_gbps", &hw.memory_bandwidth_gbps);
  read_attr(obj, "l2_cache_size_bytes", &hw.l2_cache_size_bytes);
  read_attr(obj, "compute_capability", &hw.compute_capability);
  read_attr(obj, "async_copy", &hw.async_copy);
  read_attr(obj, "tma", &hw.tma);
  read_attr(obj, "wgmma", &hw.wgmma);
  read_attr(obj, "fp16_tensor_cores", &hw.fp16_tensor_cores);
  read_attr(obj, "bf16_tensor_cores", &hw.bf16_tensor_cores);
  return hw;
}

py::dict backends_to_dict(const Backends& b) {
  py::dict d;
  d["native_v1"] = b.native_v1;
  d["native_v2"] = b.native_v2;
  d["native_prefill"] = b.native_prefill;
  return d;
}

// None or "auto": default_backends(hw), the rule the CLI's --backends auto uses; "seed", "muh";
// or an object with the three flags (muh.Backends).
Backends backends_from_obj(py::handle obj, const HardwareCapability& hw) {
  if (obj.is_none()) return default_backends(hw);
  if (py::isinstance<py::str>(obj)) {
    const std::string s = py::str(obj);
    if (s == "auto") return default_backends(hw);
    if (s == "seed") return kSeedBackends;
    if (s == "muh") return kMuhBackends;
    throw py::value_error("unknown backends '" + s + "' (expected 'auto', 'seed', 'muh' or a muh.Backends)");
  }
  for (const char* f : {"native_v1", "native_v2", "native_prefill"})
    if (!py::hasattr(obj, f))
      throw py::type_error("backends must be None, 'auto', 'seed', 'muh' or a muh.Backends, got " +
                           type_name(obj) + " (no " + f + ")");
  Backends b;
  read_attr(obj, "native_v1", &b.native_v1, "backends");
  read_attr(obj, "native_v2", &b.native_v2, "backends");
  read_attr(obj, "native_prefill", &b.native_prefill, "backends");
  return b;
}

// The C++ AttentionConfig under the seed's field names (config.prefill.block_m → triton_block_m,
// decode.partition_size → partition_size, use_native_prefill → use_triton_prefill) plus muh's own.
py::dict config_to_dict(const AttentionConfig& c) {
  py::dict d;
  d["triton_block_m"] = c.prefill.block_m;
  d["triton_block_n"] = c.prefill.block_n;
  d["triton_num_warps"] = c.prefill.num_warps;
  d["triton_num_stages"] = c.prefill.num_stages;
  d["partition_size"] = c.decode.partition_size;
  d["v1_v2_threshold"] = c.v1_v2_threshold;
  d["use_native_v1"] = c.use_native_v1;
  d["use_native_v2"] = c.use_native_v2;
  d["use_triton_prefill"] = c.use_native_prefill;
  d["target_arch"] = c.target_arch;
  d["prefill_target"] = c.prefill_target();
  d["decode_target"] = c.decode_target();
  d["prefill_agent"] = std::string(agent_name(c.prefill.agent));
  d["decode_agent"] = std::string(agent_name(c.decode.agent));
  d["decode_num_warps"] = c.decode.num_warps;
  d["decode_tile_tokens"] = c.decode.tile_tokens;
  d["decode_num_stages"] = c.decode.num_stages;
  d["decode_ctas_per_sm"] = c.decode.ctas_per_sm;
  d["prefill_evidence"] = std::string(c.prefill.evidence ? c.prefill.evidence : "");
  d["decode_evidence"] = std::string(c.decode.evidence ? c.decode.evidence : "");
  return d;
}

DType dtype_from_name(const std::string& name) {
  const auto t = parse_dtype(name);
  if (!t) throw py::value_error("unsupported dtype '" + name + "' (supported: bf16, fp16, fp32)");
  return *t;
}

// head_dim is an int in C++; a Python value outside int's range is simply unsupported.
int clamp_head_dim(long long d) { return (d < INT_MIN || d > INT_MAX) ? 0 : int(d); }

py::dict select_config(py::handle hw_obj, const std::string& dtype, long long head_dim,
                long long max_seq_len, long long num_kv_heads, py::handle backends) {
  const HardwareCapability hw = hw_from_obj(hw_obj);
  const DType t = dtype_from_name(dtype);
  const std::string_view err = check_config_inputs(hw, clamp_head_dim(head_dim), max_seq_len, num_kv_heads);
  if (!err.empty()) throw py::value_error(std::string(err));
  // check_config_inputs bounds max_seq_len to 2^30 − 1; num_kv_heads only from below.
  if (num_kv_heads > INT_MAX) throw py::value_error("num_kv_heads too large");
  return config_to_dict(select_attention_config(hw, t, int(head_dim), int(max_seq_len),
                                                int(num_kv_heads), backends_from_obj(backends, hw)));
}

py::dict query_device(int ordinal) {
  const DeviceQuery q = query_current_device(ordinal);
  if (!q.status.ok()) {
    const std::string msg = q.status.message();
    if (q.status.code() == StatusCode::invalid_argument) throw py::value_error(msg);
    throw std::runtime_error(msg);
  }
  return hw_to_dict(q.hw);
}

}  // namespace
}  // namespace muh::python

PYBIND11_MODULE(_core, m) {
  using namespace muh;
  using namespace muh::python;
  m.doc() = "muh's C++ core: hardware presets, the attention-config selector, the device query";
  m.attr("__version__") = MUH_VERSION_STRING;
  m.attr("cuda_architectures") = MUH_CUDA_ARCHITECTURES_STRING;

  m.def("preset_names", [] {
    py::list l;
    for (const auto& p : kPresets) l.append(std::string(p.name));
    return l;
  });
  m.def("preset", [](const std::string& name) {
    const auto p = find_preset(name);
    if (!p) {
      std::string known;
      for (const auto& q : kPresets) known += (known.empty() ? "" : ", ") + std::string(q.name);
      throw py::value_error("unknown hardware profile '" + name + "' (known: " + known + ")");
    }
    return hw_to_dict(*p);
  }, py::arg("name"));
  m.def("hw_roundtrip", [](py::handle hw) { return hw_to_dict(hw_from_obj(hw)); }, py::arg("hw"),
        "The profile as the C++ selector reads it from `hw` (defaults filled in).");
  m.def("default_config", [] { return config_to_dict(AttentionConfig{}); });
  m.def("seed_backends", [] { return backends_to_dict(kSeedBackends); });
  m.def("muh_backends", [] { return backends_to_dict(kMuhBackends); });
  m.def("default_backends", [](py::handle hw) { return backends_to_dict(default_backends(hw_from_obj(hw))); },
        py::arg("hw"), "`auto`: the seed's backends on the bi-v100 profile, muh's elsewhere (heuristics.hpp).");
  m.def("supported_head_dims", [] {
    return std::vector<int>(kSupportedHeadDims.begin(), kSupportedHeadDims.end());
  });
  m.def("check_config_inputs",
        [](py::handle hw, long long head_dim, long long max_seq_len, long long num_kv_heads) {
          return std::string(check_config_inputs(hw_from_obj(hw), clamp_head_dim(head_dim),
                                                 max_seq_len, num_kv_heads));
        },
        py::arg("hw"), py::arg("head_dim"), py::arg("max_seq_len"), py::arg("num_kv_heads"));
  m.def("select_attention_config", &select_config, py::arg("hw"), py::arg("dtype"), py::arg("head_dim"),
        py::arg("max_seq_len"), py::arg("num_kv_heads"), py::arg("backends") = py::none());
  // The constexpr configs of models.hpp, as compiled (static_assert-checked there).
  m.def("qwen36_bf16", [] { return config_to_dict(QWEN36_BF16); });
  m.def("qwen36_fp16", [] { return config_to_dict(QWEN36_FP16); });
  m.def("query_device", &query_device, py::arg("ordinal") = -1);
  // What this build compiled (build_config.hpp): dispatch targets and (dtype, head_dim) instances.
  m.def("compiled_targets", [] { return std::vector<int>{MUH_TARGET_LIST}; });
  m.def("compiled_instances", [] {
    std::vector<std::pair<std::string, int>> v;
    for (const auto& e : kCompiledInstances) v.emplace_back(std::string(dtype_name(e.dtype)), e.head_dim);
    return v;
  });
}
