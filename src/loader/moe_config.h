// The mixture-of-experts keys of a config.json (Qwen3-MoE: transformers' Qwen3MoeConfig) and the
// one rule that says which layers are sparse. A model without experts has num_experts 0 and every
// layer dense; the registry row says whether its family reads these keys at all (ArchitectureTraits::moe).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "loader/architecture.h"

namespace minivllm {

struct MoeConfig {
  int64_t num_experts = 0;            // 0: no sparse layer
  int64_t num_experts_per_tok = 0;    // top-k
  int64_t moe_intermediate_size = 0;  // each expert's gate/up width
  bool norm_topk_prob = false;        // the k routing weights renormalised to sum to 1
  int64_t decoder_sparse_step = 1;    // layer i is sparse when (i + 1) % step == 0 ...
  std::vector<int64_t> mlp_only_layers;  // ... and i is not listed here (those are dense)
  // A shared expert in every sparse layer (Qwen2-MoE), this wide; 0: none. Its output is scaled by
  // sigmoid(x . shared_expert_gate) per token.
  int64_t shared_expert_intermediate_size = 0;
  // Layers [0, first_dense_layers) keep the dense MLP (GLM-4.5's first_k_dense_replace, ERNIE 4.5's
  // moe_layer_start_index), and so do those past last_sparse_layer (ERNIE's moe_layer_end_index; -1: none).
  int64_t first_dense_layers = 0;
  int64_t last_sparse_layer = -1;
  // Routing by a score bias (Backend::moe_route_biased; the weight role kMoeScoreBias): the experts chosen
  // by score + the router's e_score_correction_bias among the topk_groups best of num_groups groups, the
  // weights the scores (sigmoid ones: DeepSeek-V3, GLM-4.5; softmax ones: ERNIE 4.5) times
  // routed_scaling_factor. false: softmax, the top-k by score alone (moe_route).
  bool biased_routing = false;
  bool sigmoid_scores = false;
  int64_t num_groups = 1, topk_groups = 1;
  double routed_scaling_factor = 1.0;

  bool any() const { return num_experts > 0; }
  // transformers' Qwen3MoeDecoderLayer: sparse when not in mlp_only_layers, num_experts > 0 and
  // (layer + 1) % decoder_sparse_step == 0; and within [first_dense_layers, last_sparse_layer]
  // (Glm4MoeDecoderLayer, Ernie4_5_MoeDecoderLayer).
  bool is_sparse_layer(int64_t layer) const;
  // Throws naming the key and `source` when a value is out of range for a model of num_layers.
  void validate(int64_t num_layers, const std::string& source) const;
};

// The keys read from config.json's object `j` (file `path`, for messages), in the row's form
// (ArchitectureTraits::moe_keys); defaults as transformers' config of that family where a key is
// absent. Mixtral's and OLMoE's experts are intermediate_size wide and every layer is sparse: the
// Qwen3-MoE keys that say otherwise are refused there.
MoeConfig parse_moe_config(const nlohmann::json& j, const std::string& path, MoeKeys keys = MoeKeys::kQwen3);

}  // namespace minivllm
