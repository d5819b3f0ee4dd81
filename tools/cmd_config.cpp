// cmd_config.cpp — `muh config`: the kernel configuration select_attention_config() gives for a
// model on a hardware profile, as a table (like the seed's __main__), as JSON (--json), and with
// the rule behind every field (--explain). Which rows run, and why, comes from the one selection
// (select.hpp) through the config's traces; this file only words them.
//
// With no arguments it prints the embedded default, the seed's case: the Qwen3.6-class model
// (head_dim 256, 4 KV heads, 100 000 tokens) in bf16 and fp16 on the BI-V100 profile under the
// seed's backend situation (native V1 and prefill, no native V2) — the seed's QWEN36_BF16 and
// QWEN36_FP16.
#include <climits>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "hf_config.hpp"
#include "hw_format.hpp"
#include "muh/build_config.hpp"
#include "muh/config.hpp"
#include "muh/dispatch.hpp"
#include "muh/instances.hpp"
#include "muh/models.hpp"
#include "muh/variant.hpp"

namespace muh::cli {
namespace {

using nlohmann::json;

// ---- Inputs, each with where it came from (for --explain) ----------------------------------------

struct Request {
  std::string model, model_source;
  std::string served_layers;  // hybrid models (hf_config.hpp): which layers muh serves
  HardwareCapability hw;
  std::string hw_source;
  bool hw_is_device = false;  // --hw current
  std::vector<DType> dtypes;
  std::string dtype_source;
  int head_dim = 0;
  std::string head_dim_source;
  int num_q_heads = 0;  // 0 when unknown (--head-dim/--kv-heads without a model do not need it)
  int kv_heads = 0;
  std::string kv_source;
  int max_seq_len = 0;
  std::string max_seq_len_source;
  Backends backends;
  std::string backends_name, backends_source;
};

struct Options {
  std::string model, model_config, hw = "bi-v100", dtype, backends = "auto";
  std::string variant;  // --variant: the attention variant a call asks for (muh/variant.hpp)
  std::string kv_dtype = "auto";  // --kv-dtype: the KV cache's element type (muh/kv_quant.hpp)
  long long head_dim = 0, kv_heads = 0, max_seq_len = 0;
  CLI::Option *o_model = nullptr, *o_model_config = nullptr, *o_dtype = nullptr, *o_head_dim = nullptr,
              *o_kv = nullptr, *o_len = nullptr, *o_hw = nullptr, *o_backends = nullptr;
  bool json = false, explain = false;
};

std::string join_names() {
  std::string s;
  for (const auto& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::string join_models() {
  std::string s;
  for (const auto& m : kModels) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

std::vector<DType> parse_dtypes(const std::string& list) {
  std::vector<DType> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto t = parse_dtype(item);
    if (!t) throw UsageError("unknown dtype '" + item + "' (expected fp16, bf16 or fp32)");
    bool dup = false;
    for (DType d : out) dup |= d == *t;
    if (!dup) out.push_back(*t);
  }
  if (out.empty()) throw UsageError("--dtype: empty list (expected fp16, bf16 or fp32)");
  return out;
}

// Integers from the command line arrive as long long so that "-5" or 10^12 give a clear message
// instead of wrapping; check_config_inputs() says what is wrong with the value.
int clamp_int(long long v) { return v < INT_MIN ? INT_MIN : v > INT_MAX ? INT_MAX : int(v); }

Request resolve(const Options& o) {
  Request r;
  // Hardware.
  if (o.hw == "current") {
    DeviceQuery q = query_current_device();
    if (!q.status.ok()) throw UsageError("--hw current: " + q.status.message() + "; pass a preset (" + join_names() + ")");
    r.hw = q.hw;
    r.hw_is_device = true;
    r.hw_source = "--hw current: the present device, read through the CUDA runtime";
  } else if (const auto p = find_preset(o.hw)) {
    r.hw = *p;
    r.hw_source = o.o_hw->count() ? "--hw " + o.hw + " (preset, hardware.hpp)"
                                  : "default: the seed's BI-V100 profile (preset bi-v100, hardware.hpp)";
  } else {
    throw UsageError("unknown hardware profile '" + o.hw + "' (known: " + join_names() + ", current)");
  }

  // Model: a known model, a config.json, or the embedded default (the seed's case).
  long long head_dim = 0, kv = 0, len = 0;
  std::string from;
  std::optional<DType> model_dtype;
  if (o.o_model_config->count()) {
    const HfModelShape m = read_hf_config(o.model_config);
    r.model = m.name;
    r.model_source = "--model-config " + o.model_config + (m.nested ? " (text_config)" : "");
    r.served_layers = m.served_layers;
    from = o.model_config + (m.nested ? " text_config" : "");
    head_dim = m.head_dim.value_or(0);
    r.head_dim_source = from + ": " + m.head_dim_rule;
    r.num_q_heads = clamp_int(m.num_attention_heads);
    kv = m.num_kv_heads;
    r.kv_source = from + ": " + m.kv_heads_rule;
    if (m.max_position_embeddings) {
      len = *m.max_position_embeddings;
      r.max_seq_len_source = from + ": max_position_embeddings";
    } else if (!o.o_len->count()) {
      throw UsageError(o.model_config + ": incomplete config: no max_position_embeddings (or pass --max-seq-len)");
    }
    if (m.dtype) {
      model_dtype = m.dtype;
      r.dtype_source = from + ": " + m.dtype_key;
    } else if (!o.o_dtype->count()) {
      throw UsageError(o.model_config + ": incomplete config: no torch_dtype (or pass --dtype)");
    }
  } else {
    const ModelShape* m = o.o_model->count() ? find_model(o.model) : &kQwen36;
    if (!m) throw UsageError("unknown model '" + o.model + "' (known: " + join_models() + "; or --model-config path/to/config.json)");
    r.model = m->name;
    r.model_source = o.o_model->count() ? "--model " + o.model + " (models.hpp kModels)"
                                        : "embedded default: the seed's case, Qwen3.6-class (models.hpp kQwen36)";
    from = "model " + std::string(m->name) + " (models.hpp)";
    head_dim = m->head_dim;
    r.num_q_heads = m->num_attention_heads;
    kv = m->num_kv_heads;
    len = m->max_position_embeddings;
    r.head_dim_source = r.kv_source = r.max_seq_len_source = from;
    if (o.o_model->count()) {
      model_dtype = m->dtype;
      r.dtype_source = from;
    }
  }

  // Flags override the model's values.
  if (o.o_head_dim->count()) { head_dim = o.head_dim; r.head_dim_source = "--head-dim"; }
  if (o.o_kv->count()) { kv = o.kv_heads; r.kv_source = "--kv-heads"; }
  if (o.o_len->count()) { len = o.max_seq_len; r.max_seq_len_source = "--max-seq-len"; }
  if (o.o_dtype->count()) {
    r.dtypes = parse_dtypes(o.dtype);
    r.dtype_source = "--dtype";
  } else if (model_dtype) {
    r.dtypes = {*model_dtype};
  } else {
    r.dtypes = {DType::bf16, DType::fp16};
    r.dtype_source = "embedded default: the seed's two precomputed configs (QWEN36_BF16, QWEN36_FP16)";
  }

  // Validate: one line naming the value and where it came from.
  const int hd = clamp_int(head_dim);
  const std::string_view bad = check_config_inputs(r.hw, hd, len, kv);
  if (!bad.empty()) {
    std::string where;
    if (bad.find("head_dim") != std::string_view::npos) where = "head_dim " + std::to_string(head_dim) + " from " + r.head_dim_source;
    else if (bad.find("max_seq_len") != std::string_view::npos) where = "max_seq_len " + std::to_string(len) + " from " + r.max_seq_len_source;
    else if (bad.find("num_kv_heads") != std::string_view::npos) where = "num_kv_heads " + std::to_string(kv) + " from " + r.kv_source;
    else where = "hardware " + std::string(r.hw.name);
    throw UsageError(std::string(bad) + ": got " + where);
  }
  r.head_dim = hd;
  r.kv_heads = int(kv);
  r.max_seq_len = int(len);
  if (r.num_q_heads > 0 && r.num_q_heads % r.kv_heads != 0)
    throw UsageError("num_kv_heads " + std::to_string(r.kv_heads) + " (" + r.kv_source + ") does not divide the " +
                     std::to_string(r.num_q_heads) + " query heads of " + r.model);

  // Backends.
  const bool seed_hw = default_backends(r.hw) == kSeedBackends;  // the one rule (heuristics.hpp)
  if (o.backends == "auto") {
    r.backends = default_backends(r.hw);
    r.backends_name = seed_hw ? "seed" : "muh";
    r.backends_source = seed_hw ? "--backends auto: on the bi-v100 profile, the seed's deployment (native V1 and "
                                  "prefill, no usable native V2)"
                                : "--backends auto: off the bi-v100 profile, muh's own kernels (V1, V2, prefill)";
  } else if (o.backends == "seed") {
    r.backends = kSeedBackends;
    r.backends_name = "seed";
    r.backends_source = "--backends seed: native V1 and prefill, no native V2 (the seed's deployment)";
  } else if (o.backends == "muh") {
    r.backends = kMuhBackends;
    r.backends_name = "muh";
    r.backends_source = "--backends muh: muh's V1, V2 and prefill kernels";
  } else {
    throw UsageError("unknown --backends '" + o.backends + "' (expected auto, seed or muh)");
  }
  return r;
}

// ---- Which compiled instantiation runs a config -------------------------------------------------

std::string compiled_target_list() {
  return detail::describe_targets(compiled_targets::values, compiled_targets::size);
}

struct Instantiation {
  bool compiled = false;
  std::string family, getter, file, reason;  // reason: why it is not compiled
  int run_target = -1, inst_target = -1;
  std::vector<int> sharing;  // compiled targets whose policy collapses onto inst_target
};

// The instantiation that runs the selection's row: dispatch collapses the row's target onto the
// lowest compiled target with the same policy (dispatch.hpp), as the launchers do.
template <class Selector, class Sel>
Instantiation find_instantiation(const char* family, Selector sel, const Sel& chosen) {
  Instantiation in;
  in.family = family;
  const std::string key = std::string(dtype_name(Selector::dtype)) + ", " + std::to_string(Selector::head_dim);
  in.file = std::string("instances/") + family + "_" + std::string(dtype_name(Selector::dtype)) + "_hd" +
            std::to_string(Selector::head_dim) + ".cu";
  in.run_target = chosen.target;
  if (in.run_target < 0) {
    in.reason = describe(chosen);
    return in;
  }
  in.inst_target = instantiation_target(sel, in.run_target);
  for (std::size_t i = 0; i < compiled_targets::size; ++i) {
    const int t = compiled_targets::values[i];
    if (instantiation_target(sel, t) == in.inst_target) in.sharing.push_back(t);
  }
  const std::string sel_name = std::string(family == std::string("prefill") ? "PrefillSelector" : "DecodeSelector");
  in.getter = "policy_getter<" + sel_name + "<" + key + ">, " + std::to_string(in.inst_target) + ">";
  if (!is_compiled_instance(Selector::dtype, Selector::head_dim)) {
    in.reason = "(" + key + ") not compiled in this build (MUH_DTYPES × MUH_HEAD_DIMS)";
    return in;
  }
  in.compiled = true;
  return in;
}

// ---- Rules: why each field has its value ---------------------------------------------------------

// The portable agent's footprint with its formula, (block_m + 2·block_n)·head_dim·elem (the seed
// rule's trace); other agents' footprints are prefill_smem_bytes() itself (tuning/policy.hpp
// documents each agent's layout), so this file never restates them.
std::string prefill_footprint(const PrefillPolicy& p, DType t, int hd) {
  const int e = dtype_size(t), bytes = prefill_smem_bytes(p, t, hd);
  std::ostringstream s;
  if (p.agent == Agent::portable && (p.block_m + 2 * p.block_n) * hd * e == bytes)
    s << "(" << p.block_m << " + 2·" << p.block_n << ")·" << hd << "·" << e << " = " << bytes << " B";
  else
    s << "prefill_smem_bytes() = " << bytes << " B";
  return s.str();
}

// The seed's own tile for dtype t (its loop counts K+V only, then fp32 halves again).
int seed_block(DType t, int hd, int smem) {
  int bn = 64;
  while (bn * hd * dtype_size(t) * 2 > smem && bn > 16) bn /= 2;
  return t == DType::fp32 ? bn / 2 : bn;
}

struct Rules {
  std::vector<std::pair<std::string, std::vector<std::string>>> fields;
  void add(const std::string& field, std::vector<std::string> lines) { fields.emplace_back(field, std::move(lines)); }
};

// The rows' lines: the selection's trace (select.hpp: the rule that fired), the row and its
// evidence, and for the portable agent the seed's tile rule re-traced step by step.
std::vector<std::string> prefill_row_lines(const Request& r, DType t, const PrefillSelection& sel) {
  const int hd = r.head_dim;
  const int cap48 = tuning::portable::kSmemCap;
  const PrefillPolicy& p0 = sel.policy;
  std::vector<std::string> l{describe(sel)};
  if (!sel.ok()) return l;
  l.push_back("prefill_policy(" + std::to_string(sel.target) + ", " + std::string(dtype_name(t)) + ", " +
              std::to_string(hd) + ") (tuning/selectors.hpp): \"" + p0.evidence + "\"");
  if (p0.agent != Agent::portable) {
    l.push_back("footprint " + prefill_footprint(p0, t, hd) + " ≤ the row's cap " + std::to_string(p0.smem_cap_bytes) +
                " B and the profile's " + std::to_string(r.hw.smem_limit()) + " B");
    return l;
  }
  PrefillPolicy p = p0;
  p.block_m = p.block_n = 64;
  while (true) {
    const bool fits = prefill_smem_bytes(p, t, hd) <= cap48;
    const bool last = fits || p.block_n <= 16;
    l.push_back("block_n " + std::to_string(p.block_n) + ": Q+K+V tiles " + prefill_footprint(p, t, hd) +
                (fits ? " ≤ " : " > ") + std::to_string(cap48) + " B" +
                (last ? " → " + std::to_string(p.block_m) + "×" + std::to_string(p.block_n) : " → halve"));
    if (last) break;
    p.block_n /= 2;
    p.block_m = p.block_n;
  }
  l.push_back("block_m = block_n (seed: square tiles simplify the causal mask)");
  const int sb = seed_block(t, hd, cap48);
  if (t == DType::fp32)
    l.push_back("fp32 rule: the real footprint is fitted once, nothing halved afterwards (the seed counted the "
                "4-byte element twice and would give " + std::to_string(sb) + "×" + std::to_string(sb) + ")");
  else
    l.push_back("the seed's rule (K+V only: block_n·head_dim·elem·2 ≤ 48 KB) gives the same " + std::to_string(sb) +
                "×" + std::to_string(sb));
  return l;
}

std::vector<std::string> decode_row_lines(const Request& r, DType t, const DecodeSelection& sel) {
  std::vector<std::string> l{describe(sel)};
  if (!sel.ok()) return l;
  const DecodePolicy& d = sel.policy;
  l.push_back("decode_policy(" + std::to_string(sel.target) + ", " + std::string(dtype_name(t)) + ", " +
              std::to_string(r.head_dim) + ") (tuning/selectors.hpp): \"" + d.evidence + "\"");
  l.push_back(std::to_string(d.tile_tokens) + " tokens, " + std::to_string(d.num_warps) +
              " warps: footprint decode_smem_bytes() = " + std::to_string(decode_smem_bytes(d, t, r.head_dim)) +
              " B (tuning/policy.hpp) within the cap " + std::to_string(d.smem_cap_bytes) + " B at " +
              std::to_string(d.ctas_per_sm) + " CTA" + (d.ctas_per_sm > 1 ? "s" : "") + "/SM");
  if (has_decode_wide_policy(sel.target, t, r.head_dim)) {
    const DecodePolicy w = decode_wide_policy(sel.target, t, r.head_dim);
    l.push_back("wide row (tuning_sm90.hpp's kDecodeWide): " + std::to_string(w.num_warps) + " warps x " +
                std::to_string(w.num_stages) + " stage, " + std::to_string(decode_smem_bytes(w, t, r.head_dim)) +
                " B — the plan takes it for a 16-bit cache by TMA with <= 8 q heads a KV head where each CTA streams "
                ">= " + std::to_string(kDecodeWideMinTokens) +
                " tokens faster than the row's can (few SMs: a green partition): \"" + w.evidence + "\"");
  }
  return l;
}

// The V1/V2 threshold: the numbers heuristics.hpp computed (AttentionConfig::threshold).
std::vector<std::string> threshold_lines(const Request& r, const AttentionConfig& c) {
  const ThresholdTrace& x = c.threshold;
  std::vector<std::string> l;
  const int never = r.max_seq_len + 1;
  switch (x.rule) {
    case ThresholdRule::no_native_v2:
      l.push_back("seed rule: the backends have no native V2 → V1 forced, threshold = max_seq_len + 1 = " +
                  std::to_string(never));
      break;
    case ThresholdRule::no_native_v1:
      l.push_back("the backends have no native V1 → always V2: threshold = 0");
      break;
    case ThresholdRule::kv_heads_fill:
    case ThresholdRule::above_max_seq_len:
    case ThresholdRule::formula: {
      std::ostringstream s;
      s << "hardware rule (heuristics.hpp): slots = sm_count·ctas_per_sm = " << r.hw.sm_count << "·"
        << c.decode.ctas_per_sm << " = " << x.slots;
      l.push_back(s.str());
      if (x.rule == ThresholdRule::kv_heads_fill) {
        l.push_back("kv_heads " + std::to_string(r.kv_heads) +
                    " ≥ slots: V1 alone fills every slot, splitting never pays → threshold = max_seq_len + 1 = " +
                    std::to_string(never));
        break;
      }
      std::ostringstream f;
      f << "L* = P + overhead·bw_sm / (B·(1 − kv_heads/slots)) = " << x.partition << " + "
        << kSplitOverheadSeconds * 1e6 << " µs · " << std::setprecision(4) << x.bw_sm / 1e9 << " GB/s / ("
        << x.bytes_per_token << " B · (1 − " << r.kv_heads << "/" << x.slots << ")) = " << std::fixed
        << std::setprecision(1) << x.l_star << "  (B: K+V bytes per token; bw_sm = bandwidth / sm_count)";
      l.push_back(f.str());
      const long long th = static_cast<long long>(x.l_star) + 1;
      if (x.rule == ThresholdRule::above_max_seq_len)
        l.push_back("floor(L*) + 1 = " + std::to_string(th) + " > max_seq_len " + std::to_string(r.max_seq_len) +
                    " → threshold = max_seq_len + 1 = " + std::to_string(never) + " (V2 never pays here)");
      else
        l.push_back("threshold = floor(L*) + 1 = " + std::to_string(th) + ": V2 (split-KV) for seq_len ≥ " +
                    std::to_string(th) + ", V1 below");
      break;
    }
  }
  l.push_back("v1_v2_threshold() = " + std::to_string(c.v1_v2_threshold));
  return l;
}

Rules explain_config(const Request& r, DType t, const AttentionConfig& c, const Instantiation& ip,
                     const Instantiation& id) {
  Rules rules;
  rules.add("target", {target_name(c.target_arch) + ": the highest compiled target the profile runs (compute capability " +
                           std::to_string(r.hw.compute_capability) +
                           (r.hw.is_own_arch() ? ", own arch → the portable class" : "") + "; compiled: " +
                           compiled_target_list() + "); each family's row walks down from it (select.hpp)"});
  rules.add("prefill.row", prefill_row_lines(r, t, c.prefill_selection));
  rules.add("prefill.num_warps",
            {std::to_string(c.prefill.num_warps) + " from the row" +
             (c.prefill.agent == Agent::portable ? std::string(" (seed: 4 warps; 8 warps for 32 rows is wasteful)")
                                                 : std::string())});
  rules.add("prefill.num_stages",
            {!r.hw.async_copy ? std::to_string(c.prefill.num_stages) + ": " + std::string(r.hw.name) +
                                    " has no async copy, nothing to pipeline (seed rule: the rows that run there have 1)"
                              : std::to_string(c.prefill.num_stages) + ": the row's pipeline depth (the hardware has cp.async" +
                                    (r.hw.tma ? ", TMA" : "") + ")"});
  rules.add("decode.row", decode_row_lines(r, t, c.decode_selection));
  rules.add("decode.num_stages",
            {!r.hw.async_copy ? std::to_string(c.decode.num_stages) + ": no async copy (seed rule)"
                              : std::to_string(c.decode.num_stages) + ": the row's pipeline depth (" +
                                    (c.decode.tma ? "TMA boxes, where the call allows; else cp.async" : "cp.async") + ")"});
  rules.add("decode.partition_size",
            {std::to_string(c.decode.partition_size) +
             (c.decode.partition_size == 512 ? ": the seed's partition_size = 512"
                                             : ": the row's (V2 partitions are multiples of it; the seed's was 512)")});
  rules.add("v1_v2_threshold", threshold_lines(r, c));
  rules.add("backends", {"use_native_v1 " + std::string(c.use_native_v1 ? "true" : "false") + ", use_native_v2 " +
                             (c.use_native_v2 ? "true" : "false") + ", use_native_prefill " +
                             (c.use_native_prefill ? "true" : "false") + ": " + r.backends_source});

  // Instantiations.
  for (const Instantiation* in : {&ip, &id}) {
    std::vector<std::string> l;
    if (in->run_target < 0) {
      l.push_back(in->reason);
    } else {
      std::string share;
      for (int s : in->sharing) share += (share.empty() ? "" : ", ") + target_name(s);
      l.push_back(in->getter + " in " + in->file + " (row of " + target_name(in->run_target) +
                  "; compiled targets sharing this instantiation: " + share + ")");
      if (!in->compiled) l.push_back(in->reason);
    }
    rules.add("instantiation." + in->family, l);
  }
  return rules;
}

// ---- Output --------------------------------------------------------------------------------------

std::string pad(const std::string& s, std::size_t w) {
  // Width in code points, so that "×" and "≤" count once.
  std::size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n >= w ? s + " " : s + std::string(w - n, ' ');
}

struct Row {
  DType dtype;
  AttentionConfig cfg;
  Instantiation prefill_inst, decode_inst;
  // The general variant kind's instantiations of this (dtype, head_dim): distinct prefill
  // policies (each over contiguous K/V and, with MUH_PAGED_PREFILL, the paged layouts its agent
  // reads) and distinct portable decode policies (each for both layouts) over the compiled targets.
  int general_prefill = 0, general_decode = 0;
};

std::string backends_text(const Backends& b) {
  std::string s = std::string("native V1 ") + (b.native_v1 ? "yes" : "no") + ", native V2 " +
                  (b.native_v2 ? "yes" : "no") + ", native prefill " + (b.native_prefill ? "yes" : "no");
  return s;
}

std::string threshold_text(const AttentionConfig& c, int max_seq_len) {
  if (c.v1_v2_threshold > max_seq_len) return std::to_string(c.v1_v2_threshold) + (c.use_native_v2 ? " (V1 always)" : " (V1 forced)");
  return std::to_string(c.v1_v2_threshold) + " (V2 from there)";
}

std::string inst_text(const Instantiation& in) {
  if (in.run_target < 0 || !in.compiled) return "not compiled in this build";
  std::string share;
  for (int s : in.sharing) share += (share.empty() ? "" : ",") + std::to_string(s);
  return "target " + std::to_string(in.inst_target) + " (serves " + share + ")";
}

// Drops the padding at line ends.
std::string trim_lines(const std::string& s) {
  std::string out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) {
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

void print_table(const Request& r, const std::vector<Row>& rows) {
  std::ostringstream o;
  o << "=== muh config: " << r.model << " on " << r.hw.name << " ===\n\n";
  o << "  hardware  " << describe_hw(r.hw) << "\n";
  o << "  model     " << r.model << ": head_dim " << r.head_dim;
  if (r.num_q_heads) o << ", " << r.num_q_heads << " query heads";
  o << ", " << r.kv_heads << " KV heads, max_seq_len " << r.max_seq_len << "\n";
  if (!r.served_layers.empty()) o << "  layers    " << r.served_layers << "\n";
  o << "  backends  " << r.backends_name << " (" << backends_text(r.backends) << ")\n\n";

  const std::size_t w0 = 20, w = 33;
  o << "  " << pad("", w0);
  for (const Row& x : rows) o << pad(std::string(dtype_name(x.dtype)) + " (head_dim " + std::to_string(r.head_dim) + ")", w);
  o << "\n";
  auto line = [&](const std::string& name, auto&& f) {
    o << "  " << pad(name, w0);
    for (const Row& x : rows) o << pad(f(x), w);
    o << "\n";
  };
  line("dispatch target", [](const Row& x) { return target_name(x.cfg.target_arch); });
  line("prefill row", [](const Row& x) { return target_name(x.cfg.prefill_target()); });
  line("decode row", [](const Row& x) { return target_name(x.cfg.decode_target()); });
  line("prefill agent", [](const Row& x) { return std::string(agent_name(x.cfg.prefill.agent)); });
  line("prefill block", [](const Row& x) {
    return std::to_string(x.cfg.prefill.block_m) + "×" + std::to_string(x.cfg.prefill.block_n) + " (BLOCK_M×BLOCK_N)";
  });
  line("prefill warps", [](const Row& x) { return std::to_string(x.cfg.prefill.num_warps); });
  line("prefill stages", [](const Row& x) {
    return std::to_string(x.cfg.prefill.num_stages) + (x.cfg.prefill.ping_pong ? " (ping-pong halves)" : "") +
           (x.cfg.prefill.overlap ? " (QK/PV overlap)" : "");
  });
  line("prefill SMEM", [&](const Row& x) {
    return format_bytes(prefill_smem_bytes(x.cfg.prefill, x.dtype, r.head_dim)) + " (Q+K+V) of " +
           format_bytes(x.cfg.prefill.smem_cap_bytes);
  });
  line("decode agent", [](const Row& x) { return std::string(agent_name(x.cfg.decode.agent)); });
  line("decode partition", [](const Row& x) { return std::to_string(x.cfg.decode.partition_size); });
  line("decode tile", [](const Row& x) {
    return std::to_string(x.cfg.decode.tile_tokens) + " tokens × " + std::to_string(x.cfg.decode.num_stages) +
           " stage" + (x.cfg.decode.num_stages > 1 ? "s" : "") + ", " + std::to_string(x.cfg.decode.num_warps) + " warps" +
           (x.cfg.decode.tma ? ", TMA" : "");
  });
  line("decode SMEM", [&](const Row& x) {
    return format_bytes(decode_smem_bytes(x.cfg.decode, x.dtype, r.head_dim)) + " of " +
           format_bytes(x.cfg.decode.smem_cap_bytes);
  });
  line("V1/V2 threshold", [&](const Row& x) { return threshold_text(x.cfg, r.max_seq_len); });
  line("prefill instance", [](const Row& x) { return inst_text(x.prefill_inst); });
  line("decode instance", [](const Row& x) { return inst_text(x.decode_inst); });
  o << "\n";
  for (const Row& x : rows) {
    const PrefillPolicy& p = x.cfg.prefill;
    const int e = dtype_size(x.dtype), kv_bytes = p.block_n * r.head_dim * e * 2;
    const int cap = x.cfg.prefill.smem_cap_bytes;
    o << "  " << dtype_name(x.dtype) << " SMEM: " << p.block_n << "×" << r.head_dim << "×" << e << "×2 = " << kv_bytes
      << " bytes (" << format_bytes(kv_bytes) << " K+V ≤ " << format_bytes(cap) << "); "
      << (p.agent == Agent::portable ? "with the Q tile " : "the kernel's footprint ")
      << prefill_footprint(p, x.dtype, r.head_dim) << " (" << format_bytes(prefill_smem_bytes(p, x.dtype, r.head_dim))
      << ") ≤ " << format_bytes(cap) << "\n";
    const bool forced = !x.cfg.use_native_v2;
    o << "  " << dtype_name(x.dtype) << " V1 forced: " << (forced ? "yes" : "no")
      << (forced ? " (no native V2 in these backends: threshold = max_seq_len + 1)"
                 : " (V1 below the threshold, V2 split-KV from it)")
      << "\n";
  }
  std::cout << trim_lines(o.str());
}

void print_explain(const Request& r, const std::vector<Row>& rows, const std::vector<Rules>& rules) {
  std::ostringstream o;
  o << "\n=== explain ===\n  inputs\n";
  auto in = [&](const std::string& k, const std::string& v, const std::string& src) {
    o << "    " << pad(k, 13) << pad(v, 12) << src << "\n";
  };
  std::string dts;
  for (const Row& x : rows) dts += (dts.empty() ? "" : ",") + std::string(dtype_name(x.dtype));
  in("model", r.model, r.model_source);
  in("hardware", r.hw.name, r.hw_source);
  in("dtype", dts, r.dtype_source);
  in("head_dim", std::to_string(r.head_dim), r.head_dim_source);
  in("kv_heads", std::to_string(r.kv_heads), r.kv_source);
  in("max_seq_len", std::to_string(r.max_seq_len), r.max_seq_len_source);
  in("backends", r.backends_name, r.backends_source);
  o << "  build: targets " << compiled_target_list() << "; SASS " << MUH_CUDA_ARCHITECTURES_STRING << "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    o << "\n  " << dtype_name(rows[i].dtype) << "\n";
    for (const auto& [field, lines] : rules[i].fields) {
      bool first = true;
      for (const auto& l : lines) {
        o << "    " << pad(first ? field : "", 24) << l << "\n";
        first = false;
      }
    }
  }
  std::cout << trim_lines(o.str());
}

json policy_json(const PrefillPolicy& p, DType t, int hd) {
  return {{"agent", agent_name(p.agent)},   {"block_m", p.block_m},
          {"block_n", p.block_n},           {"num_warps", p.num_warps},
          {"num_stages", p.num_stages},     {"smem_bytes", prefill_smem_bytes(p, t, hd)},
          {"smem_kv_bytes", p.block_n * hd * dtype_size(t) * 2},
          {"smem_cap_bytes", p.smem_cap_bytes}, {"ping_pong", p.ping_pong}, {"overlap", p.overlap}, {"evidence", p.evidence}};
}

json policy_json(const DecodePolicy& p, DType t, int hd) {
  return {{"agent", agent_name(p.agent)}, {"num_warps", p.num_warps},
          {"tile_tokens", p.tile_tokens}, {"num_stages", p.num_stages},
          {"partition_size", p.partition_size}, {"ctas_per_sm", p.ctas_per_sm},
          {"smem_bytes", decode_smem_bytes(p, t, hd)}, {"smem_cap_bytes", p.smem_cap_bytes},
          {"tma", p.tma},   {"evidence", p.evidence}};
}

json inst_json(const Instantiation& in) {
  json j = {{"compiled", in.compiled}};
  if (in.run_target >= 0) {
    j["dispatch_target"] = in.run_target;
    j["instantiation_target"] = in.inst_target;
    j["getter"] = in.getter;
    j["file"] = in.file;
    j["sharing_targets"] = in.sharing;
  }
  if (!in.compiled) j["reason"] = in.reason;
  return j;
}

void print_json(const Request& r, const std::vector<Row>& rows, const std::vector<Rules>* rules) {
  json j;
  j["model"] = {{"name", r.model},
                {"head_dim", r.head_dim},
                {"num_attention_heads", r.num_q_heads ? json(r.num_q_heads) : json(nullptr)},
                {"num_kv_heads", r.kv_heads},
                {"max_seq_len", r.max_seq_len}};
  if (!r.served_layers.empty()) j["model"]["served_layers"] = r.served_layers;
  j["hardware"] = hw_to_json(r.hw);
  j["backends"] = {{"name", r.backends_name},
                   {"native_v1", r.backends.native_v1},
                   {"native_v2", r.backends.native_v2},
                   {"native_prefill", r.backends.native_prefill}};
  j["configs"] = json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& x = rows[i];
    json c = {{"dtype", dtype_name(x.dtype)},
              {"target_arch", x.cfg.target_arch},
              {"prefill_target", x.cfg.prefill_target()},
              {"decode_target", x.cfg.decode_target()},
              {"prefill_rule", describe(x.cfg.prefill_selection)},
              {"decode_rule", describe(x.cfg.decode_selection)},
              {"prefill", policy_json(x.cfg.prefill, x.dtype, r.head_dim)},
              {"decode", policy_json(x.cfg.decode, x.dtype, r.head_dim)},
              {"v1_v2_threshold", x.cfg.v1_v2_threshold},
              {"v1_forced", !x.cfg.use_native_v2},
              {"use_native_v1", x.cfg.use_native_v1},
              {"use_native_v2", x.cfg.use_native_v2},
              {"use_native_prefill", x.cfg.use_native_prefill},
              {"instantiation", {{"prefill", inst_json(x.prefill_inst)}, {"decode", inst_json(x.decode_inst)}}}};
    if (rules) {
      json e = json::object();
      for (const auto& [field, lines] : (*rules)[i].fields) e[field] = lines;
      c["explain"] = e;
    }
    j["configs"].push_back(c);
  }
  if (rules) {
    j["inputs"] = {{"model", r.model_source},       {"hardware", r.hw_source},
                   {"dtype", r.dtype_source},       {"head_dim", r.head_dim_source},
                   {"kv_heads", r.kv_source},       {"max_seq_len", r.max_seq_len_source},
                   {"backends", r.backends_source}};
  }
  std::cout << j.dump(2) << "\n";
}

}  // namespace

// ---- The attention variant of a call (--variant; muh/variant.hpp) --------------------------------
// "window=L" or "window=L:R", "softcap=X", "sinks", "alibi", comma-separated; "" = none. (Also
// `muh bench decode --variant`.)
Variant parse_variant(const std::string& list) {
  Variant v;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq), val = eq == std::string::npos ? "" : item.substr(eq + 1);
    try {
      if (key == "window" && !val.empty()) {
        const auto colon = val.find(':');
        v.window_left = std::stoi(val.substr(0, colon));
        v.window_right = colon == std::string::npos ? -1 : std::stoi(val.substr(colon + 1));
        if (v.window_left < -1 || v.window_right < -1) throw UsageError("--variant: window sides must be -1 or >= 0");
      } else if (key == "softcap" && !val.empty()) {
        v.softcap = std::stof(val);
        if (!(v.softcap >= 0.f) || !std::isfinite(v.softcap)) throw UsageError("--variant: softcap must be >= 0");
      } else if (key == "sinks" && val.empty()) {
        v.use_sinks = true;
      } else if (key == "alibi" && val.empty()) {
        v.use_alibi = true;
      } else {
        throw UsageError("--variant: unknown item '" + item + "' (window=L[:R], softcap=X, sinks, alibi)");
      }
    } catch (const std::logic_error&) {  // std::stoi / stof
      throw UsageError("--variant: '" + item + "' is not a number where one is expected");
    }
  }
  return v;
}

