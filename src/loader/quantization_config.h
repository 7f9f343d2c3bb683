// How a checkpoint's weights are quantized: config.json's `quantization_config`, reduced to what
// the loader needs to dequantize them (which tensor holds a weight's scales, and the block of
// weight elements one scale covers) and what the GPU's FP8 kernels will need later (whether the
// activations' scales are static). Two FP8 formats are read:
//   quant_method "fp8"                 Qwen's and DeepSeek's FP8 checkpoints (vLLM's Fp8Config):
//                                      e4m3 `*.weight` with fp32 `*.weight_scale_inv` per
//                                      weight_block_size block, or, without blocks, one
//                                      `*.weight_scale` per tensor (+ `*.input_scale` when static)
//   quant_method "compressed-tensors"  llm-compressor's FP8 (format float-quantized): e4m3
//                                      `*.weight` with `*.weight_scale` per channel, per tensor or
//                                      per block, optional static `*.input_scale`
// and one that is not FP8:
//   quant_method "mxfp4"               gpt-oss's published checkpoints: its experts as MXFP4 blocks
//                                      (`*_blocks`, `*_scales`), read in that format by the
//                                      architecture's own source (loader/gpt_oss_experts.h); no scales
//                                      for the loader to apply.
// Any other quantization_config (awq, gptq, bitsandbytes, int8 compressed-tensors, ...) is refused
// with an error naming it: computing with weights whose format is not understood gives garbage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace minivllm {

enum class QuantMethod { kNone, kFp8, kCompressedTensors, kMxfp4 };

struct WeightQuantization {
  QuantMethod method = QuantMethod::kNone;
  std::string method_name;  // config.json's quant_method ("fp8", "compressed-tensors"), for messages
  // The weight elements [rows, cols] one scale covers; 0 means the whole dimension: a per-channel
  // scale is {1, 0}, a per-tensor one {0, 0}, Qwen3-8B-FP8's {128, 128}. A tensor-parallel slice
  // must not cut a block along a dimension whose block is not 0.
  int64_t block_rows = 0;
  int64_t block_cols = 0;
  std::string scale_suffix;  // the scale of "X.weight" is "X." + this: "weight_scale_inv" or "weight_scale"
  // True: activations are quantized with the checkpoint's static `*.input_scale` (the CPU, which
  // computes in fp32, does not read them); false: dynamic (per token or per block, at run time).
  bool static_input_scale = false;
  // Modules the checkpoint leaves unquantized, as it lists them ("lm_head", "re:.*gate$"). The
  // loader goes by each tensor's stored dtype instead; kept for messages and the GPU path.
  std::vector<std::string> ignore;

  // FP8 weights with scales, which the loader dequantizes (dequantize_weights) and the GPU's FP8
  // kernels take; not MXFP4, whose experts their architecture's source serves in their own format.
  bool quantized() const { return method == QuantMethod::kFp8 || method == QuantMethod::kCompressedTensors; }
  // "fp8 (e4m3 weights, 128x128 blocks, dynamic activations)" for messages and logs.
  std::string describe() const;
};

// Parses config.json's quantization_config (an object); `path` is the file, for messages. Throws
// an Error naming the key, its value and the file for anything it does not implement.
WeightQuantization parse_quantization_config(const nlohmann::json& qc, const std::string& path);

}  // namespace minivllm
