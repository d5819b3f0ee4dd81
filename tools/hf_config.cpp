// hf_config.cpp — the attention shape of a model from a Hugging Face config.json.
//
// Keys read (transformers' PretrainedConfig names): head_dim, hidden_size, num_attention_heads,
// num_key_value_heads, max_position_embeddings, torch_dtype (renamed "dtype" in transformers
// 4.56). Multimodal configs (Qwen3.5 / Qwen3-VL, Llava, Gemma 3, ...) keep the language model's
// values under "text_config"; a key found there wins over the top level, and the top level fills
// what text_config omits (torch_dtype often sits only at the top).
#include "hf_config.hpp"

#include <fstream>
#include <sstream>

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
  HfModelShape m;
  m.nested = r.nested();

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
