#include "loader/moe_config.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/check.h"

namespace minivllm {
namespace {

using nlohmann::json;

int64_t read_int(const json& j, const char* key, int64_t fallback, const std::string& path) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  MINIVLLM_CHECK(j.at(key).is_number_integer()) << path << ": key " << key << " must be an integer, got "
                                                << j.at(key).dump();
  return j.at(key).get<int64_t>();
}

// norm_topk_prob where the config sets it; m's family default otherwise.
void read_norm_topk_prob(const json& j, const std::string& path, MoeConfig* m) {
  if (!j.contains("norm_topk_prob") || j.at("norm_topk_prob").is_null()) return;
  MINIVLLM_CHECK(j.at("norm_topk_prob").is_boolean())
      << path << ": key norm_topk_prob must be true or false, got " << j.at("norm_topk_prob").dump();
  m->norm_topk_prob = j.at("norm_topk_prob").get<bool>();
}

// GLM-4.5's keys (transformers' Glm4MoeConfig defaults where a key is absent).
MoeConfig parse_glm4_moe(const json& j, const std::string& path) {
  MoeConfig m;
  m.num_experts = read_int(j, "n_routed_experts", 128, path);
  m.num_experts_per_tok = read_int(j, "num_experts_per_tok", 8, path);
  m.moe_intermediate_size = read_int(j, "moe_intermediate_size", 1408, path);
  m.shared_expert_intermediate_size = m.moe_intermediate_size * read_int(j, "n_shared_experts", 1, path);
  m.first_dense_layers = read_int(j, "first_k_dense_replace", 1, path);
  m.biased_routing = m.sigmoid_scores = true;
  m.num_groups = read_int(j, "n_group", 1, path);
  m.topk_groups = read_int(j, "topk_group", 1, path);
  m.norm_topk_prob = true;
  if (j.contains("routed_scaling_factor") && !j.at("routed_scaling_factor").is_null()) {
    MINIVLLM_CHECK(j.at("routed_scaling_factor").is_number())
        << path << ": key routed_scaling_factor must be a number, got " << j.at("routed_scaling_factor").dump();
    m.routed_scaling_factor = j.at("routed_scaling_factor").get<double>();
  }
  for (const char* key : {"num_experts", "num_local_experts", "decoder_sparse_step", "mlp_only_layers"}) {
    MINIVLLM_CHECK(!j.contains(key) || j.at(key).is_null())
        << path << ": key " << key << " is not GLM-4.5's (n_routed_experts, first_k_dense_replace)";
  }
  return m;
}

// ERNIE 4.5's keys (transformers' Ernie4_5_MoeConfig defaults where a key is absent): softmax scores,
// the choice by score + the score bias (moe_statics), moe_num_shared_experts ungated shared experts, the
// sparse layers every moe_layer_interval-th within [moe_layer_start_index, moe_layer_end_index].
MoeConfig parse_ernie45_moe(const json& j, const std::string& path) {
  MoeConfig m;
  m.num_experts = read_int(j, "moe_num_experts", 64, path);
  m.num_experts_per_tok = read_int(j, "moe_k", 6, path);
  m.moe_intermediate_size = read_int(j, "moe_intermediate_size", 1536, path);
  m.shared_expert_intermediate_size = m.moe_intermediate_size * read_int(j, "moe_num_shared_experts", 2, path);
  m.first_dense_layers = read_int(j, "moe_layer_start_index", 1, path);
  m.last_sparse_layer = read_int(j, "moe_layer_end_index", -1, path);
  m.decoder_sparse_step = read_int(j, "moe_layer_interval", 1, path);
  m.biased_routing = true;
  // The weights divided by max(their sum, moe_norm_min); the sum of the k best of E softmax scores is at
  // least k / E, so a floor below that never binds (the published 1e-12); one that could is refused.
  m.norm_topk_prob = true;
  if (j.contains("moe_norm_min") && !j.at("moe_norm_min").is_null()) {
    const json& v = j.at("moe_norm_min");
    MINIVLLM_CHECK(v.is_number() && v.get<double>() >= 0 &&
                   v.get<double>() < static_cast<double>(m.num_experts_per_tok) / static_cast<double>(m.num_experts))
        << path << ": unsupported moe_norm_min " << v.dump() << " (minivllm divides by the weights' sum, which a floor "
        << "below moe_k / moe_num_experts never replaces)";
  }
  for (const char* key : {"num_experts", "num_experts_per_tok", "decoder_sparse_step", "mlp_only_layers"}) {
    MINIVLLM_CHECK(!j.contains(key) || j.at(key).is_null())
        << path << ": key " << key << " is not ERNIE 4.5's (moe_num_experts, moe_k, moe_layer_interval)";
  }
  return m;
}

}  // namespace

