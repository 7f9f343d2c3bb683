// Hugging Face config.json (+ generation_config.json) -> ModelConfig, and ModelConfig::validate().
// Accepts both the transformers 4 spelling (rope_theta, rope_scaling, torch_dtype) and the
// transformers 5 one (rope_parameters, dtype).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "loader/model_config.h"

namespace minivllm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MINIVLLM_CHECK(in) << "cannot open " << path;
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    MINIVLLM_FAIL() << path << ": malformed JSON: " << e.what();
  }
}

// Reads config keys with messages that name the key and the file.
class ConfigReader {
 public:
  ConfigReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  bool has(const json& obj, const char* key) const { return obj.contains(key) && !obj.at(key).is_null(); }
  bool has(const char* key) const { return has(j_, key); }

  int64_t get_int(const json& obj, const char* key) const {
    MINIVLLM_CHECK(has(obj, key)) << path_ << ": missing key " << key;
    const json& v = obj.at(key);
    if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
      return static_cast<int64_t>(v.get<double>());  // 8192.0 is written by some exporters
    }
    MINIVLLM_CHECK(v.is_number_integer()) << path_ << ": key " << key << " must be an integer, got " << v.dump();
    return v.get<int64_t>();
  }
  int64_t get_int(const char* key) const { return get_int(j_, key); }
  int64_t get_int(const char* key, int64_t fallback) const { return has(key) ? get_int(key) : fallback; }

  double get_double(const json& obj, const char* key) const {
    MINIVLLM_CHECK(has(obj, key)) << path_ << ": missing key " << key;
    const json& v = obj.at(key);
    MINIVLLM_CHECK(v.is_number()) << path_ << ": key " << key << " must be a number, got " << v.dump();
    return v.get<double>();
  }
  double get_double(const char* key) const { return get_double(j_, key); }
  double get_double(const char* key, double fallback) const { return has(key) ? get_double(key) : fallback; }

  bool get_bool(const json& obj, const char* key, bool fallback) const {
    if (!has(obj, key)) return fallback;
    const json& v = obj.at(key);
    MINIVLLM_CHECK(v.is_boolean()) << path_ << ": key " << key << " must be true or false, got " << v.dump();
    return v.get<bool>();
  }
  bool get_bool(const char* key, bool fallback) const { return get_bool(j_, key, fallback); }

  std::vector<double> get_doubles(const json& obj, const char* key) const {
    MINIVLLM_CHECK(has(obj, key)) << path_ << ": missing key " << key;
    const json& v = obj.at(key);
    MINIVLLM_CHECK(v.is_array()) << path_ << ": key " << key << " must be a list of numbers, got " << v.dump();
    std::vector<double> out;
    for (const json& x : v) {
      MINIVLLM_CHECK(x.is_number()) << path_ << ": key " << key << " must be a list of numbers, got " << v.dump();
      out.push_back(x.get<double>());
    }
    return out;
  }

  std::string get_string(const json& obj, const char* key) const {
    const json& v = obj.at(key);
    MINIVLLM_CHECK(v.is_string()) << path_ << ": key " << key << " must be a string, got " << v.dump();
    return v.get<std::string>();
  }

  // eos_token_id may be an int, a list of ints, or absent.
  void append_ids(const char* key, std::vector<int64_t>* ids) const {
    if (!has(key)) return;
    const json& v = j_.at(key);
    auto add = [&](const json& x) {
      MINIVLLM_CHECK(x.is_number_integer()) << path_ << ": key " << key << " must hold integers, got " << v.dump();
      int64_t id = x.get<int64_t>();
      if (std::find(ids->begin(), ids->end(), id) == ids->end()) ids->push_back(id);
    };
    if (v.is_array()) {
      for (const json& x : v) add(x);
    } else {
      add(v);
    }
  }

  const json& root() const { return j_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string path_;
};

const ArchitectureSpec& parse_architecture(const ConfigReader& r, std::string* name) {
  const json& j = r.root();
  MINIVLLM_CHECK(j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                 j["architectures"][0].is_string())
      << r.path() << ": missing key architectures (a list naming e.g. Qwen3ForCausalLM)";
  *name = j["architectures"][0].get<std::string>();
  return find_hf_architecture(*name, r.path());
}

