// Mixture-of-experts configs and weights (loader/moe_config.h, the Qwen3-MoE registry row): the
// published Qwen3-30B-A3B config, which layers are sparse (transformers' rule), the keys' errors,
// the experts' names by role, and dummy weights that name exactly what a checkpoint stores.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "loader/dummy_weights.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"
#include "loader_test_util.h"
#include "model/transformer.h"

namespace minivllm {
namespace {

using nlohmann::json;
using testing::expect_dummy_names_match;
using testing::expect_error_naming;
using testing::ScratchDir;
using testing::write_text;

json qwen3_30b_a3b() {
  std::ifstream f(std::string(MINIVLLM_SHARED_DIR) + "/models/configs/qwen3-30b-a3b.json");
  EXPECT_TRUE(f.good());
  return json::parse(f);
}

ModelConfig load_config(const json& j) {
  ScratchDir dir("moe_cfg");
  write_text(dir.file("config.json"), j.dump());
  return load_hf_model_config(dir.str());
}

std::vector<bool> sparse_layers(const ModelConfig& c) {
  std::vector<bool> out;
  for (int64_t l = 0; l < c.num_layers; ++l) out.push_back(c.moe.is_sparse_layer(l));
  return out;
}

TEST(MoeConfig, Qwen3_30B_A3BLoads) {
  const ModelConfig c = load_config(qwen3_30b_a3b());
  EXPECT_STREQ(c.arch->hf_name, "Qwen3MoeForCausalLM");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe.moe_intermediate_size, 768);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_EQ(sparse_layers(c), std::vector<bool>(48, true));
  // A dense family's config never reads the keys.
  json dense = qwen3_30b_a3b();
  dense["architectures"] = {"Qwen3ForCausalLM"};
  EXPECT_FALSE(load_config(dense).moe.any());
}

// transformers' Qwen3MoeDecoderLayer: sparse when not in mlp_only_layers and (i + 1) % step == 0.
TEST(MoeConfig, SparseLayersFollowTransformersRule) {
  json j = qwen3_30b_a3b();
  j["num_hidden_layers"] = 6;
  j["decoder_sparse_step"] = 2;
  EXPECT_EQ(sparse_layers(load_config(j)), (std::vector<bool>{false, true, false, true, false, true}));
  j["mlp_only_layers"] = {3};
  EXPECT_EQ(sparse_layers(load_config(j)), (std::vector<bool>{false, true, false, false, false, true}));
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = {0, 5};
  EXPECT_EQ(sparse_layers(load_config(j)), (std::vector<bool>{false, true, true, true, true, false}));
  // transformers 5 writes num_experts as num_local_experts (the tiny golden's config does).
  j.erase("num_experts");
  j["num_local_experts"] = 16;
  EXPECT_EQ(load_config(j).moe.num_experts, 16);
}

TEST(MoeConfig, BadKeysAreNamed) {
  ScratchDir dir("moe_bad");
  auto refused = [&](json j, const std::vector<std::string>& parts) {
    write_text(dir.file("config.json"), j.dump());
    expect_error_naming([&] { load_hf_model_config(dir.str()); }, parts);
  };
  json j = qwen3_30b_a3b();
  j["num_experts_per_tok"] = 129;
  refused(j, {"num_experts_per_tok", "129", "128"});
  j = qwen3_30b_a3b();
  j["mlp_only_layers"] = {48};
  refused(j, {"mlp_only_layers", "48"});
  j = qwen3_30b_a3b();
  j.erase("moe_intermediate_size");
  refused(j, {"moe_intermediate_size"});
  j = qwen3_30b_a3b();
  j["num_local_experts"] = 64;
  refused(j, {"num_experts 128", "num_local_experts 64"});
  j = qwen3_30b_a3b();
  j["norm_topk_prob"] = "yes";
  refused(j, {"norm_topk_prob"});
}

TEST(MoeConfig, ExpertWeightNamesByRole) {
  const ArchitectureSpec& a = find_hf_architecture("Qwen3MoeForCausalLM", "test");
  EXPECT_EQ(expert_weight_name(a, WeightRole::kExpertGateProj, 3, 17), "model.layers.3.mlp.experts.17.gate_proj.weight");
  EXPECT_EQ(expert_weight_name(a, WeightRole::kExpertDownProj, 0, 0), "model.layers.0.mlp.experts.0.down_proj.weight");
  EXPECT_EQ(weight_name(a, WeightFormat::kHuggingFace, WeightRole::kMoeRouter, 5), "model.layers.5.mlp.gate.weight");
  EXPECT_EQ(weight_name(a, WeightFormat::kGguf, WeightRole::kMoeRouter, 5), "blk.5.ffn_gate_inp.weight");
  // GGUF stacks a layer's experts: one name for all of them.
  EXPECT_EQ(weight_name(a, WeightFormat::kGguf, WeightRole::kExpertDownProj, 5), "blk.5.ffn_down_exps.weight");
  EXPECT_EQ(&find_gguf_architecture("qwen3moe", "test"), &a);
  expect_error_naming([&] { module_name(a, WeightFormat::kHuggingFace, WeightRole::kExpertUpProj, 1); },
                      {"expert_up_proj", "needs an expert"});
  const ArchitectureSpec& dense = find_hf_architecture("Qwen3ForCausalLM", "test");
  EXPECT_EQ(expert_weight_name(dense, WeightRole::kExpertUpProj, 1, 2), "");
}

// The dummy source names exactly the tensors transformers saved for the tiny model (router and
// experts in its sparse layers 0 and 2, the dense MLP in layer 1).
TEST(MoeConfig, DummyWeightsNameWhatTheCheckpointStores) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/qwen3-moe-tiny";
  const ModelConfig c = load_hf_model_config(dir);
  EXPECT_EQ(sparse_layers(c), (std::vector<bool>{true, false, true}));
  expect_dummy_names_match(c, dir);
}

