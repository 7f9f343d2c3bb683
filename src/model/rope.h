// Rotary position embedding tables: cos and sin per position over the rotary dims of a head, with
// Llama 3's frequency scaling, Phi-3's longrope, YaRN or linear position interpolation.
#pragma once

#include "common/tensor.h"
#include "loader/model_config.h"

namespace minivllm {

// Whether longrope's long factors apply: when the engine may hold a sequence longer than the
// context the model was pretrained on (max_model_length > original_max_position_embeddings),
// fixed for the engine's life, as vLLM and llama.cpp choose. transformers switches per forward
// pass by the longest position in it, so one sequence's cache would mix keys rotated both ways
// and a prefix-cached block would depend on the length of whoever filled it (docs/DESIGN.md).
bool rope_uses_long_factors(const RopeScaling& s, int64_t max_model_length);

// Inverse frequencies (rope_dim() / 2 of them), scaled as rope_scaling says (none, "llama3",
// "longrope", whose regime max_model_length picks, "yarn", "linear", or GGUF's "freq_factors").
std::vector<double> rope_inv_freq(const ModelConfig& cfg, int64_t max_model_length);

// Host fp32 [max_positions, rope_dim()]: cos(pos * f_i) in columns [0, r/2), sin in [r/2, r), both
// times longrope's or yarn's attention factor. max_positions is the engine's max_model_length.
Tensor rope_cos_sin_table(const ModelConfig& cfg, int64_t max_positions);

}  // namespace minivllm
