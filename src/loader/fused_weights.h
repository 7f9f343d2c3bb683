// Splitting fused checkpoint tensors by role: a WeightSource in front of a checkpoint whose
// registry row lists FusedWeights (Phi-3's qkv_proj and gate_up_proj). Each part appears under its
// role's own name (the row's hf_names: "...self_attn.q_proj.weight"), read as a row range of the
// fused tensor, so the model loads and shards it like any other family's weight.
#pragma once

#include <memory>

#include "loader/weight_source.h"

namespace minivllm {

// `source` itself when config's row fuses nothing.
std::unique_ptr<WeightSource> split_fused_weights(std::unique_ptr<WeightSource> source, const ModelConfig& config);

}  // namespace minivllm
