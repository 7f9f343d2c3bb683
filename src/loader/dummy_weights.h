// Dummy weights (vLLM's --load-format dummy): every weight a model of `config` asks for, made up
// from a seed instead of read from a checkpoint, so that a model can be loaded, run and measured
// from its config.json alone. A value depends only on (seed, tensor name, its index in the whole
// tensor): a tensor-parallel rank makes only its own shard, and the shards of every world size
// join into the same tensor.
//
// Scales keep a forward pass finite and its logits spread (not one-hot, not flat) at any depth:
// projections uniform with std 1/sqrt(fan_in) (every sublayer reads an RMS-normed input), norm
// weights in [0.5, 1.5] (around 0 for a (1 + w) norm), biases std 0.1, the embedding std 1 and an
// untied lm_head std 1/sqrt(hidden) (logits of std ~1); a tied matrix takes the lm_head's scale.
//
// A config with an FP8 quantization_config gets an FP8 checkpoint of that format: each projection
// (not in its ignore list) as e4m3 codes of those values over one scale, the largest value's, given
// for every block, served through dequantize_weights as a real checkpoint is; a backend may make
// the codes in place (WeightSource::hashed_fp8).
#pragma once

#include <cstdint>
#include <memory>

#include "loader/model_config.h"
#include "loader/weight_source.h"

namespace minivllm {

std::unique_ptr<WeightSource> make_dummy_weight_source(const ModelConfig& config, uint64_t seed);

}  // namespace minivllm