// longrope as transformers' _compute_longrope_parameters reads it. original_max_position_embeddings
// at the top level wins over the one in the scaling object (Phi3Config keeps it there). The
// attention factor, unless given, is sqrt(1 + ln(factor) / ln(original)), factor defaulting to
// max_position_embeddings / original (transformers 4.x always took that ratio; published Phi
// configs have no factor key, so the two agree on them).
void parse_longrope(const ConfigReader& r, const json& params, const char* key, ModelConfig* c) {
  RopeScaling& s = c->rope_scaling;
  s.type = "longrope";
  s.short_factor = r.get_doubles(params, "short_factor");
  s.long_factor = r.get_doubles(params, "long_factor");
  if (r.has("original_max_position_embeddings")) {
    s.original_max_position_embeddings = r.get_int("original_max_position_embeddings");
  } else {
    MINIVLLM_CHECK(r.has(params, "original_max_position_embeddings"))
        << r.path() << ": " << key << " longrope needs original_max_position_embeddings (at the top level or in "
        << key << ")";
    s.original_max_position_embeddings = r.get_int(params, "original_max_position_embeddings");
  }
  MINIVLLM_CHECK_GT(s.original_max_position_embeddings, 1)
      << r.path() << ": original_max_position_embeddings must be > 1";
  if (r.has(params, "attention_factor")) {
    s.attention_factor = r.get_double(params, "attention_factor");
    return;
  }
  const double orig = static_cast<double>(s.original_max_position_embeddings);
  s.factor = r.has(params, "factor") ? r.get_double(params, "factor")
                                      : static_cast<double>(c->max_position_embeddings) / orig;
  s.attention_factor = s.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s.factor) / std::log(orig));
}

// yarn as transformers 5 reads it (_compute_yarn_parameters): factor as given (required);
// original_max_position_embeddings from the top level, else from the scaling object, else
// max_position_embeddings; the attention factor, unless given, 0.1 ln(factor) + 1, or the ratio of
// that with mscale to that with mscale_all_dim where both are set (DeepSeek); beta_fast / beta_slow
// 32 / 1 where absent or 0; truncate true where absent. vLLM reads the same keys the same way.
void parse_yarn(const ConfigReader& r, const json& params, const char* key, ModelConfig* c) {
  RopeScaling& s = c->rope_scaling;
  s.type = "yarn";
  MINIVLLM_CHECK(r.has(params, "factor")) << r.path() << ": " << key << " yarn needs a factor";
  s.factor = r.get_double(params, "factor");
  MINIVLLM_CHECK(s.factor > 0) << r.path() << ": " << key << ".factor must be > 0, got " << s.factor;
  if (r.has("original_max_position_embeddings")) {
    s.original_max_position_embeddings = r.get_int("original_max_position_embeddings");
  } else if (r.has(params, "original_max_position_embeddings")) {
    s.original_max_position_embeddings = r.get_int(params, "original_max_position_embeddings");
  } else {
    s.original_max_position_embeddings = c->max_position_embeddings;
  }
  MINIVLLM_CHECK_GT(s.original_max_position_embeddings, 0)
      << r.path() << ": original_max_position_embeddings must be > 0";
  const auto get_or = [&](const char* name, double fallback) {
    if (!r.has(params, name)) return fallback;
    const double v = r.get_double(params, name);
    return v == 0 ? fallback : v;  // transformers: `params.get(name) or fallback`
  };
  s.beta_fast = get_or("beta_fast", 32.0);
  s.beta_slow = get_or("beta_slow", 1.0);
  s.truncate = r.get_bool(params, "truncate", true);
  s.attention_factor = r.has(params, "attention_factor")
                           ? r.get_double(params, "attention_factor")
                           : yarn_attention_factor(s.factor, get_or("mscale", 0), get_or("mscale_all_dim", 0));
}

