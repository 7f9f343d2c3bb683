// gpt-oss's experts as the per-expert weights every MoE family's loader reads. Its checkpoints stack
// a layer's experts input-major, gate and up interleaved:
//   P.gate_up_proj      [E, H, 2I]  column 2i of expert e is gate row i, column 2i + 1 up row i;
//   P.gate_up_proj_bias [E, 2I]     interleaved the same way;
//   P.down_proj         [E, I, H]   the transpose of each expert's down_proj;
//   P.down_proj_bias    [E, H],
// P ending in ".mlp.experts"; as published (quant_method mxfp4) the two weights are MXFP4 instead,
// P.gate_up_proj_blocks / _scales and P.down_proj_blocks / _scales, rows out-major ([E, 2I, H / 32, 16]
// and [E, 2I, H / 32]; [E, H, I / 32, 16] and [E, H, I / 32]), served as ggml's MXFP4 blocks (the
// stored form) or decoded. The source in front of such a checkpoint serves P.<e>.gate_proj.weight
// [I, H], .up_proj.weight, .down_proj.weight [H, I] and their .bias ([I], [I], [H]), each made from its
// expert's slice of the stacked tensor when asked for (the safetensors file's own per-expert views of
// these tensors assume transformers' [E, 2I, H] layout and are hidden).
#pragma once

#include <memory>

#include "loader/weight_source.h"

namespace minivllm {

// `source` itself unless config's row is gpt-oss's (ArchitectureTraits::gpt_oss_experts).
std::unique_ptr<WeightSource> serve_gpt_oss_experts(std::unique_ptr<WeightSource> source, const ModelConfig& config);

}  // namespace minivllm
