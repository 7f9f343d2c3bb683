// open_gguf: a GGUF checkpoint as a model: ModelConfig from the <arch>.* metadata, weights under
// Hugging Face names (dequantized to fp32, q/k rows back in HF's rotary layout), the tokenizer
// vocabulary and the chat template.
#pragma once

#include <memory>
#include <string>

#include "common/tensor.h"
#include "common/vocab_data.h"
#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"

namespace minivllm {

struct GgufModel {
  ModelConfig config;
  std::unique_ptr<WeightSource> weights;
  VocabData vocab;
  std::string chat_template;  // tokenizer.chat_template, "" when absent
  std::string path;
};

// Architectures: llama (q/k rows unpermuted), qwen2, qwen3. Throws an Error naming the file, key or
// tensor for a missing key, an unsupported tensor type or a truncated file.
GgufModel open_gguf(const std::string& path);

// tokenizer.ggml.* of a GGUF file (usable for any tensor types).
VocabData read_gguf_vocab(const GgufFile& file);

}  // namespace minivllm
