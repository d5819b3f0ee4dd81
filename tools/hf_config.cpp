// hf_config.cpp — the attention shape of a model from a Hugging Face config.json.
//
// Keys read (transformers' PretrainedConfig names): head_dim, hidden_size, num_attention_heads,
// num_key_value_heads, max_position_embeddings, torch_dtype (renamed "dtype" in transformers
// 4.56). Multimodal configs (Qwen3.5 / Qwen3-VL, Llava, Gemma 3, ...) keep the language model's
// values under "text_config"; a key found there wins over the top level, and the top level fills
// what text_config omits (torch_dtype often sits only at the top).
#include "hf_config.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"

namespace muh::cli {
namespace {

using nlohmann::json;

class Reader {
 public:
  Reader(const std::string& path, const json& top) : path_(path), top_(top) {
    auto tc = top.find("text_config");
    if (tc != top.end() && tc->is_object()) text_ = &*tc;
  }
  bool nested() const { return text_ != nullptr; }

  // The value of `key` (text_config first), or nullptr when absent or null.
  const json* find(const char* key) const {
    for (const json* obj : {text_, &top_}) {
      if (!obj) continue;
      auto it = obj->find(key);
      if (it != obj->end() && !it->is_null()) return &*it;
    }
    return nullptr;
  }

  std::optional<long long> integer(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    long long x = 0;
    if (v->is_number_integer()) {
      x = v->get<long long>();
    } else if (v->is_number_float() && v->get<double>() == double((long long)v->get<double>())) {
      x = (long long)v->get<double>();
    } else {
      fail(std::string(key) + " must be an integer (got " + v->dump() + ")");
    }
    if (x < 1) fail(std::string(key) + " must be >= 1 (got " + std::to_string(x) + ")");
    return x;
  }

  [[noreturn]] void fail(const std::string& what) const { throw UsageError(path_ + ": " + what); }

