// GGUF tensors under Hugging Face names (internal to the loader; open_gguf is the public entry).
#pragma once

#include <memory>
#include <string>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"

namespace minivllm {

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"; names without an HF
// counterpart (e.g. rope_freqs.weight) are returned unchanged.
std::string gguf_to_hf_name(const std::string& gguf_name);

// q_proj/k_proj rows are unpermuted when `config.arch` is kLlama (llama.cpp's converter permutes
// only the Llama family).
std::unique_ptr<WeightSource> make_gguf_weight_source(std::shared_ptr<const GgufFile> file, const ModelConfig& config);

}  // namespace minivllm