// transformers 5 folds rope_theta and the scaling into rope_parameters; 4.x has rope_theta at the
// top level and rope_scaling beside it.
void parse_rope(const ConfigReader& r, ModelConfig* c) {
  const json& j = r.root();
  const json* params = nullptr;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (r.has(key)) {
      MINIVLLM_CHECK(j[key].is_object()) << r.path() << ": key " << key << " must be an object, got " << j[key].dump();
      if (!params) params = &j[key];
    }
  }
  // Where the layer types rotate differently, transformers 5 keys rope_parameters by layer type
  // (Gemma 3: full_attention, sliding_attention); 4.x names the sliding layers' base
  // rope_local_base_freq beside rope_theta.
  if (params && j.contains("rope_parameters") && params == &j.at("rope_parameters") &&
      params->contains("full_attention")) {
    const json& sliding = params->contains("sliding_attention") ? params->at("sliding_attention") : json::object();
    params = &params->at("full_attention");
    MINIVLLM_CHECK(params->is_object() && sliding.is_object())
        << r.path() << ": rope_parameters.full_attention / sliding_attention must be objects";
    if (r.has(sliding, "rope_theta")) c->rope_theta_sliding = r.get_double(sliding, "rope_theta");
    const std::string type = r.has(sliding, "rope_type") ? r.get_string(sliding, "rope_type") : "default";
    MINIVLLM_CHECK(type == "default") << r.path() << ": unsupported rope_parameters.sliding_attention rope_type \""
                                      << type << "\" (supported: default)";
  }
  if (r.has("rope_local_base_freq")) c->rope_theta_sliding = r.get_double("rope_local_base_freq");
  if (r.has("rope_theta")) {
    c->rope_theta = r.get_double("rope_theta");
  } else if (params && r.has(*params, "rope_theta")) {
    c->rope_theta = r.get_double(*params, "rope_theta");
  }
  const double fallback = c->traits().default_partial_rotary;
  if (fallback < 1) c->rotary_dim = static_cast<int64_t>(static_cast<double>(c->head_dim) * fallback);
  for (const json* obj : {&j, params}) {
    if (obj && r.has(*obj, "partial_rotary_factor")) {
      const double f = r.get_double(*obj, "partial_rotary_factor");
      // transformers: int(head_dim * partial_rotary_factor) dims rotate, pairs (i, i + dim / 2).
      const auto dim = static_cast<int64_t>(static_cast<double>(c->head_dim) * f);
      MINIVLLM_CHECK(f > 0 && f <= 1 && dim >= 2 && dim % 2 == 0)
          << r.path() << ": partial_rotary_factor " << f << " must be in (0, 1] and rotate an even number of "
          << "dims of head_dim " << c->head_dim << " (it rotates " << dim << ")";
      c->rotary_dim = dim;
    }
  }
  if (!params) return;
  const char* key = j.contains("rope_scaling") && !j["rope_scaling"].is_null() ? "rope_scaling" : "rope_parameters";
  std::string type;
  if (r.has(*params, "rope_type")) type = r.get_string(*params, "rope_type");
  else if (r.has(*params, "type")) type = r.get_string(*params, "type");
  MINIVLLM_CHECK(!type.empty() || !r.has(*params, "factor"))
      << r.path() << ": " << key << " " << params->dump() << " has a factor but no rope_type";
  if (type.empty() || type == "default") return;
  if (type == "longrope" || type == "su") {  // "su": the first Phi-3-128k releases' name for it
    parse_longrope(r, *params, key, c);
    return;
  }
  if (type == "yarn") {
    parse_yarn(r, *params, key, c);
    return;
  }
  if (type == "linear") {  // position interpolation: every frequency divided by factor
    c->rope_scaling.type = type;
    c->rope_scaling.factor = r.get_double(*params, "factor");
    return;
  }
  MINIVLLM_CHECK(type == "llama3") << r.path() << ": unsupported " << key << " type \"" << type
                                   << "\" (supported: default, linear, llama3, longrope, yarn)";
  c->rope_scaling.type = type;
  c->rope_scaling.factor = r.get_double(*params, "factor");
  c->rope_scaling.low_freq_factor = r.get_double(*params, "low_freq_factor");
  c->rope_scaling.high_freq_factor = r.get_double(*params, "high_freq_factor");
  c->rope_scaling.original_max_position_embeddings = r.get_int(*params, "original_max_position_embeddings");
}

// Keys that only the rows with a trait read: another row's config that names one is refused.
struct RowOnlyKey {
  const char* key;
  bool ArchitectureTraits::*read_by;
  const char* why;
};
constexpr const char* kSoftcapOnly = "minivllm soft-caps Gemma 2's only";
constexpr const char* kSmolLM3Only = "minivllm reads it for SmolLM3ForCausalLM only";
constexpr const char* kGraniteOnly = "minivllm reads it for GraniteForCausalLM only";
constexpr RowOnlyKey kRowOnlyKeys[] = {
    {"final_logit_softcapping", &ArchitectureTraits::logit_softcapping, kSoftcapOnly},
    {"attn_logit_softcapping", &ArchitectureTraits::logit_softcapping, kSoftcapOnly},
    {"no_rope_layers", &ArchitectureTraits::no_rope_layers, kSmolLM3Only},
    {"no_rope_layer_interval", &ArchitectureTraits::no_rope_layers, kSmolLM3Only},
    {"embedding_multiplier", &ArchitectureTraits::granite_multipliers, kGraniteOnly},
    {"residual_multiplier", &ArchitectureTraits::granite_multipliers, kGraniteOnly},
    {"attention_multiplier", &ArchitectureTraits::granite_multipliers, kGraniteOnly},
    {"logits_scaling", &ArchitectureTraits::granite_multipliers, kGraniteOnly},
};