// Mixtral's row: its config's keys (the expert width is intermediate_size, every layer sparse, the
// top-k renormalised; Qwen3-MoE's keys refused by name) and its experts' names, which the dummy
// source and transformers' saved tiny checkpoint agree on.
TEST(MoeConfig, MixtralKeysAndNames) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/mixtral-tiny";
  const ModelConfig c = load_hf_model_config(dir);
  EXPECT_STREQ(c.arch->hf_name, "MixtralForCausalLM");
  EXPECT_EQ(c.moe.num_experts, 8);
  EXPECT_EQ(c.moe.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe.moe_intermediate_size, 32);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_EQ(sparse_layers(c), (std::vector<bool>{true, true}));
  const ArchitectureSpec& a = *c.arch;
  EXPECT_EQ(expert_weight_name(a, WeightRole::kExpertGateProj, 1, 7), "model.layers.1.block_sparse_moe.experts.7.w1.weight");
  EXPECT_EQ(expert_weight_name(a, WeightRole::kExpertUpProj, 1, 7), "model.layers.1.block_sparse_moe.experts.7.w3.weight");
  EXPECT_EQ(expert_weight_name(a, WeightRole::kExpertDownProj, 1, 7), "model.layers.1.block_sparse_moe.experts.7.w2.weight");
  expect_dummy_names_match(c, dir);
  std::ifstream f(dir + "/config.json");
  const json published = json::parse(f);
  for (const char* key : {"moe_intermediate_size", "norm_topk_prob", "mlp_only_layers", "decoder_sparse_step"}) {
    json j = published;
    j[key] = key == std::string("norm_topk_prob") ? json(false) : json(4);
    ScratchDir scratch("mixtral_cfg");
    write_text(scratch.file("config.json"), j.dump());
    expect_error_naming([&] { load_hf_model_config(scratch.str()); }, {key, "Mixtral"});
  }
}

// The real shape from config.json alone: every expert of every layer, of its shape.
TEST(MoeConfig, DummyWeightsForQwen3_30B_A3B) {
  const ModelConfig c = load_config(qwen3_30b_a3b());
  const auto src = make_dummy_weight_source(c, 0);
  // model-wide 3 (embedding, lm_head, final norm); per layer: 2 norms, q k v o, q/k norms, router,
  // 128 x 3 experts' weights.
  EXPECT_EQ(src->names().size(), 3u + 48u * (2u + 4u + 2u + 1u + 128u * 3u));
  EXPECT_FALSE(src->has("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_TRUE(src->has("model.layers.47.mlp.gate.weight"));
  const Tensor down = src->get_f32_slice("model.layers.47.mlp.experts.127.down_proj.weight", {2048, 768}, 1, 384, 384);
  EXPECT_EQ(down.shape(), (std::vector<int64_t>{2048, 384}));
  expect_error_naming([&] { src->get_f32("model.layers.0.mlp.experts.128.up_proj.weight"); },
                      {"experts.128", "not found"});
}

TEST(MoeConfig, ParallelShapesNameWhatDoesNotDivide) {
  json j = qwen3_30b_a3b();
  j["moe_intermediate_size"] = 102;  // 102 / 4: no; 128 experts / 4: yes (4 KV heads: at most 4 ranks)
  const ModelConfig c = load_config(j);
  expect_error_naming([&] { check_tensor_parallel_shapes(c, 4); }, {"moe_intermediate_size (102)", "world_size 4"});
  EXPECT_NO_THROW(check_tensor_parallel_shapes(c, 4, /*expert_parallel=*/true));
  j = qwen3_30b_a3b();
  j["num_experts"] = 126;  // 126 experts over 4 ranks: no
  const ModelConfig e = load_config(j);
  EXPECT_NO_THROW(check_tensor_parallel_shapes(e, 4));
  expect_error_naming([&] { check_tensor_parallel_shapes(e, 4, true); }, {"num_experts (126)", "world_size 4"});
  // Every layer sparse: the dense width is never split (nor allocated), so it need not divide.
  j = qwen3_30b_a3b();
  j["intermediate_size"] = 6143;
  EXPECT_FALSE(has_dense_mlp(load_config(j)));
  EXPECT_NO_THROW(check_tensor_parallel_shapes(load_config(j), 4));
  j["mlp_only_layers"] = {7};
  EXPECT_TRUE(has_dense_mlp(load_config(j)));
  expect_error_naming([&] { check_tensor_parallel_shapes(load_config(j), 4); }, {"intermediate_size (6143)"});
}

}  // namespace
}  // namespace minivllm
