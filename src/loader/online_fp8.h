// Online FP8 quantization (engine key `quantization: fp8`, as vLLM's --quantization fp8): the
// linear weights (q/k/v/o and gate/up/down of every layer, by the architecture registry's names;
// not the embeddings, norms or LM head) of an unquantized checkpoint are quantized at load to
// e4m3 with one fp32 scale per output channel (row): e4m3(w * 448 / amax) and amax / 448, as
// common/fp8.h quantizes a row. A backend that keeps FP8 weights (CUDA) gets the codes and the
// scales (stored_dtype kF8E4M3, get_stored_slice); the CPU gets the values rounded through e4m3
// (get_f32_slice), so its result shows exactly FP8's rounding (tools/make_fp8_goldens.py computes
// the same values for its reference). Dummy weights are quantized where they are made, on the
// device (see docs/DESIGN.md, "Weight formats").
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "loader/model_config.h"
#include "loader/weight_source.h"

namespace minivllm {

inline constexpr std::string_view kQuantizationKey = "quantization";

// Checks the key's value ("none" or "fp8") against the checkpoint: fp8 on a checkpoint that is
// already quantized (a quantization_config, or GGUF block types) is a ConfigKeyError naming both.
void check_online_quantization(const std::string& quantization, const ModelConfig& cfg, const WeightSource& weights);

// check_online_quantization, then: nullptr for "none" (read `weights` as it is), else the
// quantizing view of `weights`, which must outlive it.
std::unique_ptr<WeightSource> quantize_weights_online(const std::string& quantization, const ModelConfig& cfg,
                                                      const WeightSource& weights);

}  // namespace minivllm