// Keys asking for model features the engine does not implement: refusing them is better than
// loading the weights and silently computing something else.
void refuse_unsupported_features(const ConfigReader& r, const ModelConfig& c) {
  const json& j = r.root();
  const std::string& p = r.path();
  // The row fixes the activation; a config that names another one is a different model.
  for (const char* key : {"hidden_act", "hidden_activation"}) {
    if (!r.has(key)) continue;
    std::string act = r.get_string(j, key);
    if (act == "swish") act = "silu";
    const char* expected = activation_config_name(c.traits().activation);
    MINIVLLM_CHECK(act == expected) << p << ": unsupported " << key << " \"" << act << "\" for " << c.arch_name
                                    << " (minivllm implements \"" << expected << "\" for it)";
  }
  // gpt-oss's clamp: transformers' GptOssExperts fixes it at 7 whatever the key says; another value
  // would be a model that reference does not run.
  if (r.has("swiglu_limit")) {
    const double limit = r.get_double("swiglu_limit");
    MINIVLLM_CHECK(c.traits().activation == Activation::kSwigluOai && limit == kSwigluOaiLimit)
        << p << ": unsupported swiglu_limit " << limit << " for " << c.arch_name << " (minivllm implements gpt-oss's "
        << kSwigluOaiLimit << ")";
  }
  MINIVLLM_CHECK(!r.get_bool("attention_out_bias", false))
      << p << ": unsupported attention_out_bias: true (an o_proj bias, which minivllm does not implement)";
  MINIVLLM_CHECK(!r.get_bool("use_bias", false))
      << p << ": unsupported use_bias: true (biases on every projection; minivllm reads q/k/v biases only)";
  MINIVLLM_CHECK(!r.get_bool("mlp_bias", false))
      << p << ": unsupported mlp_bias: true (minivllm's MLP has no gate/up/down biases)";
  // Llama and Qwen3 put attention_bias on o_proj too (Qwen2 has q/k/v biases only), and the
  // engine has no o_proj bias.
  MINIVLLM_CHECK(c.traits().qkv_bias || c.traits().attention_bias_is_qkv || c.traits().attention_bias_with_o ||
                 !r.get_bool("attention_bias", false))
      << p << ": unsupported attention_bias: true for " << c.arch_name
      << " (it adds an o_proj bias, which minivllm does not implement)";
  for (const RowOnlyKey& k : kRowOnlyKeys) {
    MINIVLLM_CHECK(!r.has(k.key) || c.traits().*k.read_by)
        << p << ": unsupported " << k.key << " " << j.at(k.key).dump() << " for " << c.arch_name << " (" << k.why
        << ")";
  }
  MINIVLLM_CHECK(c.traits().qk_norm_key || !r.get_bool("use_qk_norm", false))
      << p << ": unsupported use_qk_norm: true for " << c.arch_name << " (minivllm reads it for Glm4MoeForCausalLM)";
  MINIVLLM_CHECK(!r.has("clip_qkv")) << p << ": unsupported clip_qkv " << j.at("clip_qkv").dump()
                                    << " (q, k and v clamped; minivllm does not implement it)";
  MINIVLLM_CHECK(!r.get_bool("use_bidirectional_attention", false))
      << p << ": unsupported use_bidirectional_attention: true (minivllm's attention is causal)";
  // A sliding_window on a row without sliding layers (Llama: transformers ignores the key there):
  // refused where it would bind, rather than guessed at. parse_sliding_windows read the others.
  if (r.has("layer_types") || r.has("sliding_window_pattern") || !r.has("sliding_window")) return;
  if (c.traits().use_sliding_window_key || c.traits().sliding_window_all_layers || c.traits().swa_pattern > 0) return;
  const int64_t window = r.get_int("sliding_window");
  if (window >= c.max_position_embeddings) return;
  MINIVLLM_CHECK(r.has("use_sliding_window") && !r.get_bool("use_sliding_window", false))
      << p << ": unsupported sliding_window " << window << " (smaller than max_position_embeddings "
      << c.max_position_embeddings << ") for " << c.arch_name << ", which has no sliding-window layers";
}

