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

// Rotary row layouts of a [rows, ...] q or k weight made of n_head heads of D = rows / n_head rows.
// HF (rotate_half) pairs row j with row j + D/2 inside a head; llama.cpp's GGUF pairs rows 2j and
// 2j+1. convert_hf_to_gguf.py's permute(w, n_head) = w.reshape(n_head, 2, D/2, ...).swapaxes(1, 2),
// i.e. gguf[h*D + 2*j + i] = hf[h*D + i*D/2 + j] for i in {0, 1}, j < D/2.
// unpermute_rope_rows is its inverse: hf[h*D + i*D/2 + j] = gguf[h*D + 2*j + i].
Tensor permute_rope_rows(const Tensor& hf, int64_t n_head);
Tensor unpermute_rope_rows(const Tensor& gguf, int64_t n_head);

}  // namespace minivllm