 private:
  const std::string& path_;
  const json& top_;
  const json* text_ = nullptr;
};

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

bool is_true(const json* v) { return v && v->is_boolean() && v->get<bool>(); }
bool is_string(const json* v, const char* s) { return v && v->is_string() && v->get<std::string>() == s; }
bool nonzero_number(const json* v) { return v && v->is_number() && v->get<double>() != 0.0; }

// ---- What muh's kernels cannot compute ----------------------------------------------------------
// Each entry names the config.json field that says the model needs it. Checked before the shape,
// so that BLOOM (ALiBi, and n_head instead of num_attention_heads) is refused for what it is.

std::optional<std::string> mla(const Reader& r) {
  const json* rank = r.find("kv_lora_rank");
  if (!rank) return std::nullopt;
  std::string s = "kv_lora_rank " + rank->dump() + " (multi-head latent attention, MLA";
  const json* nope = r.find("qk_nope_head_dim");
  const json* rope = r.find("qk_rope_head_dim");
  if (nope && rope && nope->is_number_integer() && rope->is_number_integer())
    s += ": q/k head dim qk_nope_head_dim + qk_rope_head_dim = " + nope->dump() + " + " + rope->dump() +
         " = " + std::to_string(nope->get<long long>() + rope->get<long long>());
  return s + ")";
}

// A window at least as long as the context never masks a key (Phi-3-mini-128k: 262144 over
// 131072 positions), and Qwen2-style configs switch it off with use_sliding_window false.
std::optional<std::string> sliding_window(const Reader& r) {
  const json* w = r.find("sliding_window");
  const json* use = r.find("use_sliding_window");
  if (!w || (use && use->is_boolean() && !use->get<bool>())) return std::nullopt;
  if (w->is_boolean() && !w->get<bool>()) return std::nullopt;
  if (w->is_number()) {
    if (w->get<double>() <= 0) return std::nullopt;
    const json* max_pos = r.find("max_position_embeddings");
    if (max_pos && max_pos->is_number() && w->get<double>() >= max_pos->get<double>()) return std::nullopt;
  }
  return "sliding_window " + w->dump() + (is_true(use) ? " with use_sliding_window true" : "") +
         " (sliding-window local attention)";
}

std::optional<std::string> softcap(const Reader& r) {
  // final_logit_softcapping caps the LM head's logits, not attention's: muh is not concerned.
  const json* c = r.find("attn_logit_softcapping");
  if (!nonzero_number(c)) return std::nullopt;
  return "attn_logit_softcapping " + c->dump() + " (attention logit soft-capping)";
}

// gpt-oss's sinks are weights (a learned logit per head in every softmax), not a config key:
// the model type says it.
std::optional<std::string> sinks(const Reader& r) {
  if (!is_string(r.find("model_type"), "gpt_oss")) return std::nullopt;
  return std::string("model_type gpt_oss (attention sinks: a learned logit per head joins every softmax)");
}

// ALiBi: BLOOM always (no key says so), MPT's attn_config.alibi, Falcon-style "alibi",
// JAIS-style position_embedding_type "alibi".
std::optional<std::string> alibi(const Reader& r) {
  if (is_true(r.find("alibi"))) return std::string("alibi true (ALiBi position biases)");
  if (const json* a = r.find("attn_config"); a && a->is_object()) {
    const auto it = a->find("alibi");
    if (it != a->end() && is_true(&*it)) return std::string("attn_config.alibi true (ALiBi position biases)");
  }
  if (is_string(r.find("position_embedding_type"), "alibi"))
    return std::string("position_embedding_type alibi (ALiBi position biases)");
  if (is_string(r.find("model_type"), "bloom")) return std::string("model_type bloom (ALiBi position biases)");
  return std::nullopt;
}

void refuse_unsupported(const Reader& r) {
  std::vector<std::string> why;
  for (auto check : {mla, alibi, sinks, softcap, sliding_window})
    if (auto w = check(r)) why.push_back(*w);
  if (!why.empty()) r.fail("muh's kernels cannot compute this model's attention: " + join(why, "; "));
}

// ---- Hybrid models: which layers are attention layers muh serves --------------------------------
// Qwen3-Next / Qwen3.5 / 3.6: layer_types ("linear_attention" Gated DeltaNet, "full_attention"),
// from full_attention_interval (layer i is full attention when (i + 1) % interval == 0). Empty
// for a model whose every layer is full attention.
std::string served_layers(const Reader& r) {
  const json* types = r.find("layer_types");
  const json* interval = r.find("full_attention_interval");
  const json* n_json = r.find("num_hidden_layers");
  const long long n = n_json && n_json->is_number_integer() ? n_json->get<long long>() : 0;
  long long listed = 0, full = 0;
  std::string others, rule;
  if (types && types->is_array() && (n == 0 || static_cast<long long>(types->size()) == n || !interval)) {
    std::vector<std::string> kinds;
    for (const json& t : *types) {
      const std::string k = t.is_string() ? t.get<std::string>() : t.dump();
      ++listed;
      if (k == "full_attention") { ++full; continue; }
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    }
    others = join(kinds, ", ");
    rule = "layer_types";
  } else if (interval && interval->is_number_integer() && interval->get<long long>() >= 1 && n > 0) {
    const long long every = interval->get<long long>();
    listed = n;
    full = n / every;
    others = "linear_attention";
    const long long m = every % 100;
    const char* th = (m >= 11 && m <= 13) ? "th" : m % 10 == 1 ? "st" : m % 10 == 2 ? "nd" : m % 10 == 3 ? "rd" : "th";
    rule = "every " + std::to_string(every) + th + " layer: full_attention_interval " + std::to_string(every);
  }
  if (listed == 0 || full == listed) return {};
  if (full == 0) r.fail("no full-attention layer (" + rule + " lists only " + others + "): nothing for muh's kernels");
  const std::string of = (n > 0 && listed != n) ? " of the " + std::to_string(listed) + " layer_types listed"
                                                : " of " + std::to_string(listed) + " layers";
  return "muh serves the " + std::to_string(full) + " full_attention layers" + of + " (" + rule + "); the other " +
         std::to_string(listed - full) + " are " + others + ", not attention muh computes";
}

std::string file_stem(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

HfModelShape read_hf_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(path + ": cannot open model config");
  std::stringstream buf;
  buf << in.rdbuf();
  json top;
  try {
    top = json::parse(buf.str());
  } catch (const json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 3, column 1: ..." (one line)
    throw UsageError(path + ": malformed JSON: " + e.what());
  }
  if (!top.is_object()) throw UsageError(path + ": not a config.json (top level is not a JSON object)");

  const Reader r(path, top);
  refuse_unsupported(r);
  HfModelShape m;
  m.nested = r.nested();
  m.served_layers = served_layers(r);

  if (const json* n = r.find("_name_or_path"); n && n->is_string() && !n->get<std::string>().empty())
    m.name = n->get<std::string>();
  else if (const json* a = r.find("architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string())
    m.name = (*a)[0].get<std::string>();
  else
    m.name = file_stem(path);

  const auto heads = r.integer("num_attention_heads");
  if (!heads) r.fail("incomplete config: no num_attention_heads");
  m.num_attention_heads = *heads;

  if (const auto hd = r.integer("head_dim")) {
    m.head_dim = *hd;
    m.head_dim_rule = "head_dim";
  } else if (const auto hidden = r.integer("hidden_size")) {
    if (*hidden % *heads != 0)
      r.fail("hidden_size " + std::to_string(*hidden) + " is not a multiple of num_attention_heads " +
             std::to_string(*heads) + " (and there is no head_dim)");
    m.head_dim = *hidden / *heads;
    m.head_dim_rule = "hidden_size / num_attention_heads = " + std::to_string(*hidden) + " / " +
                      std::to_string(*heads);
  } else {
    r.fail("incomplete config: neither head_dim nor hidden_size");
  }

  if (const auto kv = r.integer("num_key_value_heads")) {
    m.num_kv_heads = *kv;
    m.kv_heads_rule = "num_key_value_heads";
  } else {
    m.num_kv_heads = *heads;  // transformers' default: multi-head attention, no GQA
    m.kv_heads_rule = "num_attention_heads (no num_key_value_heads: MHA)";
  }
  if (m.num_attention_heads % m.num_kv_heads != 0)
    r.fail("num_attention_heads " + std::to_string(m.num_attention_heads) +
           " is not a multiple of num_key_value_heads " + std::to_string(m.num_kv_heads));

  m.max_position_embeddings = r.integer("max_position_embeddings");

  for (const char* key : {"torch_dtype", "dtype"}) {
    const json* d = r.find(key);
    if (!d) continue;
    if (!d->is_string()) r.fail(std::string(key) + " must be a string (got " + d->dump() + ")");
    const auto t = parse_dtype(d->get<std::string>());
    if (!t)
      r.fail("unsupported " + std::string(key) + " '" + d->get<std::string>() +
             "' (muh runs float16, bfloat16, float32)");
    m.dtype = t;
    m.dtype_key = key;
    break;
  }
  return m;
}

}  // namespace muh::cli