// Which layers slide, and over how many keys. transformers 5 lists each layer's kind in
// layer_types, which then decides (4.x Gemma 3: sliding_window_pattern, every pattern-th layer
// global; 4.x Gemma 2: neither, the row's swa_pattern); otherwise Qwen2/Qwen3 slide only with
// use_sliding_window: true, from layer max_window_layers on, and Mistral slides every layer
// whenever sliding_window is set. A "sliding_attention" layer takes the sliding rope
// (rope_theta_sliding); its window is 0 where it never binds (no shorter than
// max_position_embeddings, where the engine caps the context).
void parse_sliding_windows(const ConfigReader& r, ModelConfig* c) {
  const json& j = r.root();
  const std::string& p = r.path();
  c->check_num_layers();
  c->layer_sliding_window.assign(static_cast<size_t>(c->num_layers), 0);
  std::vector<std::string> types;
  if (r.has("layer_types")) {
    const json& t = j.at("layer_types");
    MINIVLLM_CHECK(t.is_array() && static_cast<int64_t>(t.size()) == c->num_layers)
        << p << ": key layer_types must be a list of num_hidden_layers (" << c->num_layers << ") names, got "
        << t.dump();
    for (const json& x : t) {
      MINIVLLM_CHECK(x.is_string()) << p << ": layer_types must hold strings, got " << t.dump();
      types.push_back(x.get<std::string>());
    }
  } else if (r.has("sliding_window_pattern") && j.at("sliding_window_pattern").is_string()) {
    // EXAONE 4's form: one letter a layer, cycled (L sliding, G global: "LLLG").
    const std::string pattern = r.get_string(j, "sliding_window_pattern");
    MINIVLLM_CHECK(!pattern.empty() && pattern.find_first_not_of("LG") == std::string::npos)
        << p << ": sliding_window_pattern \"" << pattern << "\" must be letters L (sliding) and G (global)";
    for (int64_t i = 0; i < c->num_layers; ++i) {
      types.push_back(pattern[static_cast<size_t>(i) % pattern.size()] == 'L' ? "sliding_attention" : "full_attention");
    }
  } else if (r.has("sliding_window_pattern") || (c->traits().swa_pattern > 0 && r.has("sliding_window"))) {
    // Every pattern-th layer global: the config's (4.x Gemma 3), else the row's (4.x Gemma 2).
    const int64_t pattern =
        r.has("sliding_window_pattern") ? r.get_int("sliding_window_pattern") : c->traits().swa_pattern;
    MINIVLLM_CHECK_GT(pattern, 0) << p << ": sliding_window_pattern must be > 0";
    for (int64_t i = 0; i < c->num_layers; ++i) {
      types.push_back((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
    }
  } else if (c->traits().use_sliding_window_key && r.get_bool("use_sliding_window", false) &&
             r.has("sliding_window")) {
    const int64_t first_sliding_layer = r.get_int("max_window_layers", 28);  // transformers' default
    for (int64_t i = 0; i < c->num_layers; ++i) {
      types.push_back(i >= first_sliding_layer ? "sliding_attention" : "full_attention");
    }
  } else if (c->traits().sliding_window_all_layers && r.has("sliding_window")) {
    types.assign(static_cast<size_t>(c->num_layers), "sliding_attention");
  } else {
    return;
  }
  int64_t window = r.has("sliding_window") ? r.get_int("sliding_window") : 0;
  MINIVLLM_CHECK_GE(window, 0) << p << ": sliding_window must be >= 0";
  // transformers' Qwen2/Qwen3 drop the window unless use_sliding_window, layer_types or not.
  if (c->traits().use_sliding_window_key && !r.get_bool("use_sliding_window", false)) window = 0;
  const bool binds = window > 0 && window < c->max_position_embeddings;
  c->layer_sliding.assign(types.size(), false);
  for (size_t i = 0; i < types.size(); ++i) {
    MINIVLLM_CHECK(types[i] == "full_attention" || types[i] == "sliding_attention")
        << p << ": unsupported layer_types[" << i << "] = \"" << types[i]
        << "\" (supported: full_attention, sliding_attention)";
    if (types[i] == "full_attention") continue;
    c->layer_sliding[i] = true;
    if (binds) c->layer_sliding_window[i] = window;
  }
}

// Every layer that does not slide (EXAONE 4's NoPE layers when a window is set).
std::vector<bool> full_layers(const ModelConfig& c) {
  std::vector<bool> full(static_cast<size_t>(c.num_layers), true);
  for (size_t i = 0; i < c.layer_sliding.size(); ++i) full[i] = !c.layer_sliding[i];
  return full;
}

// SmolLM3's NoPE layers, as transformers' SmolLM3Config derives them: no_rope_layers (1: the layer
// rotates, 0: it does not), else every no_rope_layer_interval-th layer (1-based) without rope.
void parse_no_rope_layers(const ConfigReader& r, ModelConfig* c) {
  const std::string& p = r.path();
  c->check_num_layers();
  const size_t n = static_cast<size_t>(c->num_layers);
  c->layer_no_rope.assign(n, false);
  if (r.has("no_rope_layers")) {
    const json& v = r.root().at("no_rope_layers");
    MINIVLLM_CHECK(v.is_array() && v.size() == n)
        << p << ": key no_rope_layers must be a list of num_hidden_layers (" << n << ") 0s and 1s, got " << v.dump();
    for (size_t i = 0; i < n; ++i) {
      MINIVLLM_CHECK(v[i].is_number_integer() && (v[i].get<int64_t>() == 0 || v[i].get<int64_t>() == 1))
          << p << ": no_rope_layers must hold 0 (no rope) or 1 (rope), got " << v.dump();
      c->layer_no_rope[i] = v[i].get<int64_t>() == 0;
    }
    return;
  }
  const int64_t interval = r.get_int("no_rope_layer_interval", 4);
  MINIVLLM_CHECK_GT(interval, 0) << p << ": no_rope_layer_interval must be > 0";
  c->layer_no_rope = every_nth_layer(c->num_layers, interval);
}

void parse_shapes(const ConfigReader& r, ModelConfig* c) {
  c->vocab_size = r.get_int("vocab_size");
  c->hidden_size = r.get_int("hidden_size");
  c->intermediate_size = r.get_int("intermediate_size");
  c->num_layers = r.get_int("num_hidden_layers");
  c->num_heads = r.get_int("num_attention_heads");
  c->num_kv_heads = r.get_int("num_key_value_heads", c->num_heads);
  MINIVLLM_CHECK_GT(c->num_heads, 0) << r.path() << ": num_attention_heads must be > 0";
  c->head_dim = r.get_int("head_dim", c->hidden_size / c->num_heads);
  c->rms_norm_eps = r.get_double("rms_norm_eps");
  c->max_position_embeddings = r.get_int("max_position_embeddings");
}

}  // namespace

ModelConfig load_hf_model_config(const std::string& dir, const std::string& hf_overrides) {
  MINIVLLM_CHECK(fs::is_directory(dir)) << "model directory not found: " << dir;
  const std::string file = (fs::path(dir) / "config.json").string();
  MINIVLLM_CHECK(fs::exists(file)) << "missing " << file;
  json j = read_json_file(file);
  MINIVLLM_CHECK(j.is_object()) << file << ": malformed: the top level must be a JSON object";
  // Messages name what was read: the file, and the overrides when they changed it.
  std::string path = file;
  if (!hf_overrides.empty()) {
    const json patch = json::parse(hf_overrides, nullptr, /*allow_exceptions=*/false);
    MINIVLLM_CHECK(!patch.is_discarded() && patch.is_object())
        << "hf_overrides must be a JSON object of config.json keys, got " << hf_overrides;
    j.merge_patch(patch);
    path = file + " with hf_overrides " + patch.dump();
  }
  ConfigReader r(j, path);

  ModelConfig c;
  c.source = path;
  c.arch = &parse_architecture(r, &c.arch_name);
  parse_shapes(r, &c);
  parse_rope(r, &c);
  parse_sliding_windows(r, &c);
  if (c.traits().sliding_rope_unscaled && c.rope_theta_sliding == 0) c.rope_theta_sliding = c.rope_theta;
  if (c.traits().nope_full_layers_with_window && r.has("sliding_window")) c.layer_no_rope = full_layers(c);
  refuse_unsupported_features(r, c);
  if (c.traits().no_rope_layers) parse_no_rope_layers(r, &c);
  if (c.traits().logit_softcapping) {
    c.attn_logit_softcapping = r.has("attn_logit_softcapping") ? r.get_double("attn_logit_softcapping") : 0.0;
    c.final_logit_softcapping = r.has("final_logit_softcapping") ? r.get_double("final_logit_softcapping") : 0.0;
  }
  if (r.has("query_pre_attn_scalar")) {
    const double s = r.get_double("query_pre_attn_scalar");
    MINIVLLM_CHECK(s > 0) << path << ": query_pre_attn_scalar must be > 0, got " << s;
    c.attention_scale = 1.0 / std::sqrt(s);
  }
  if (c.traits().granite_multipliers) {  // transformers' GraniteConfig defaults every one to 1
    c.embedding_multiplier = r.get_double("embedding_multiplier", 1.0);
    c.residual_multiplier = r.get_double("residual_multiplier", 1.0);
    c.logits_scaling = r.get_double("logits_scaling", 1.0);
    c.attention_scale = r.get_double("attention_multiplier", 1.0);
    MINIVLLM_CHECK(c.attention_scale > 0) << path << ": attention_multiplier must be > 0, got " << c.attention_scale;
  }
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", c.traits().tied_by_default);
  // attention_bias: true elsewhere was refused above (o_proj bias).
  // Qwen2-MoE's config may turn its q/k/v biases off (qkv_bias, transformers' default true).
  c.attention_bias = (c.traits().qkv_bias && r.get_bool("qkv_bias", true)) ||
                     ((c.traits().attention_bias_is_qkv || c.traits().attention_bias_with_o) &&
                      r.get_bool("attention_bias", false));
  c.o_proj_bias = c.traits().attention_bias_with_o && c.attention_bias;
  c.qk_norm = c.traits().qk_norm || (c.traits().qk_norm_key && r.get_bool("use_qk_norm", false));
  if (c.traits().moe) c.moe = parse_moe_config(j, path, c.traits().moe_keys);
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (r.has(key)) {
      c.torch_dtype = r.get_string(j, key);
      break;
    }
  }
  if (r.has("quantization_config")) c.quantization = parse_quantization_config(j.at("quantization_config"), path);
  // The FP8 kernels take a weight's codes with their scale grid, which the interleaved rows' move
  // does not carry along (loader/rope_rows.h).
  MINIVLLM_CHECK(!c.quantization.quantized() || !c.traits().hf_rope_interleaved)
      << path << ": unsupported quantization_config for " << c.arch_name
      << " (its q/k rows are reordered at load, which minivllm does for bf16 and fp32 checkpoints only; "
      << "--quantization fp8 quantizes a bf16 one at load)";
  MINIVLLM_CHECK(c.quantization.method != QuantMethod::kMxfp4 || c.traits().gpt_oss_experts)
      << path << ": quantization_config quant_method \"mxfp4\" is read for gpt-oss's experts only, not "
      << c.arch_name;
  c.bos_token_id = r.get_int("bos_token_id", -1);
  r.append_ids("eos_token_id", &c.eos_token_ids);

  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gen_path)) {
    const json g = read_json_file(gen_path);
    MINIVLLM_CHECK(g.is_object()) << gen_path << ": malformed: the top level must be a JSON object";
    ConfigReader gr(g, gen_path);
    gr.append_ids("eos_token_id", &c.eos_token_ids);
    if (c.bos_token_id < 0) c.bos_token_id = gr.get_int("bos_token_id", -1);
  }
  c.validate();
  return c;
}

