#include "api/model_source.h"

#include <cstdlib>
#include <filesystem>

#include "common/check.h"
#include "loader/gguf.h"

namespace fs = std::filesystem;

namespace minivllm {
namespace {

bool is_default_name(const std::string& m) {
  return m == kDefaultModelName || m == "smollm2" || m == "default" || m == "SmolLM2-135M-Instruct.Q4_1";
}

ModelSource open_hf_dir(const std::string& dir, bool with_weights) {
  ModelSource s;
  s.path = dir;
  s.config = load_hf_model_config(dir);
  if (with_weights) s.weights = open_safetensors_dir(dir);
  const fs::path d(dir);
  if (fs::exists(d / "tokenizer.json") || fs::exists(d / "vocab.json") || fs::exists(d / "original/tokenizer.model")) {
    s.tokenizer = Tokenizer::from_dir(dir);
  }
  if (fs::exists(d / "tokenizer_config.json")) {
    try {
      s.chat_template = ChatTemplate::from_tokenizer_config((d / "tokenizer_config.json").string());
    } catch (const Error& e) {
      // A tokenizer_config.json without a chat_template is fine; a broken template is not.
      if (std::string(e.what()).find("chat_template") == std::string::npos) throw;
    }
  }
  return s;
}

ModelSource open_gguf_file(const std::string& path, bool with_weights) {
  GgufModel g = open_gguf(path);
  ModelSource s;
  s.path = path;
  s.config = g.config;
  if (with_weights) s.weights = std::move(g.weights);
  if (!g.vocab.tokens.empty()) s.tokenizer = Tokenizer::from_vocab_data(g.vocab);
  if (!g.chat_template.empty()) s.chat_template.emplace(g.chat_template);
  return s;
}

}  // namespace

std::string resolve_model_path(const std::string& model) {
  if (!is_default_name(model)) return model;
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("MINIVLLM_MODELS_DIR")) dirs.emplace_back(env);
  dirs.emplace_back("models");
  if (const char* home = std::getenv("HOME")) dirs.emplace_back(fs::path(home) / ".cache" / "minivllm");
  for (const fs::path& d : dirs) {
    if (fs::exists(d / kDefaultModelFile)) return (d / kDefaultModelFile).string();
  }
  MINIVLLM_FAIL() << "the default model " << kDefaultModelFile
                  << " was not found in $MINIVLLM_MODELS_DIR, ./models or ~/.cache/minivllm; "
                     "fetch it with tools/fetch_default_model.sh";
}

ModelSource open_model(const std::string& model, bool with_weights) {
  const std::string path = resolve_model_path(model);
  MINIVLLM_CHECK(fs::exists(path)) << "model '" << path << "' does not exist (expected a Hugging Face directory, "
                                   << "a .gguf file, or '" << kDefaultModelName << "')";
  if (fs::is_directory(path)) return open_hf_dir(path, with_weights);
  MINIVLLM_CHECK(fs::path(path).extension() == ".gguf") << "model '" << path << "' is a file but not a .gguf";
  return open_gguf_file(path, with_weights);
}

}  // namespace minivllm
