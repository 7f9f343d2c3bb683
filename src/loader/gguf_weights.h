// GGUF tensors under Hugging Face names (internal to the loader; open_gguf is the public entry).
#pragma once

#include <memory>
#include <string>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"

namespace minivllm {

// Tensors under the HF names of `config.arch`'s row ("blk.3.attn_q.weight" ->
// "model.layers.3.self_attn.q_proj.weight"; names the row does not map, e.g. rope_freqs.weight,
// stay as they are). q_proj/k_proj rows and biases are unpermuted when the row's gguf_rope_permuted
// is set (loader/rope_rows.h: llama.cpp's converter permutes the Llama family's; GLM-4's and ERNIE's
// rotate adjacent pairs already), so a row slice of them must hold whole heads.
std::unique_ptr<WeightSource> make_gguf_weight_source(std::shared_ptr<const GgufFile> file, const ModelConfig& config);

}  // namespace minivllm