bool MoeConfig::is_sparse_layer(int64_t layer) const {
  if (!any() || decoder_sparse_step <= 0) return false;
  if (layer < first_dense_layers || (last_sparse_layer >= 0 && layer > last_sparse_layer)) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

void MoeConfig::validate(int64_t num_layers, const std::string& source) const {
  if (!any()) return;
  MINIVLLM_CHECK(num_experts_per_tok >= 1 && num_experts_per_tok <= num_experts)
      << source << ": num_experts_per_tok must be in [1, num_experts = " << num_experts << "], got "
      << num_experts_per_tok;
  MINIVLLM_CHECK_GT(moe_intermediate_size, 0) << source << ": moe_intermediate_size must be > 0";
  MINIVLLM_CHECK_GT(decoder_sparse_step, 0) << source << ": decoder_sparse_step must be > 0";
  MINIVLLM_CHECK_GE(shared_expert_intermediate_size, 0) << source << ": shared_expert_intermediate_size must be >= 0";
  MINIVLLM_CHECK(first_dense_layers >= 0 && first_dense_layers <= num_layers)
      << source << ": the first sparse layer (first_k_dense_replace, moe_layer_start_index) must be in [0, "
      << "num_hidden_layers = " << num_layers << "], got " << first_dense_layers;
  MINIVLLM_CHECK(last_sparse_layer >= -1 && last_sparse_layer < num_layers)
      << source << ": moe_layer_end_index must be -1 or in [0, num_hidden_layers = " << num_layers << "), got "
      << last_sparse_layer;
  MINIVLLM_CHECK(num_groups >= 1 && num_experts % num_groups == 0 && topk_groups >= 1 && topk_groups <= num_groups)
      << source << ": n_group (" << num_groups << ") must divide the " << num_experts
      << " experts and topk_group (" << topk_groups << ") be in [1, n_group]";
  MINIVLLM_CHECK(num_experts_per_tok <= topk_groups * (num_experts / num_groups) &&
                 (num_groups == 1 || num_experts / num_groups >= 2))
      << source << ": num_experts_per_tok " << num_experts_per_tok << " from " << topk_groups << " of " << num_groups
      << " groups of " << num_experts / num_groups << " experts";
  MINIVLLM_CHECK(std::isfinite(routed_scaling_factor) && routed_scaling_factor > 0)
      << source << ": routed_scaling_factor must be > 0, got " << routed_scaling_factor;
  for (const int64_t l : mlp_only_layers) {
    MINIVLLM_CHECK(l >= 0 && l < num_layers) << source << ": mlp_only_layers names layer " << l
                                             << ", outside [0, num_hidden_layers = " << num_layers << ")";
  }
}

MoeConfig parse_moe_config(const json& j, const std::string& path, MoeKeys keys) {
  if (keys == MoeKeys::kErnie45) return parse_ernie45_moe(j, path);
  if (keys == MoeKeys::kGlm4Moe) {
    MoeConfig m = parse_glm4_moe(j, path);
    read_norm_topk_prob(j, path, &m);
    return m;
  }
  MoeConfig m;
  // The published configs say num_experts; transformers 5 writes it as num_local_experts.
  m.num_experts = read_int(j, "num_experts", read_int(j, "num_local_experts", 0, path), path);
  MINIVLLM_CHECK(read_int(j, "num_local_experts", m.num_experts, path) == m.num_experts)
      << path << ": num_experts " << m.num_experts << " and num_local_experts "
      << read_int(j, "num_local_experts", 0, path) << " disagree";
  MINIVLLM_CHECK_GE(m.num_experts, 0) << path << ": num_experts must be >= 0";
  if (m.num_experts == 0) return m;
  if (keys != MoeKeys::kQwen3 && keys != MoeKeys::kQwen2) {
    const bool mixtral = keys == MoeKeys::kMixtral;
    for (const char* key : {"moe_intermediate_size", "decoder_sparse_step", "mlp_only_layers", "norm_topk_prob"}) {
      if (!mixtral && std::string_view(key) == "norm_topk_prob") continue;  // OLMoE's own
      MINIVLLM_CHECK(!j.contains(key) || j.at(key).is_null())
          << path << ": key " << key << " is Qwen3-MoE's, not " << (mixtral ? "Mixtral" : "OLMoE")
          << "'s (whose experts are intermediate_size wide, every layer sparse"
          << (mixtral ? ", its top-k weights renormalised)" : ")");
    }
    m.num_experts_per_tok = read_int(j, "num_experts_per_tok", mixtral ? 2 : 8, path);
    m.moe_intermediate_size = read_int(j, "intermediate_size", 0, path);
    m.norm_topk_prob = mixtral;  // OLMoE's default: the top-k softmax weights as they are
    if (mixtral) return m;
  } else {
    m.num_experts_per_tok = read_int(j, "num_experts_per_tok", 8, path);
    m.moe_intermediate_size = read_int(j, "moe_intermediate_size", 0, path);
    m.decoder_sparse_step = read_int(j, "decoder_sparse_step", 1, path);
    // transformers' Qwen2MoeConfig default where the key is absent (the published configs set it).
    if (keys == MoeKeys::kQwen2) {
      m.shared_expert_intermediate_size = read_int(j, "shared_expert_intermediate_size", 5632, path);
    }
  }
  read_norm_topk_prob(j, path, &m);
  if (j.contains("mlp_only_layers") && !j.at("mlp_only_layers").is_null()) {
    const json& l = j.at("mlp_only_layers");
    MINIVLLM_CHECK(l.is_array()) << path << ": key mlp_only_layers must be a list of layer indices, got " << l.dump();
    for (const json& x : l) {
      MINIVLLM_CHECK(x.is_number_integer()) << path << ": mlp_only_layers must hold integers, got " << l.dump();
      m.mlp_only_layers.push_back(x.get<int64_t>());
    }
  }
  return m;
}

}  // namespace minivllm