namespace {

// Which instantiation kind a call with variant v takes, and where it lives (muh/variant.hpp).
std::vector<std::string> variant_lines(const Variant& v, DType t, int hd, const Row& x) {
  const std::string key = std::string(dtype_name(t)) + "_hd" + std::to_string(hd);
  const std::string kinds = std::string("compiled kinds: plain") + (MUH_VARIANT_GENERAL ? ", general" : "") +
                            " (MUH_VARIANTS)";
  if (variant_kind(v) == VariantKind::plain)
    return {"plain (variant: none; --variant names one): every hook compiled out, the kernels above", kinds};
  std::vector<std::string> l = {"general (variant: " + describe_variant(v) +
                                "): every hook on, its parameters read at run time"};
  if (!MUH_VARIANT_GENERAL) {
    l.push_back("not compiled in this build: the call is not_compiled (rebuild with MUH_VARIANTS=\"plain;general\")");
    l.push_back(kinds);
    return l;
  }
  if (!is_general_instance(t, hd)) {
    l.push_back("not compiled in this build for (" + std::string(dtype_name(t)) + ", " + std::to_string(hd) +
                "): the call is not_compiled (rebuild with MUH_DTYPES / MUH_HEAD_DIMS / MUH_VARIANT_HEAD_DIMS including it)");
    l.push_back(kinds);
    return l;
  }
  l.push_back("prefill: the same row, instances/prefill_general_" + key + ".cu (contiguous K/V)" +
              (MUH_PAGED_PREFILL ? " and instances/prefill_paged_general_" + key + ".cu (paged)" : std::string()) +
              "; every q tile whole (no tail split); " + std::to_string(x.general_prefill) +
              " prefill policies instantiated for the general kind");
  l.push_back("decode: the same row (both decode agents have the hooks), instances/decode_general_" + key + ".cu; " +
              std::to_string(x.general_decode) + " decode policies instantiated for the general kind");
  l.push_back(kinds);
  return l;
}

// Which decode and paged-prefill kernels a call over a cache of element type kv takes on hw
// (muh/kv_quant.hpp).
std::vector<std::string> kv_cache_lines(KVDType kv, DType t, int hd, const Row& x, const HardwareCapability& hw) {
  if (!is_fp8(kv)) return {"auto: the cache holds q's dtype (--kv-dtype fp8_e4m3 / fp8_e5m2 names an fp8 cache)"};
  const std::string name(kv_dtype_name(kv));
  const std::string file = name.substr(4) + "_" + std::string(dtype_name(t)) + "_hd" + std::to_string(hd) + ".cu";
  std::vector<std::string> l = {name + ": 1-byte codes, k_scale / v_scale per tensor; paged decode and paged prefill"};
  if (t == DType::fp32) {
    l.push_back("refused: an fp8 cache is read with fp16 or bf16 q (invalid_argument)");
    return l;
  }
  const DecodeSelection& d = x.cfg.decode_selection;
  if (!d.ok()) {
    l.push_back("decode: no row (" + describe(d) + ")");
  } else if (!is_fp8_instance(kv, t, hd)) {
    l.push_back("decode: not compiled in this build (rebuild with MUH_KV_FP8 / MUH_KV_FP8_HEAD_DIMS including it)");
  } else if (d.policy.agent == Agent::portable) {
    l.push_back("decode: the same row, instances/decode_fp8_" + file +
                ": the portable agent widens each code to fp32 in registers as it uses it (8-byte V loads); "
                "the plan counts the codes' bytes");
  } else {
    l.push_back("decode: the same row, instances/decode_fp8_" + file + ": the codes widened to " +
                (t == DType::bf16 ? "fp16 (bf16 q runs fp16 MMAs, its queries scaled by a power of two)"
                                  : std::string("fp16")) +
                " — in registers from their own ldmatrix fragments with ≤ 8 query heads per KV head (vLLM "
                "pages; NHD pages at head_dim 128 and 256), in shared memory otherwise; copies by " +
                (d.policy.tma ? "TMA boxes where the layout allows" : "cp.async") +
                "; the fragments' kernels take " + format_bytes(decode_sm80_codes_smem_bytes(d.policy, hd)) +
                " of shared memory, " + std::to_string(decode_sm80_codes_ctas_per_sm(d.policy, hd)) +
                " CTA(s)/SM; the plan counts the codes' bytes and the CTAs' widening time (more partitions "
                "than the 16-bit cache's where the SMs allow: size the workspace for the cache type)");
  }
  // Paged prefill: the walk for an fp8 cache (prefill_agent_reads_kv: the sm80 and portable agents), NHD pages.
  SelectOptions so{-1, KVSource::paged_nhd};
  so.kv_dtype = kv;
  const PrefillSelection p = choose_prefill(hw, t, hd, so);
  if (!p.ok()) {
    l.push_back("paged prefill: no row (" + describe(p) + "): unsupported");
  } else if (!MUH_PAGED_PREFILL || !is_fp8_instance(kv, t, hd)) {
    l.push_back("paged prefill: " + target_name(p.target) +
                "'s row, not compiled in this build (MUH_PAGED_PREFILL, MUH_KV_FP8 / MUH_KV_FP8_HEAD_DIMS)");
  } else {
    const std::string how = p.policy.agent == Agent::portable
                                ? ": each load of 8 codes widened to q's type on its way into shared memory"
                                : ": the codes land by cp.async in the upper half of each row of the 16-bit ring and "
                                  "are widened there";
    l.push_back("paged prefill: " + target_name(p.target) + "'s row (" + describe(p) + "), instances/prefill_paged_fp8_" +
                file + how + "; an attention variant runs the same file's general kind (" +
                (MUH_VARIANT_GENERAL && is_general_instance(t, hd)
                     ? std::string("compiled")
                     : std::string("not compiled in this build: MUH_VARIANTS / MUH_VARIANT_HEAD_DIMS")) +
                ")");
  }
  return l;
}

void run(const Options& o) {
  const Variant variant = parse_variant(o.variant);  // (a bad --variant is a usage error, explain or not)
  const auto kv = parse_kv_dtype(o.kv_dtype);
  if (!kv) throw UsageError("--kv-dtype: unknown cache type '" + o.kv_dtype + "' (auto, fp8, fp8_e4m3, fp8_e5m2)");
  const Request r = resolve(o);
  std::vector<Row> rows;
  std::vector<Rules> rules;
  for (DType t : r.dtypes) {
    Row x{t, select_attention_config(r.hw, t, r.head_dim, r.max_seq_len, r.kv_heads, r.backends), {}, {}};
    with_selectors(t, r.head_dim, [&](auto ps, auto ds) {
      x.prefill_inst = find_instantiation("prefill", ps, x.cfg.prefill_selection);
      x.decode_inst = find_instantiation("decode", ds, x.cfg.decode_selection);
      x.general_prefill = static_cast<int>(distinct_policy_count(ps, compiled_targets{}));
      x.general_decode = static_cast<int>(distinct_policy_count(ds, compiled_targets{}));
    });
    rows.push_back(x);
    if (o.explain) {
      rules.push_back(explain_config(r, t, x.cfg, x.prefill_inst, x.decode_inst));
      rules.back().add("instantiation.variant", variant_lines(variant, t, r.head_dim, x));
      rules.back().add("instantiation.kv_cache", kv_cache_lines(*kv, t, r.head_dim, x, r.hw));
    }
  }
  if (o.json) {
    print_json(r, rows, o.explain ? &rules : nullptr);
    return;
  }
  print_table(r, rows);
  if (o.explain) print_explain(r, rows, rules);
}

}  // namespace

