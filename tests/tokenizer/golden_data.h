// Shared by the tokenizer tests: the Hugging Face reference outputs and the model folders.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace minivllm::test {

inline std::string shared_dir() { return MINIVLLM_SHARED_DIR; }
inline std::string qwen3_dir() { return shared_dir() + "/models/qwen3-0.6b"; }
inline std::string llama_dir() { return shared_dir() + "/models/llama-3.2-1b-instruct"; }

// hf_goldens.json: texts[i]; <model>.ids[i], .ids_with_special[i], .decoded[i].
inline const nlohmann::json& goldens() {
  static const nlohmann::json j = [] {
    std::ifstream in(shared_dir() + "/tokenizer-vectors/hf_goldens.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

inline std::vector<int32_t> golden_ids(const std::string& model, const char* kind, size_t i) {
  return goldens().at(model).at(kind).at(i).get<std::vector<int32_t>>();
}

// Loading is the slow part (JSON of 11-17 MB); tests share one instance per source.
inline const Tokenizer& qwen3() {
  static const std::unique_ptr<Tokenizer> t = Tokenizer::from_dir(qwen3_dir());
  return *t;
}
inline const Tokenizer& llama() {
  static const std::unique_ptr<Tokenizer> t = Tokenizer::from_dir(llama_dir());
  return *t;
}

}  // namespace minivllm::test
