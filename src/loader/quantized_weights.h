// A quantized checkpoint as an ordinary WeightSource: every F8_E4M3 `X.weight` is served
// dequantized (e4m3 value x its scale, per block, channel or tensor as the quantization_config
// says) from get_f32 / get_f32_slice, so every backend runs FP8 checkpoints unchanged; the CPU,
// computing in fp32 on these values, is the reference. The scale tensors (`X.weight_scale`,
// `X.weight_scale_inv`, `X.input_scale`) are not model weights: has() and names() hide them.
// Tensors stored in other dtypes (norms, embeddings, an ignored lm_head) pass through unchanged.
//
// Tensor parallelism: a slice of a block-scaled weight must start and end on block boundaries
// along the dimension it cuts (or end at the tensor's end), so that each rank's shard owns whole
// blocks and their scales, as the GPU's block-scaled kernels will need; otherwise the error names
// the tensor, the slice and the block size.
//
// FP8 kernels: stored_dtype() says kF8E4M3 for a quantized weight, and get_stored_slice() gives
// its codes with the part of the scale grid the slice owns (common/fp8_weight.h), which a backend
// that keeps FP8 weights (Backend::keeps_weight_dtype) computes on; the others read get_f32_slice.
#pragma once

#include <memory>

#include "loader/quantization_config.h"
#include "loader/weight_source.h"

namespace minivllm {

// Wraps `stored` (which must read F8_E4M3 tensors through get_stored_slice). Checks at once that
// every F8_E4M3 weight has its scale (and its input_scale when the activations are static) and
// that every scale belongs to an F8_E4M3 weight; the errors name the tensors and the file.
std::unique_ptr<WeightSource> dequantize_weights(std::unique_ptr<WeightSource> stored, const WeightQuantization& q);

// Whether `name` is a quantization scale rather than a weight ("...weight_scale", "...weight_scale_inv",
// "...input_scale").
bool is_quantization_scale(const std::string& name);

}  // namespace minivllm