void add_config_command(CLI::App& app) {
  auto* o = new Options;  // lives as long as the program (CLI11 binds to it)
  CLI::App* cmd = app.add_subcommand(
      "config",
      "Print the kernel configuration muh selects for a model on a hardware profile.\n"
      "Without arguments: the seed's case — Qwen3.6-class (head_dim 256, 4 KV heads, 100000 tokens) in bf16 and\n"
      "fp16 on the bi-v100 profile with the seed's backends (no native V2, so V1 is forced).");
  o->o_model = cmd->add_option("--model", o->model, "A known model: " + join_models());
  o->o_model_config = cmd->add_option("--model-config", o->model_config,
                                      "A Hugging Face config.json (head_dim or hidden_size/num_attention_heads, "
                                      "num_key_value_heads, max_position_embeddings, torch_dtype; text_config of "
                                      "multimodal configs is read)");
  o->o_model->excludes(o->o_model_config);
  o->o_model_config->excludes(o->o_model);
  o->o_hw = cmd->add_option("--hw", o->hw, "Hardware profile: " + join_names() +
                                               ", or 'current' (the present GPU)  [default: bi-v100]");
  o->o_dtype = cmd->add_option("--dtype", o->dtype,
                               "fp16, bf16 or fp32, or a comma list (default: the model's torch_dtype; "
                               "bf16,fp16 for the embedded default)");
  o->o_head_dim = cmd->add_option("--head-dim", o->head_dim, "Override the head dim (64, 96, 128, 256)");
  o->o_kv = cmd->add_option("--kv-heads", o->kv_heads, "Override the number of KV heads");
  o->o_len = cmd->add_option("--max-seq-len", o->max_seq_len, "Override the longest sequence (tokens)");
  o->o_backends = cmd->add_option(
      "--backends", o->backends,
      "Which native backends exist: 'seed' (V1 + prefill, no native V2: the seed's deployment, V1 forced), "
      "'muh' (muh's V1, V2 and prefill: the V1/V2 threshold comes from the hardware), or 'auto' = seed on "
      "the bi-v100 profile (the seed's deployment) and muh everywhere else  [default: auto]");
  cmd->add_option("--variant", o->variant,
                  "With --explain: the attention variant of a call, e.g. window=4096,softcap=30,sinks,alibi "
                  "(window=L[:R] in FlashAttention's window_size convention): which instantiation kind it takes");
  cmd->add_option("--kv-dtype", o->kv_dtype,
                  "With --explain: the KV cache's element type (auto, fp8 = fp8_e4m3, fp8_e5m2): which decode "
                  "kernels a call over it takes");
  cmd->add_flag("--json", o->json, "Machine-readable output (the same values)");
  cmd->add_flag("--explain", o->explain,
                "Also print the inputs, the rule behind every field and the compiled instantiation that runs");
  cmd->callback([o] { run(*o); });
}

}  // namespace muh::cli