std::vector<bool> every_nth_layer(int64_t num_layers, int64_t n) {
  std::vector<bool> flags(static_cast<size_t>(num_layers), false);
  for (int64_t i = n - 1; i < num_layers; i += n) flags[static_cast<size_t>(i)] = true;
  return flags;
}

double yarn_attention_factor(double factor, double mscale, double mscale_all_dim) {
  const auto scaled = [&](double m) { return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
  return mscale != 0 && mscale_all_dim != 0 ? scaled(mscale) / scaled(mscale_all_dim) : scaled(1.0);
}

int64_t ModelConfig::max_context_length() const {
  const auto scaled = [](int64_t n, double factor) {
    return static_cast<int64_t>(std::floor(static_cast<double>(n) * factor));
  };
  if (rope_scaling.type == "yarn" && rope_scaling.factor > 1) {
    return std::max(max_position_embeddings, scaled(rope_scaling.original_max_position_embeddings, rope_scaling.factor));
  }
  if (rope_scaling.type == "linear" && rope_scaling.factor > 1) return scaled(max_position_embeddings, rope_scaling.factor);
  return max_position_embeddings;
}

const ArchitectureTraits& ModelConfig::traits() const {
  MINIVLLM_CHECK(arch != nullptr) << (source.empty() ? std::string("model config") : source)
                                  << ": no architecture row (loader/architecture.h) for " << arch_name;
  return arch->traits;
}

void ModelConfig::check_num_layers() const {
  MINIVLLM_CHECK(num_layers > 0 && num_layers <= kMaxLayers)
      << (source.empty() ? std::string("model config") : source) << ": num_hidden_layers must be in [1, "
      << kMaxLayers << "], got " << num_layers;
}

void ModelConfig::validate() const {
  const std::string& src = source.empty() ? std::string("model config") : source;
  traits();
  check_num_layers();
  auto positive = [&](int64_t v, const char* key) { MINIVLLM_CHECK_GT(v, 0) << src << ": " << key << " must be > 0"; };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_layers, "num_hidden_layers");
  positive(num_heads, "num_attention_heads");
  positive(num_kv_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position_embeddings, "max_position_embeddings");
  MINIVLLM_CHECK_EQ(num_heads % num_kv_heads, 0)
      << src << ": num_attention_heads must be a multiple of num_key_value_heads";
  MINIVLLM_CHECK_EQ(head_dim % 2, 0) << src << ": head_dim must be even (rotary pairs)";
  MINIVLLM_CHECK(rms_norm_eps > 0) << src << ": rms_norm_eps must be > 0, got " << rms_norm_eps;
  MINIVLLM_CHECK(rope_theta > 0) << src << ": rope_theta must be > 0, got " << rope_theta;
  MINIVLLM_CHECK(attn_logit_softcapping >= 0 && final_logit_softcapping >= 0)
      << src << ": attn_logit_softcapping and final_logit_softcapping must be >= 0 (0 or null: none), got "
      << attn_logit_softcapping << " and " << final_logit_softcapping;
  MINIVLLM_CHECK(layer_no_rope.empty() || static_cast<int64_t>(layer_no_rope.size()) == num_layers)
      << src << ": " << layer_no_rope.size() << " NoPE layer flags for " << num_layers << " layers";
  MINIVLLM_CHECK(embedding_multiplier > 0 && residual_multiplier > 0 && logits_scaling > 0)
      << src << ": embedding_multiplier, residual_multiplier and logits_scaling must be > 0, got "
      << embedding_multiplier << ", " << residual_multiplier << " and " << logits_scaling;
  MINIVLLM_CHECK(attention_scale >= 0) << src << ": the attention scale must be >= 0 (0: head_dim^-1/2), got "
                                       << attention_scale;
  MINIVLLM_CHECK(rotary_dim >= 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0)
      << src << ": the rope's rotary dims (" << rotary_dim << ") must be even and at most head_dim " << head_dim;
  MINIVLLM_CHECK(rope_scaling.type.empty() || rope_scaling.type == "llama3" || rope_scaling.type == "longrope" ||
                 rope_scaling.type == "yarn" || rope_scaling.type == "linear" || rope_scaling.type == "freq_factors")
      << src << ": unsupported rope_scaling type " << rope_scaling.type;
  if (rope_scaling.type == "yarn" || rope_scaling.type == "linear") {
    MINIVLLM_CHECK(rope_scaling.factor > 0) << src << ": rope_scaling.factor must be > 0, got " << rope_scaling.factor;
  }
  if (rope_scaling.type == "yarn") {
    MINIVLLM_CHECK_GT(rope_scaling.original_max_position_embeddings, 0)
        << src << ": rope_scaling.original_max_position_embeddings must be > 0";
    MINIVLLM_CHECK(rope_scaling.attention_factor > 0)
        << src << ": rope_scaling.attention_factor must be > 0, got " << rope_scaling.attention_factor;
    MINIVLLM_CHECK(rope_scaling.beta_fast > 0 && rope_scaling.beta_slow > 0)
        << src << ": rope_scaling.beta_fast and beta_slow must be > 0, got " << rope_scaling.beta_fast << " and "
        << rope_scaling.beta_slow;
  }
  if (rope_scaling.type == "freq_factors") {
    MINIVLLM_CHECK_EQ(static_cast<int64_t>(rope_scaling.freq_factors.size()), rope_dim() / 2)
        << src << ": rope_freqs must hold one factor per rotary frequency (rotary dims " << rope_dim() << " / 2)";
    for (double f : rope_scaling.freq_factors) MINIVLLM_CHECK(f > 0) << src << ": rope_freqs holds " << f << " (<= 0)";
  }
  if (rope_scaling.type == "longrope") {
    for (const auto* factors : {&rope_scaling.short_factor, &rope_scaling.long_factor}) {
      const char* key = factors == &rope_scaling.short_factor ? "short_factor" : "long_factor";
      MINIVLLM_CHECK_EQ(static_cast<int64_t>(factors->size()), rope_dim() / 2)
          << src << ": rope_scaling." << key << " must hold one factor per rotary frequency (rotary dims "
          << rope_dim() << " / 2)";
      for (double f : *factors) MINIVLLM_CHECK(f > 0) << src << ": rope_scaling." << key << " holds " << f << " (<= 0)";
    }
    MINIVLLM_CHECK(rope_scaling.attention_factor > 0)
        << src << ": rope_scaling.attention_factor must be > 0, got " << rope_scaling.attention_factor;
    MINIVLLM_CHECK_GT(rope_scaling.original_max_position_embeddings, 0)
        << src << ": original_max_position_embeddings must be > 0";
  }
  if (rope_scaling.type == "llama3") {
    MINIVLLM_CHECK(rope_scaling.factor > 0) << src << ": rope_scaling.factor must be > 0";
    MINIVLLM_CHECK(rope_scaling.low_freq_factor > 0) << src << ": rope_scaling.low_freq_factor must be > 0";
    MINIVLLM_CHECK(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor)
        << src << ": rope_scaling.high_freq_factor must be > low_freq_factor";
    MINIVLLM_CHECK_GT(rope_scaling.original_max_position_embeddings, 0)
        << src << ": rope_scaling.original_max_position_embeddings must be > 0";
  }
  MINIVLLM_CHECK(torch_dtype == "bfloat16" || torch_dtype == "float16" || torch_dtype == "float32")
      << src << ": unsupported torch_dtype " << torch_dtype << " (bfloat16, float16 or float32)";
  moe.validate(num_layers, src);
  for (int64_t id : eos_token_ids) {
    MINIVLLM_CHECK(id >= 0 && id < vocab_size) << src << ": eos_token_id " << id << " outside the vocabulary";
  }
  MINIVLLM_CHECK(bos_token_id < vocab_size) << src << ": bos_token_id " << bos_token_id << " outside the vocabulary";
}

}  // namespace minivllm
