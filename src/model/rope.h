// Rotary position embedding tables: cos and sin per position, with Llama 3's frequency scaling.
#pragma once

#include "common/tensor.h"
#include "loader/model_config.h"

namespace minivllm {

// Inverse frequencies (head_dim / 2 of them), scaled as rope_scaling says ("llama3" or none).
std::vector<double> rope_inv_freq(const ModelConfig& cfg);

// Host fp32 [max_positions, head_dim]: cos(pos * f_i) in columns [0, d/2), sin in [d/2, d).
Tensor rope_cos_sin_table(const ModelConfig& cfg, int64_t max_positions);

}  // namespace minivllm
