#include "api/generation_defaults.h"

#include <filesystem>
#include <limits>

#include "common/check.h"
#include "common/config_key.h"
#include "common/file_contents.h"
#include "loader/gguf_file.h"

namespace fs = std::filesystem;

namespace minivllm {
namespace {

// generation_config.json's names -> the sampling table's, with transformers' GenerationConfig
// default for each (a value equal to it is not a difference, so not taken).
struct Key {
  const char* file;
  const char* sampling;
  double hf_default;  // NaN: none
};
constexpr Key kKeys[] = {
    {"temperature", "temperature", 1.0},
    {"top_p", "top_p", 1.0},
    {"top_k", "top_k", 50.0},
    {"min_p", "min_p", std::numeric_limits<double>::quiet_NaN()},
    {"repetition_penalty", "repetition_penalty", 1.0},
    {"max_new_tokens", "max_tokens", std::numeric_limits<double>::quiet_NaN()},
};

nlohmann::json read_json_object(const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(read_file_contents(path), nullptr, /*allow_exceptions=*/false);
  MINIVLLM_CHECK(!j.is_discarded() && j.is_object()) << path << ": malformed: the top level must be a JSON object";
  return j;
}

// llama.cpp's general.sampling.* keys (what llama.cpp itself starts from), taken as they are.
GenerationDefaults read_gguf_sampling(const std::string& path) {
  const GgufFile f(path);
  GenerationDefaults d;
  constexpr std::pair<const char*, const char*> kGguf[] = {{"general.sampling.temp", "temperature"},
                                                           {"general.sampling.top_p", "top_p"},
                                                           {"general.sampling.top_k", "top_k"},
                                                           {"general.sampling.min_p", "min_p"},
                                                           {"general.sampling.penalty_repeat", "repetition_penalty"}};
  for (const auto& [key, name] : kGguf) {
    const GgufValue* v = f.find(key);
    if (v == nullptr) continue;
    MINIVLLM_CHECK(v->is_integer() || v->is_float()) << path << ": " << key << " must be a number";
    if (std::string_view(name) == "top_k") d.keys[name] = f.get_int(key);
    else d.keys[name] = f.get_float(key, 0.0);
  }
  if (d.keys.empty()) return d;
  d.source = path;
  d.params = d.apply(SamplingParams{});
  return d;
}

}  // namespace

SamplingParams GenerationDefaults::apply(const SamplingParams& base) const {
  if (keys.empty()) return base;
  nlohmann::json merged = nlohmann::json::parse(base.to_json().dump());
  for (const auto& [k, v] : keys.items()) merged[k] = v;
  try {
    return SamplingParams::from_json(merged);
  } catch (const ConfigKeyError& e) {
    MINIVLLM_FAIL() << source << ": the model's default " << e.key() << ": " << e.problem();
  }
}

GenerationDefaults read_generation_defaults(const std::string& generation_config, const std::string& model_path) {
  GenerationDefaults d;
  if (generation_config == "vllm") return d;
  fs::path file;
  if (generation_config == "auto") {
    if (fs::path(model_path).extension() == ".gguf") return read_gguf_sampling(model_path);
    file = fs::path(model_path) / "generation_config.json";
    if (!fs::exists(file)) return d;
  } else {
    file = fs::path(generation_config) / "generation_config.json";
    MINIVLLM_CHECK(fs::is_directory(generation_config) && fs::exists(file))
        << "generation_config must be auto, vllm or a folder holding generation_config.json; '" << generation_config
        << "' has none";
  }
  d.source = file.string();
  const nlohmann::json j = read_json_object(d.source);
  for (const Key& k : kKeys) {
    if (!j.contains(k.file) || j[k.file].is_null()) continue;
    const nlohmann::json& v = j[k.file];
    MINIVLLM_CHECK(v.is_number()) << d.source << ": " << k.file << " must be a number, got " << v.dump();
    if (v.get<double>() == k.hf_default) continue;
    d.keys[k.sampling] = v;
  }
  d.params = d.apply(SamplingParams{});  // an invalid value is refused here, naming the file
  return d;
}

}  // namespace minivllm
