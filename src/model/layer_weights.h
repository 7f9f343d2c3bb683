// The weights of a decoder-only transformer (Qwen3, Qwen2, Llama) on the backend, with q/k/v and
// gate/up fused into single matrices so that each projection is one GEMM.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"

namespace minivllm {

struct LayerWeights {
  Tensor input_layernorm;           // [H]
  Tensor qkv_proj;                  // [(nq + 2 nkv) * hd, H]  (q; k; v rows)
  Tensor qkv_bias;                  // [(nq + 2 nkv) * hd] or empty
  Tensor q_norm, k_norm;            // [hd] (Qwen3) or empty
  Tensor o_proj;                    // [H, nq * hd]
  Tensor post_attention_layernorm;  // [H]
  Tensor gate_up_proj;              // [2 I, H]  (gate; up rows)
  Tensor down_proj;                 // [H, I]
};

struct ModelWeights {
  Tensor embed_tokens;  // [V, H]
  std::vector<LayerWeights> layers;
  Tensor norm;     // [H]
  Tensor lm_head;  // [V, H]; shares embed_tokens' memory when the embeddings are tied
};

// Loads and uploads every tensor, checking each shape against the config. Errors name the tensor
// and the file.
ModelWeights load_model_weights(const ModelConfig& cfg, const WeightSource& src, Backend& backend);

}  // namespace minivllm
