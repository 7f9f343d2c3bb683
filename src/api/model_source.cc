#include "api/model_source.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/check.h"
#include "common/error_text.h"
#include "common/file_contents.h"
#include "common/tuning.h"
#include "loader/dummy_weights.h"
#include "loader/fused_weights.h"
#include "loader/gguf.h"
#include "loader/gpt_oss_experts.h"
#include "loader/quantized_weights.h"
#include "loader/rope_rows.h"

namespace fs = std::filesystem;

namespace minivllm {
namespace {

bool is_default_name(const std::string& m) {
  return m == kDefaultModelName || m == "smollm2" || m == "default" || m == "SmolLM2-135M-Instruct.Q4_1";
}

// What tokenizer_config.json says about a chat template: none at all (a base model: fine), or one
// that loads, or one that does not (its error kept in `s.chat_template_error`).
void load_hf_chat_template(const fs::path& dir, ModelSource& s) {
  const fs::path config = dir / "tokenizer_config.json";
  if (!fs::exists(config)) return;
  bool declared = fs::exists(dir / "chat_template.jinja");
  if (!declared) {
    std::ifstream in(config, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    // Invalid JSON: the tokenizer reports it when it reads the same file; here it counts as a
    // declared template that cannot be read.
    declared = j.is_discarded() || !j.is_object() || (j.contains("chat_template") && !j["chat_template"].is_null());
  }
  if (!declared) return;
  try {
    s.chat_template = ChatTemplate::from_tokenizer_config(config.string());
  } catch (const std::exception& e) {  // Error, or a nlohmann::json type error from a malformed entry
    std::string message = message_for_users(e.what());
    if (message.find(config.string()) == std::string::npos) message = config.string() + ": " + message;
    s.chat_template_error = "the model's chat template cannot be used: " + message;
  }
}

ModelSource open_hf_dir(const std::string& dir, bool with_weights, const std::string& hf_overrides) {
  ModelSource s;
  s.path = dir;
  s.config = load_hf_model_config(dir, hf_overrides);
  if (with_weights) {
    s.weights = open_safetensors_dir(dir);
    // FP8 checkpoints are served dequantized; their scale tensors are never the model's to see.
    if (s.config.quantization.quantized()) s.weights = dequantize_weights(std::move(s.weights), s.config.quantization);
    // Fused tensors (Phi-3's qkv_proj, gate_up_proj) appear to the model as their roles' weights.
    s.weights = split_fused_weights(std::move(s.weights), s.config);
    // gpt-oss's stacked, interleaved experts appear as per-expert weights.
    s.weights = serve_gpt_oss_experts(std::move(s.weights), s.config);
    // q/k rows that rotate adjacent pairs (GLM-4) are moved to the half-split layout the kernels take.
    if (s.config.traits().hf_rope_interleaved) s.weights = unpermute_interleaved_rope(std::move(s.weights), s.config);
  }
  const fs::path d(dir);
  if (fs::exists(d / "tokenizer.json") || fs::exists(d / "vocab.json") || fs::exists(d / "original/tokenizer.model")) {
    s.tokenizer = Tokenizer::from_dir(dir);
  }
  load_hf_chat_template(d, s);
  return s;
}

ModelSource open_gguf_file(const std::string& path, bool with_weights) {
  GgufModel g = open_gguf(path);
  ModelSource s;
  s.path = path;
  s.config = g.config;
  if (with_weights) s.weights = std::move(g.weights);
  if (!g.vocab.tokens.empty()) s.tokenizer = Tokenizer::from_vocab_data(g.vocab);
  if (!g.chat_template.empty()) {
    try {
      s.chat_template.emplace(g.chat_template);
    } catch (const std::exception& e) {
      s.chat_template_error = "the model's chat template cannot be used: " + path +
                              ": tokenizer.chat_template: " + message_for_users(e.what());
    }
  }
  return s;
}

}  // namespace

void replace_chat_template(ModelSource& s, const std::string& chat_template) {
  if (chat_template.empty()) return;
  const bool inline_text = chat_template.find_first_of("{\n") != std::string::npos;
  std::string source = chat_template;
  if (!inline_text) {
    MINIVLLM_CHECK(fs::is_regular_file(chat_template))
        << "chat_template: '" << chat_template << "' is neither a file nor a template (a template holds {% or {{)";
    source = read_file_contents(chat_template);
  }
  try {
    s.chat_template = s.chat_template ? s.chat_template->with_source(std::move(source)) : ChatTemplate(std::move(source));
  } catch (const Error& e) {
    MINIVLLM_FAIL() << "chat_template" << (inline_text ? "" : " " + chat_template) << ": " << message_for_users(e.what());
  }
  s.chat_template_error.clear();
}

std::string resolve_model_path(const std::string& model) {
  if (!is_default_name(model)) return model;
  std::vector<fs::path> dirs;
  if (const std::optional<std::string> env = knob_text("MINIVLLM_MODELS_DIR")) dirs.emplace_back(*env);
  dirs.emplace_back("models");
  if (const char* home = std::getenv("HOME")) dirs.emplace_back(fs::path(home) / ".cache" / "minivllm");
  for (const fs::path& d : dirs) {
    if (fs::exists(d / kDefaultModelFile)) return (d / kDefaultModelFile).string();
  }
  MINIVLLM_FAIL() << "the default model " << kDefaultModelFile
                  << " was not found in $MINIVLLM_MODELS_DIR, ./models or ~/.cache/minivllm; "
                     "fetch it with tools/fetch_default_model.sh";
}

const ChatTemplate& ModelSource::require_chat_template() const {
  MINIVLLM_CHECK(chat_template_error.empty()) << chat_template_error;
  MINIVLLM_CHECK(chat_template.has_value()) << "model '" << path << "' has no chat template";
  return *chat_template;
}

std::string find_model(const std::string& model) {
  const std::string path = resolve_model_path(model);
  MINIVLLM_CHECK(fs::exists(path)) << "model '" << path << "' does not exist (expected a Hugging Face directory, "
                                   << "a .gguf file, or '" << kDefaultModelName << "')";
  return path;
}

ModelSource open_model(const std::string& model, bool with_weights, const LoadOptions& load) {
  MINIVLLM_CHECK(load.load_format == "auto" || load.load_format == "dummy")
      << "load_format must be auto or dummy, got " << load.load_format;
  const bool dummy = load.load_format == "dummy";
  const std::string path = find_model(model);
  ModelSource s;
  if (fs::is_directory(path)) {
    s = open_hf_dir(path, with_weights && !dummy, load.hf_overrides);
  } else {
    MINIVLLM_CHECK(fs::path(path).extension() == ".gguf") << "model '" << path << "' is a file but not a .gguf";
    MINIVLLM_CHECK(load.hf_overrides.empty())
        << "hf_overrides change a Hugging Face config.json; '" << path << "' is a .gguf file, whose settings are "
        << "its metadata";
    // Dummy weights are bf16 of the config's shapes: a GGUF's own types (Q4_K, ...) would be replaced
    // without a word, and a benchmark of the file would measure another model.
    MINIVLLM_CHECK(!(with_weights && dummy))
        << "load_format dummy makes bf16 weights from a config.json directory; '" << path
        << "' is a .gguf file with its own weights and types: run it with load_format auto";
    s = open_gguf_file(path, with_weights);
  }
  if (with_weights && dummy) s.weights = make_dummy_weight_source(s.config, static_cast<uint64_t>(load.dummy_seed));
  return s;
}

}  // namespace minivllm
