// The architecture registry (loader/architecture.h): rows found by their HF and GGUF names, errors
// that list the supported ones, weight names by role in both formats, and a Mistral config (a row
// added to the registry alone) loading with its traits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "loader/architecture.h"
#include "loader/dummy_weights.h"
#include "loader/fused_weights.h"
#include "loader/gguf.h"
#include "loader/gpt_oss_experts.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using nlohmann::json;
using testing::expect_dummy_names_match;
using testing::expect_error_naming;
using testing::ScratchDir;
using testing::write_text;

TEST(Architecture, RowsAreFoundByTheirNames) {
  for (const char* hf : {"Qwen3ForCausalLM", "Qwen2ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM",
                           "Gemma3ForCausalLM"}) {
    EXPECT_STREQ(find_hf_architecture(hf, "test").hf_name, hf);
  }
  EXPECT_STREQ(find_gguf_architecture("qwen3", "f.gguf").hf_name, "Qwen3ForCausalLM");
  EXPECT_STREQ(find_gguf_architecture("qwen2", "f.gguf").hf_name, "Qwen2ForCausalLM");
  EXPECT_STREQ(find_gguf_architecture("gemma3", "f.gguf").hf_name, "Gemma3ForCausalLM");
  // llama.cpp files Mistral-7B as "llama": the Llama row reads it.
  EXPECT_STREQ(find_gguf_architecture("llama", "f.gguf").hf_name, "LlamaForCausalLM");
}

TEST(Architecture, UnknownNamesListTheSupportedOnes) {
  expect_error_naming([] { find_hf_architecture("GPT2LMHeadModel", "dir/config.json"); },
                      {"dir/config.json", "unsupported architecture GPT2LMHeadModel", "Qwen3ForCausalLM",
                       "LlamaForCausalLM", "MistralForCausalLM"});
  expect_error_naming([] { find_gguf_architecture("gpt2", "m.gguf"); },
                      {"m.gguf", "general.architecture gpt2", "llama", "qwen2", "qwen3"});
}

TEST(Architecture, WeightNamesByRoleInBothFormats) {
  const ArchitectureSpec& qwen3 = find_hf_architecture("Qwen3ForCausalLM", "test");
  const auto hf = WeightFormat::kHuggingFace, gguf = WeightFormat::kGguf;
  EXPECT_EQ(weight_name(qwen3, hf, WeightRole::kQProj, 3), "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(weight_name(qwen3, hf, WeightRole::kQProj, 3, "bias"), "model.layers.3.self_attn.q_proj.bias");
  EXPECT_EQ(weight_name(qwen3, gguf, WeightRole::kQProj, 3), "blk.3.attn_q.weight");
  EXPECT_EQ(weight_name(qwen3, hf, WeightRole::kFfnInputNorm, 0), "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(weight_name(qwen3, gguf, WeightRole::kFfnInputNorm, 0), "blk.0.ffn_norm.weight");
  EXPECT_EQ(weight_name(qwen3, hf, WeightRole::kKNorm, 27), "model.layers.27.self_attn.k_norm.weight");
  EXPECT_EQ(weight_name(qwen3, gguf, WeightRole::kEmbedTokens, -1), "token_embd.weight");
  EXPECT_EQ(module_name(qwen3, hf, WeightRole::kLmHead, -1), "lm_head");
  EXPECT_EQ(module_name(qwen3, gguf, WeightRole::kFinalNorm, -1), "output_norm");
  expect_error_naming([&] { weight_name(qwen3, hf, WeightRole::kDownProj, -1); },
                      {"down_proj", "Qwen3ForCausalLM", "needs a layer"});
}

// Every role of every row has a name in both formats or in neither (or, in GGUF, is part of a fused
// tensor: phi3's attn_qkv and ffn_up), and per-layer roles (only they) carry the layer.
bool gguf_part_of_fused(const ArchitectureSpec& a, WeightRole role) {
  if (a.hf_fused == nullptr) return false;
  for (const FusedWeight& f : *a.hf_fused) {
    for (int p = 0; f.gguf_module != nullptr && p < f.num_parts; ++p) {
      if (f.parts[p] == role) return true;
    }
  }
  return false;
}

TEST(Architecture, NameTablesAgreeAcrossFormats) {
  for (const char* name : {"Qwen3ForCausalLM", "Qwen2ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM",
                           "Gemma3ForCausalLM", "Phi3ForCausalLM"}) {
    const ArchitectureSpec& a = find_hf_architecture(name, "test");
    for (int i = 0; i < kNumWeightRoles; ++i) {
      const auto role = static_cast<WeightRole>(i);
      SCOPED_TRACE(std::string(name) + " " + weight_role_name(role));
      const std::string hf = module_name(a, WeightFormat::kHuggingFace, role, 7);
      const std::string gguf = module_name(a, WeightFormat::kGguf, role, 7);
      const bool fused = gguf_part_of_fused(a, role);
      EXPECT_EQ(hf.empty(), gguf.empty() && !fused);
      EXPECT_FALSE(fused && !gguf.empty()) << "a fused part must not also have a name of its own: " << gguf;
      if (hf.empty()) continue;  // the architecture has no such weight
      EXPECT_EQ(hf.find(".7.") != std::string::npos, is_layer_role(role)) << hf;
      if (!fused) {
        EXPECT_EQ(gguf.find(".7.") != std::string::npos, is_layer_role(role)) << gguf;
      }
    }
  }
}

// Mistral-7B-Instruct-v0.3's published config.json: a Llama-like row with its own name.
json mistral_7b_config() {
  return json::parse(R"({
    "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
    "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true,
    "vocab_size": 32768})");
}

ModelConfig load_config(const json& j) {
  ScratchDir dir("arch_cfg");
  write_text(dir.file("config.json"), j.dump());
  return load_hf_model_config(dir.str());
}

TEST(Architecture, MistralConfigLoadsWithItsTraits) {
  const ModelConfig c = load_config(mistral_7b_config());
  EXPECT_STREQ(c.arch->hf_name, "MistralForCausalLM");
  EXPECT_EQ(c.traits().activation, Activation::kSilu);
  EXPECT_EQ(c.traits().norm, NormForm::kRms);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_theta, 1e6);
  ASSERT_EQ(c.layer_sliding_window.size(), 32u);
  for (int64_t w : c.layer_sliding_window) EXPECT_EQ(w, 0);
}

// Mistral-7B-v0.1 slides every layer over 4,096 tokens, at the global rope.
TEST(Architecture, MistralSlidingWindowSlidesEveryLayer) {
  json j = mistral_7b_config();
  j["sliding_window"] = 4096;
  const ModelConfig c = load_config(j);
  ASSERT_EQ(c.layer_sliding_window.size(), 32u);
  for (int64_t w : c.layer_sliding_window) EXPECT_EQ(w, 4096);
  EXPECT_EQ(c.rope_theta_sliding, 0);
  j["sliding_window"] = 32768;  // as long as the context: never binds
  for (int64_t w : load_config(j).layer_sliding_window) EXPECT_EQ(w, 0);
  ScratchDir dir("arch_cfg_window");
  j["hidden_act"] = "gelu_pytorch_tanh";
  j["sliding_window"] = nullptr;
  write_text(dir.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(dir.str()); },
                      {"hidden_act", "gelu_pytorch_tanh", "MistralForCausalLM", "\"silu\""});
}

// gemma-3-1b-it's published config.json (transformers 4.x spelling: rope_local_base_freq,
// sliding_window_pattern).
json gemma3_1b_config() {
  return json::parse(R"({
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
    "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
    "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
    "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 262144})");
}

TEST(Architecture, Gemma3TraitsAndLayerKinds) {
  json j = gemma3_1b_config();
  ScratchDir dir("arch_gemma3");
  const ModelConfig c = load_config(j);
  EXPECT_EQ(c.traits().activation, Activation::kGeluTanh);
  EXPECT_EQ(c.traits().norm, NormForm::kRmsOnePlusWeight);
  EXPECT_TRUE(c.traits().embed_scale_sqrt_hidden && c.traits().post_norms && c.qk_norm);
  EXPECT_TRUE(c.tie_word_embeddings);  // the published config leaves it out: Gemma 3's default
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_theta_sliding, 1e4);
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / 16.0);
  ASSERT_EQ(c.layer_sliding.size(), 26u);
  ASSERT_EQ(c.layer_sliding_window.size(), 26u);
  for (size_t i = 0; i < 26; ++i) {
    EXPECT_EQ(c.layer_sliding[i], (i + 1) % 6 != 0) << "layer " << i;
    EXPECT_EQ(c.layer_sliding_window[i], (i + 1) % 6 != 0 ? 512 : 0) << "layer " << i;  // global every 6th
  }
  j["sliding_window"] = 32768;  // a window as long as the context never binds
  for (int64_t w : load_config(j).layer_sliding_window) EXPECT_EQ(w, 0);
  const ArchitectureSpec& g = *c.arch;
  EXPECT_EQ(weight_name(g, WeightFormat::kHuggingFace, WeightRole::kFfnInputNorm, 2),
            "model.layers.2.pre_feedforward_layernorm.weight");
  EXPECT_EQ(weight_name(g, WeightFormat::kHuggingFace, WeightRole::kAttnOutputNorm, 2),
            "model.layers.2.post_attention_layernorm.weight");
  // Soft-capping is Gemma 2's only: refused here, not ignored.
  j["final_logit_softcapping"] = 30.0;
  write_text(dir.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(dir.str()); }, {"final_logit_softcapping", "30", "Gemma 2"});
}

// Gemma 2 (tests/goldens/gemma2-tiny): Gemma 3's traits without q/k norms, its soft-caps read.
TEST(Architecture, Gemma2ReadsItsSoftCaps) {
  const ModelConfig c = load_hf_model_config(std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/gemma2-tiny");
  EXPECT_STREQ(c.arch->hf_name, "Gemma2ForCausalLM");
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcapping, 5.0);
  EXPECT_DOUBLE_EQ(c.final_logit_softcapping, 10.0);
  EXPECT_EQ(c.layer_sliding_window, (std::vector<int64_t>{8, 0, 8}));
}

// Granite (tests/goldens/granite-tiny and the GGUF llama.cpp's converter made of it): its four
// scalars read from config.json's *_multiplier / logits_scaling and from the GGUF's *_scale keys.
TEST(Architecture, GraniteReadsItsScalars) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/granite-tiny";
  for (const ModelConfig& c : {load_hf_model_config(dir), open_gguf(dir + "/granite-tiny.bf16.gguf").config}) {
    EXPECT_TRUE(c.traits().granite_multipliers) << c.source;
    EXPECT_DOUBLE_EQ(c.embedding_multiplier, 12.0) << c.source;
    EXPECT_NEAR(c.residual_multiplier, 0.22, 1e-7) << c.source;  // (the GGUF stores f32)
    EXPECT_DOUBLE_EQ(c.attention_scale, 0.0625) << c.source;
    EXPECT_DOUBLE_EQ(c.logits_scaling, 8.0) << c.source;
    EXPECT_TRUE(c.tie_word_embeddings) << c.source;
  }
  // transformers' defaults: every scalar 1 when absent (the attention too, not head_dim^-1/2).
  std::ifstream in(dir + "/config.json");
  json j = json::parse(in);
  for (const char* key : {"embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"}) {
    j.erase(key);
  }
  const ModelConfig d = load_config(j);
  EXPECT_EQ(d.embedding_multiplier, 1.0);
  EXPECT_EQ(d.residual_multiplier, 1.0);
  EXPECT_EQ(d.attention_scale, 1.0);
  EXPECT_EQ(d.logits_scaling, 1.0);
  // Another family's config naming one is refused, not ignored; so is a scalar out of range.
  json llama = mistral_7b_config();
  llama["architectures"] = {"LlamaForCausalLM"};
  llama["residual_multiplier"] = 0.22;
  ScratchDir other("arch_granite_keys");
  write_text(other.file("config.json"), llama.dump());
  expect_error_naming([&] { load_hf_model_config(other.str()); }, {"residual_multiplier", "0.22", "GraniteForCausalLM"});
  j["logits_scaling"] = 0;
  write_text(other.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(other.str()); }, {"logits_scaling", "> 0"});
  j["logits_scaling"] = 8;
  j["attention_multiplier"] = -1;
  write_text(other.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(other.str()); }, {"attention_multiplier", "> 0", "-1"});
}

// SmolLM3 (tests/goldens/smollm3-tiny and its GGUF): the NoPE layers from no_rope_layers, from
// no_rope_layer_interval without it, and from llama.cpp's every-fourth rule for the GGUF.
TEST(Architecture, SmolLM3ReadsItsNoRopeLayers) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/smollm3-tiny";
  const std::vector<bool> fourth{false, false, false, true};
  EXPECT_EQ(load_hf_model_config(dir).layer_no_rope, fourth);
  EXPECT_EQ(open_gguf(dir + "/smollm3-tiny.bf16.gguf").config.layer_no_rope, fourth);
  std::ifstream in(dir + "/config.json");
  json j = json::parse(in);
  j["no_rope_layers"] = {0, 1, 0, 1};
  EXPECT_EQ(load_config(j).layer_no_rope, (std::vector<bool>{true, false, true, false}));
  j.erase("no_rope_layers");
  j["no_rope_layer_interval"] = 2;
  EXPECT_EQ(load_config(j).layer_no_rope, (std::vector<bool>{false, true, false, true}));
  ScratchDir bad("arch_no_rope");
  j["no_rope_layers"] = {1, 1, 0};
  write_text(bad.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(bad.str()); }, {"no_rope_layers", "num_hidden_layers (4)"});
  j["no_rope_layers"] = {1, 1, 2, 0};
  write_text(bad.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(bad.str()); }, {"no_rope_layers", "0 (no rope) or 1"});
  json llama = mistral_7b_config();  // another family's config naming the key: refused, not ignored
  llama["architectures"] = {"LlamaForCausalLM"};
  llama["no_rope_layer_interval"] = 4;
  write_text(bad.file("config.json"), llama.dump());
  expect_error_naming([&] { load_hf_model_config(bad.str()); }, {"no_rope_layer_interval", "SmolLM3ForCausalLM"});
}

// GLM-4 (tests/goldens/glm4-tiny and its GGUF): attention_bias means q/k/v biases, half of each
// head rotates (the family's default when config.json names no partial_rotary_factor), sandwich
// norms under its own names, gate/up fused; an FP8 checkpoint is refused (its rows are moved at load).
TEST(Architecture, Glm4ReadsItsLayout) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/glm4-tiny";
  for (const ModelConfig& c : {load_hf_model_config(dir), open_gguf(dir + "/glm4-tiny.bf16.gguf").config}) {
    EXPECT_TRUE(c.attention_bias) << c.source;
    EXPECT_EQ(c.rope_dim(), 8) << c.source;
    EXPECT_FALSE(c.tie_word_embeddings) << c.source;
  }
  const ArchitectureSpec& g = *load_hf_model_config(dir).arch;
  EXPECT_EQ(weight_name(g, WeightFormat::kHuggingFace, WeightRole::kAttnOutputNorm, 1),
            "model.layers.1.post_self_attn_layernorm.weight");
  EXPECT_EQ(weight_name(g, WeightFormat::kHuggingFace, WeightRole::kFfnInputNorm, 1),
            "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(weight_name(g, WeightFormat::kGguf, WeightRole::kFfnOutputNorm, 1), "blk.1.post_ffw_norm.weight");
  std::ifstream in(dir + "/config.json");
  json j = json::parse(in);
  j.erase("partial_rotary_factor");
  j["rope_parameters"].erase("partial_rotary_factor");
  EXPECT_EQ(load_config(j).rope_dim(), 8);  // transformers' Glm4Config default, 0.5
  j["partial_rotary_factor"] = 1.0;
  EXPECT_EQ(load_config(j).rope_dim(), 16);
  j["attention_bias"] = false;
  EXPECT_FALSE(load_config(j).attention_bias);
  j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                              {"weight_block_size", {128, 128}}};
  ScratchDir bad("arch_glm4_fp8");
  write_text(bad.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(bad.str()); }, {"quantization_config", "Glm4ForCausalLM"});
}

// GLM (tests/goldens/glm-tiny and llama.cpp's chatglm file of it): GLM-4's attention and fused gate/up
// without its sandwich norms, in both formats.
TEST(Architecture, GlmReadsItsChatglmGguf) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/glm-tiny";
  for (const ModelConfig& c : {load_hf_model_config(dir), open_gguf(dir + "/glm-tiny.bf16.gguf").config}) {
    EXPECT_STREQ(c.arch->hf_name, "GlmForCausalLM") << c.source;
    EXPECT_TRUE(c.attention_bias) << c.source;
    EXPECT_EQ(c.rope_dim(), 8) << c.source;
    EXPECT_FALSE(c.traits().post_norms) << c.source;
    EXPECT_EQ(c.max_position_embeddings, 512) << c.source;
  }
  const ArchitectureSpec& g = *open_gguf(dir + "/glm-tiny.bf16.gguf").config.arch;
  EXPECT_TRUE(gguf_fuses(g, "blk.{L}.ffn_up"));
  EXPECT_EQ(weight_name(g, WeightFormat::kGguf, WeightRole::kQProj, 1), "blk.1.attn_q.weight");
}

// Seed-OSS and ERNIE 4.5: their bias keys. attention_bias is Seed-OSS's q/k/v biases; an o_proj
// bias (attention_out_bias) or ERNIE's use_bias (every projection) is refused, not ignored.
TEST(Architecture, SeedOssAndErnieBiasKeys) {
  const std::string goldens = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/";
  EXPECT_TRUE(load_hf_model_config(goldens + "seed-oss-tiny").attention_bias);
  EXPECT_TRUE(load_hf_model_config(goldens + "ernie4_5-tiny").tie_word_embeddings);
  EXPECT_TRUE(load_hf_model_config(goldens + "ernie4_5-tiny").traits().hf_rope_interleaved);
  ScratchDir bad("arch_bias_keys");
  for (const auto& [model, key] : {std::pair{"seed-oss-tiny", "attention_out_bias"}, {"ernie4_5-tiny", "use_bias"}}) {
    std::ifstream in(goldens + model + "/config.json");
    json j = json::parse(in);
    j[key] = true;
    write_text(bad.file("config.json"), j.dump());
    expect_error_naming([&] { load_hf_model_config(bad.str()); }, {key, "true"});
  }
}

// OLMo 2 (tests/goldens/olmo2-tiny and its GGUF): no input norms, a norm after each sublayer under
// its own names in both formats, q/k norms over all heads ([nq hd], [nkv hd] in the checkpoint and in
// dummy weights alike).
TEST(Architecture, Olmo2ReadsItsLayout) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/olmo2-tiny";
  for (const ModelConfig& c : {load_hf_model_config(dir), open_gguf(dir + "/olmo2-tiny.bf16.gguf").config}) {
    EXPECT_TRUE(c.qk_norm) << c.source;
    EXPECT_TRUE(c.traits().qk_norm_full_width && c.traits().post_norms && !c.traits().input_norms) << c.source;
    EXPECT_FALSE(c.tie_word_embeddings) << c.source;
  }
  const ModelConfig c = load_hf_model_config(dir);
  const ArchitectureSpec& o = *c.arch;
  const auto hf = WeightFormat::kHuggingFace, gguf = WeightFormat::kGguf;
  for (WeightFormat f : {hf, gguf}) {
    EXPECT_EQ(weight_name(o, f, WeightRole::kAttnInputNorm, 1), "");
    EXPECT_EQ(weight_name(o, f, WeightRole::kFfnInputNorm, 1), "");
  }
  EXPECT_EQ(weight_name(o, hf, WeightRole::kAttnOutputNorm, 1), "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(weight_name(o, hf, WeightRole::kFfnOutputNorm, 1), "model.layers.1.post_feedforward_layernorm.weight");
  EXPECT_EQ(weight_name(o, gguf, WeightRole::kAttnOutputNorm, 1), "blk.1.post_attention_norm.weight");
  EXPECT_EQ(weight_name(o, gguf, WeightRole::kFfnOutputNorm, 1), "blk.1.post_ffw_norm.weight");
  for (const std::unique_ptr<WeightSource>& w : {open_safetensors_dir(dir), make_dummy_weight_source(c, 0)}) {
    EXPECT_EQ(w->get_f32("model.layers.1.self_attn.q_norm.weight", {64}).numel(), 64) << w->describe();
    EXPECT_EQ(w->get_f32("model.layers.1.self_attn.k_norm.weight", {32}).numel(), 32) << w->describe();
    EXPECT_FALSE(w->has("model.layers.0.input_layernorm.weight")) << w->describe();
    EXPECT_TRUE(w->has("model.layers.0.post_feedforward_layernorm.weight")) << w->describe();
  }
}

// OLMoE (tests/goldens/olmoe-tiny and its GGUF): experts intermediate_size wide, every layer sparse,
// the top-k weights renormalised only with norm_topk_prob (a GGUF: never, as llama.cpp's olmoe);
// Qwen3-MoE's width key and clip_qkv (not implemented) refused by name.
TEST(Architecture, OlmoeReadsItsMoeKeys) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/olmoe-tiny";
  for (const ModelConfig& c : {load_hf_model_config(dir), open_gguf(dir + "/olmoe-tiny.bf16.gguf").config}) {
    EXPECT_EQ(c.moe.num_experts, 8) << c.source;
    EXPECT_EQ(c.moe.num_experts_per_tok, 2) << c.source;
    EXPECT_EQ(c.moe.moe_intermediate_size, 32) << c.source;
    EXPECT_FALSE(c.moe.norm_topk_prob) << c.source;
    EXPECT_TRUE(c.moe.is_sparse_layer(0) && c.moe.is_sparse_layer(1)) << c.source;
    EXPECT_TRUE(c.traits().qk_norm_full_width && c.traits().input_norms) << c.source;
  }
  std::ifstream in(dir + "/config.json");
  json j = json::parse(in);
  j["norm_topk_prob"] = true;
  EXPECT_TRUE(load_config(j).moe.norm_topk_prob);
  j["moe_intermediate_size"] = 16;
  expect_error_naming([&] { load_config(j); }, {"moe_intermediate_size", "OLMoE"});
  j.erase("moe_intermediate_size");
  j["clip_qkv"] = 8.0;
  expect_error_naming([&] { load_config(j); }, {"clip_qkv"});
}

// Qwen2-MoE (tests/goldens/qwen2moe-tiny and its GGUF): Qwen3-MoE's keys, a shared expert
// shared_expert_intermediate_size wide (transformers' 5632 where the key is absent; a GGUF's
// expert_shared_feed_forward_length) behind its gate, the top-k weights as norm_topk_prob says (a GGUF:
// never, as llama.cpp's qwen2moe), q/k/v biases unless qkv_bias is false. The dummy source names what
// transformers saved, and the GGUF serves every shared-expert tensor under its HF name, the same values.
TEST(Architecture, Qwen2MoeSharedExpert) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/qwen2moe-tiny";
  const GgufModel gguf = open_gguf(dir + "/qwen2moe-tiny.bf16.gguf");
  for (const ModelConfig& c : {load_hf_model_config(dir), gguf.config}) {
    EXPECT_STREQ(c.arch->hf_name, "Qwen2MoeForCausalLM") << c.source;
    EXPECT_EQ(c.moe.num_experts, 8) << c.source;
    EXPECT_EQ(c.moe.num_experts_per_tok, 2) << c.source;
    EXPECT_EQ(c.moe.moe_intermediate_size, 32) << c.source;
    EXPECT_EQ(c.moe.shared_expert_intermediate_size, 48) << c.source;
    EXPECT_FALSE(c.moe.norm_topk_prob) << c.source;
    EXPECT_TRUE(c.attention_bias) << c.source;
  }
  const ArchitectureSpec& a = find_hf_architecture("Qwen2MoeForCausalLM", "test");
  EXPECT_EQ(&find_gguf_architecture("qwen2moe", "test"), &a);
  const WeightFormat hf = WeightFormat::kHuggingFace, f = WeightFormat::kGguf;
  EXPECT_EQ(weight_name(a, hf, WeightRole::kSharedExpertGate, 1), "model.layers.1.mlp.shared_expert_gate.weight");
  EXPECT_EQ(weight_name(a, f, WeightRole::kSharedExpertGate, 1), "blk.1.ffn_gate_inp_shexp.weight");
  EXPECT_EQ(weight_name(a, hf, WeightRole::kSharedExpertUpProj, 0), "model.layers.0.mlp.shared_expert.up_proj.weight");
  EXPECT_EQ(weight_name(a, f, WeightRole::kSharedExpertDownProj, 0), "blk.0.ffn_down_shexp.weight");
  const ModelConfig c = load_hf_model_config(dir);
  expect_dummy_names_match(c, dir);
  const auto file = open_safetensors_dir(dir);
  auto same = [](const Tensor& x, const Tensor& y) {
    return x.numel() == y.numel() && std::equal(x.ptr<float>(), x.ptr<float>() + x.numel(), y.ptr<float>());
  };
  const std::string gate = "model.layers.1.mlp.shared_expert_gate.weight";
  for (const std::string part : {"gate_proj", "up_proj", "down_proj"}) {
    const std::string name = "model.layers.1.mlp.shared_expert." + part + ".weight";
    EXPECT_EQ(gguf.weights->get_f32(name).shape(), file->get_f32(name).shape()) << name;
    EXPECT_TRUE(same(gguf.weights->get_f32(name), file->get_f32(name))) << name;
  }
  // llama.cpp declares it 1-D ({n_embd}); its converter writes ne [64, 1]: the model takes either.
  EXPECT_EQ(gguf.weights->get_f32(gate).numel(), 64);
  EXPECT_EQ(file->get_f32(gate).shape(), (std::vector<int64_t>{1, 64}));
  EXPECT_TRUE(same(gguf.weights->get_f32(gate), file->get_f32(gate)));
  std::ifstream in(dir + "/config.json");
  json j = json::parse(in);
  j["qkv_bias"] = false;
  EXPECT_FALSE(load_config(j).attention_bias);
  j.erase("shared_expert_intermediate_size");
  EXPECT_EQ(load_config(j).moe.shared_expert_intermediate_size, 5632);
}

// gpt-oss (tests/goldens/gptoss-tiny): attention_bias is q/k/v and o_proj's, sinks, Mixtral's routing
// keys, the clamped activation (its config's hidden_act "silu"), layer_types' windows, yarn untruncated.
// Its stacked, interleaved experts are served per expert: each the right columns of its slice,
// transposed, the biases split alike; the dummy source names the same tensors. MXFP4 is refused.
TEST(Architecture, GptOssReadsItsLayout) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/gptoss-tiny";
  const ModelConfig c = load_hf_model_config(dir);
  EXPECT_TRUE(c.attention_bias && c.o_proj_bias);
  EXPECT_TRUE(c.traits().attention_sinks && c.traits().gpt_oss_experts);
  EXPECT_EQ(c.traits().activation, Activation::kSwigluOai);
  EXPECT_EQ(c.moe.num_experts, 8);
  EXPECT_EQ(c.moe.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe.moe_intermediate_size, 32);
  EXPECT_TRUE(c.moe.norm_topk_prob);  // the softmax over the top-k logits
  EXPECT_TRUE(c.moe.is_sparse_layer(0) && c.moe.is_sparse_layer(1));
  EXPECT_EQ(c.layer_sliding_window, (std::vector<int64_t>{8, 0}));
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_FALSE(c.rope_scaling.truncate);
  const auto file = open_safetensors_dir(dir);
  const auto src = serve_gpt_oss_experts(open_safetensors_dir(dir), c);
  const Tensor gate_up = file->get_f32("model.layers.1.mlp.experts.gate_up_proj");  // [E, H, 2I]
  const Tensor down = file->get_f32("model.layers.1.mlp.experts.down_proj");        // [E, I, H]
  const Tensor gate_up_bias = file->get_f32("model.layers.1.mlp.experts.gate_up_proj_bias");
  const int64_t h = 64, i = 32, e = 5;
  const std::string p = "model.layers.1.mlp.experts.5.";
  const Tensor gate = src->get_f32(p + "gate_proj.weight", {i, h}), up = src->get_f32(p + "up_proj.weight", {i, h});
  const Tensor d = src->get_f32(p + "down_proj.weight", {h, i});
  for (int64_t r = 0; r < i; ++r) {
    for (int64_t col = 0; col < h; ++col) {
      const float* stacked = gate_up.ptr<float>() + (e * h + col) * 2 * i;  // expert e's column col, interleaved
      ASSERT_EQ(gate.ptr<float>()[r * h + col], stacked[2 * r]) << r << "," << col;
      ASSERT_EQ(up.ptr<float>()[r * h + col], stacked[2 * r + 1]) << r << "," << col;
      ASSERT_EQ(d.ptr<float>()[col * i + r], down.ptr<float>()[(e * i + r) * h + col]) << r << "," << col;
    }
  }
  // Kept in the checkpoint's bf16 (exactly: the values went through f32 unchanged).
  EXPECT_EQ(src->stored_dtype(p + "gate_proj.weight"), DType::kBF16);
  const Tensor stored = src->get_stored_slice(p + "gate_proj.weight", {i, h}, 0, 0, i);
  ASSERT_EQ(stored.dtype(), DType::kBF16);
  for (int64_t x = 0; x < i * h; ++x) {
    ASSERT_EQ(bf16_to_f32(static_cast<const uint16_t*>(stored.data())[x]), gate.ptr<float>()[x]) << x;
  }
  const Tensor up_bias = src->get_f32(p + "up_proj.bias", {i});
  for (int64_t r = 0; r < i; ++r) EXPECT_EQ(up_bias.ptr<float>()[r], gate_up_bias.ptr<float>()[e * 2 * i + 2 * r + 1]);
  // A shard: rows [16, 32) of the gate, columns [16, 32) of down.
  const Tensor rows = src->get_f32_slice(p + "gate_proj.weight", {i, h}, 0, 16, 16);
  EXPECT_TRUE(std::equal(rows.ptr<float>(), rows.ptr<float>() + 16 * h, gate.ptr<float>() + 16 * h));
  const Tensor cols = src->get_f32_slice(p + "down_proj.weight", {h, i}, 1, 16, 16);
  for (int64_t r = 0; r < h; ++r) EXPECT_EQ(cols.ptr<float>()[r * 16 + 3], d.ptr<float>()[r * i + 19]);
  // llama.cpp's gpt-oss file of the same checkpoint: the same config and every weight the same values
  // under the same names (its experts' gate and up split apart, biases [E, I]).
  const GgufModel gguf = open_gguf(dir + "/gptoss-tiny.bf16.gguf");
  const ModelConfig& g = gguf.config;
  EXPECT_EQ(g.arch, c.arch);
  EXPECT_TRUE(g.attention_bias && g.o_proj_bias);
  EXPECT_EQ(g.layer_sliding_window, c.layer_sliding_window);
  EXPECT_EQ(g.moe.num_experts, 8);
  EXPECT_EQ(g.moe.num_experts_per_tok, 2);
  EXPECT_EQ(g.moe.moe_intermediate_size, 32);
  EXPECT_TRUE(g.moe.norm_topk_prob);
  EXPECT_EQ(g.rope_scaling.type, "yarn");
  EXPECT_EQ(g.rope_scaling.factor, c.rope_scaling.factor);
  EXPECT_EQ(g.rope_scaling.original_max_position_embeddings, c.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(g.rope_scaling.truncate, c.rope_scaling.truncate);
  EXPECT_EQ(g.rope_scaling.attention_factor, c.rope_scaling.attention_factor);
  EXPECT_EQ(g.rope_theta, c.rope_theta);
  EXPECT_EQ(g.rope_theta_sliding, c.rope_theta_sliding);  // the sliding layers rotate as the full ones
  EXPECT_FLOAT_EQ(g.rms_norm_eps, c.rms_norm_eps);
  std::vector<std::string> from_gguf = gguf.weights->names(), from_hf = src->names();
  std::sort(from_gguf.begin(), from_gguf.end());
  std::sort(from_hf.begin(), from_hf.end());
  EXPECT_EQ(from_gguf, from_hf);
  for (const std::string& name : from_hf) {
    const Tensor a = src->get_f32(name), b = gguf.weights->get_f32(name);
    EXPECT_EQ(a.numel(), b.numel()) << name;
    if (a.numel() == b.numel()) {
      EXPECT_TRUE(std::equal(a.ptr<float>(), a.ptr<float>() + a.numel(), b.ptr<float>())) << name;
    }
  }
  std::vector<std::string> names = make_dummy_weight_source(c, 0)->names(), served = src->names();
  std::sort(names.begin(), names.end());
  std::sort(served.begin(), served.end());
  EXPECT_EQ(names, served);
  std::ifstream in(dir + "/config.json");
  json j = json::parse(in);
  ScratchDir bad("arch_gptoss_mxfp4");
  j["swiglu_limit"] = 7.0;  // the published configs' value
  write_text(bad.file("config.json"), j.dump());
  EXPECT_EQ(load_hf_model_config(bad.str()).moe.num_experts, 8);
  j["swiglu_limit"] = 10.0;
  write_text(bad.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(bad.str()); }, {"swiglu_limit", "10"});
  j["swiglu_limit"] = 7.0;
  j["quantization_config"] = {{"quant_method", "mxfp4"}, {"modules_to_not_convert", {"lm_head"}}};
  write_text(bad.file("config.json"), j.dump());
  EXPECT_EQ(load_hf_model_config(bad.str()).quantization.method, QuantMethod::kMxfp4);
  // MXFP4 blocks are gpt-oss's experts' format: another architecture's config with it is refused.
  std::ifstream llama_in(std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/llama3-tiny/config.json");
  json llama = json::parse(llama_in);
  llama["quantization_config"] = {{"quant_method", "mxfp4"}};
  write_text(bad.file("config.json"), llama.dump());
  expect_error_naming([&] { load_hf_model_config(bad.str()); }, {"mxfp4", "gpt-oss", "LlamaForCausalLM"});
}

// gpt-oss as published (tests/goldens/gptoss-tiny-mxfp4, tools/make_gptoss_mxfp4.py): the experts'
// *_blocks and *_scales served per expert under the bf16 checkpoint's names, stored as ggml's MXFP4
// blocks (which decode to the same values as llama.cpp's GGUF of the same checkpoint), sliced by rows
// or whole blocks of columns.
TEST(Architecture, GptOssMxfp4ExpertsAsPublished) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/gptoss-tiny-mxfp4";
  const ModelConfig c = load_hf_model_config(dir);
  ASSERT_EQ(c.quantization.method, QuantMethod::kMxfp4);
  const auto src = serve_gpt_oss_experts(open_safetensors_dir(dir), c);
  std::vector<std::string> names = make_dummy_weight_source(c, 0)->names(), served = src->names();
  std::sort(names.begin(), names.end());
  std::sort(served.begin(), served.end());
  EXPECT_EQ(names, served);
  const GgufModel gguf = open_gguf(dir + "/gptoss-tiny-mxfp4.gguf");
  const int64_t h = c.hidden_size, i = c.moe.moe_intermediate_size;
  for (const char* part : {"gate_proj", "up_proj", "down_proj"}) {
    const std::string name = std::string("model.layers.1.mlp.experts.5.") + part + ".weight";
    const std::vector<int64_t> shape = std::string(part) == "down_proj" ? std::vector<int64_t>{h, i}
                                                                        : std::vector<int64_t>{i, h};
    EXPECT_EQ(src->stored_dtype(name), DType::kMXFP4) << name;
    const Tensor a = src->get_f32(name, shape), b = gguf.weights->get_f32(name);
    ASSERT_EQ(a.numel(), b.numel()) << name;
    EXPECT_TRUE(std::equal(a.ptr<float>(), a.ptr<float>() + a.numel(), b.ptr<float>())) << name;
    const Tensor whole = src->get_stored_slice(name, shape, 0, 0, shape[0]);
    const Tensor rows = src->get_stored_slice(name, shape, 0, 2, 3);
    const size_t row_bytes = whole.nbytes() / static_cast<size_t>(shape[0]);
    EXPECT_EQ(std::memcmp(rows.data(), static_cast<const uint8_t*>(whole.data()) + 2 * row_bytes, 3 * row_bytes), 0);
    expect_error_naming([&] { src->get_stored_slice(name, shape, 1, 16, 16); }, {name, "32-element MXFP4 blocks"});
  }
}

// GLM-4.5 (tests/goldens/glm4moe-tiny): GLM-4.5's MoE keys (n_routed_experts, n_shared_experts times
// moe_intermediate_size for the one shared MLP, first_k_dense_replace, n_group / topk_group,
// routed_scaling_factor, sigmoid routing), use_qk_norm, q/k/v biases, half of each head rotating. The
// dummy source names what transformers saved (the router's e_score_correction_bias included). Qwen3-MoE's
// keys and use_qk_norm on another row are refused by name.
TEST(Architecture, Glm4MoeKeysAndNames) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/glm4moe-tiny";
  // llama.cpp's glm4moe file carries the same keys (expert_weights_scale, leading_dense_block_count ...).
  for (const ModelConfig& c : {load_hf_model_config(dir), open_gguf(dir + "/glm4moe-tiny.bf16.gguf").config}) {
    EXPECT_STREQ(c.arch->hf_name, "Glm4MoeForCausalLM") << c.source;
    EXPECT_EQ(c.num_layers, 3) << c.source;
    EXPECT_EQ(c.moe.num_experts, 8) << c.source;
    EXPECT_EQ(c.moe.num_experts_per_tok, 2) << c.source;
    EXPECT_EQ(c.moe.moe_intermediate_size, 32) << c.source;
    EXPECT_EQ(c.moe.shared_expert_intermediate_size, 32) << c.source;
    EXPECT_TRUE(c.moe.biased_routing && c.moe.sigmoid_scores && c.moe.norm_topk_prob) << c.source;
    EXPECT_EQ(c.moe.num_groups, 1) << c.source;
    EXPECT_EQ(c.moe.topk_groups, 1) << c.source;
    EXPECT_DOUBLE_EQ(c.moe.routed_scaling_factor, 2.5) << c.source;
    EXPECT_FALSE(c.moe.is_sparse_layer(0)) << c.source;
    EXPECT_TRUE(c.moe.is_sparse_layer(1) && c.moe.is_sparse_layer(2)) << c.source;
    EXPECT_TRUE(c.qk_norm && c.attention_bias) << c.source;
    EXPECT_EQ(c.rope_dim(), 8) << c.source;  // half of head_dim 16
  }
  const ModelConfig c = load_hf_model_config(dir);
  expect_dummy_names_match(c, dir);
  std::ifstream in(dir + "/config.json");
  const json published = json::parse(in);
  json j = published;
  j["n_shared_experts"] = 2;
  j["use_qk_norm"] = false;
  const ModelConfig two = load_config(j);
  EXPECT_EQ(two.moe.shared_expert_intermediate_size, 64);
  EXPECT_FALSE(two.qk_norm);
  for (const char* key : {"num_experts", "decoder_sparse_step", "mlp_only_layers"}) {
    j = published;
    j[key] = 4;
    expect_error_naming([&] { load_config(j); }, {key, "GLM-4.5"});
  }
  j = published;
  j["n_group"] = 2;
  EXPECT_EQ(load_config(j).moe.num_groups, 2);
  j["n_group"] = 3;  // does not divide 8
  expect_error_naming([&] { load_config(j); }, {"n_group", "3"});
  j = published;
  j["routed_scaling_factor"] = 0;
  expect_error_naming([&] { load_config(j); }, {"routed_scaling_factor"});
  std::ifstream qwen(std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/qwen3-tiny/config.json");
  json q = json::parse(qwen);
  q["use_qk_norm"] = true;
  expect_error_naming([&] { load_config(q); }, {"use_qk_norm", "Qwen3ForCausalLM"});
}

// ERNIE 4.5 MoE (tests/goldens/ernie45moe-tiny): moe_num_experts, moe_k, moe_num_shared_experts, the
// sparse layers from moe_layer_start_index to moe_layer_end_index every moe_layer_interval-th, softmax
// scores with a score bias ([1, E] in mlp.moe_statics). Dummy weights name what the checkpoint holds.
TEST(Architecture, Ernie45MoeKeysAndNames) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/ernie45moe-tiny";
  for (const ModelConfig& c : {load_hf_model_config(dir), open_gguf(dir + "/ernie45moe-tiny.bf16.gguf").config}) {
    EXPECT_STREQ(c.arch->hf_name, "Ernie4_5_MoeForCausalLM") << c.source;
    EXPECT_EQ(c.moe.num_experts, 8) << c.source;
    EXPECT_EQ(c.moe.num_experts_per_tok, 2) << c.source;
    EXPECT_EQ(c.moe.shared_expert_intermediate_size, 32) << c.source;
    EXPECT_TRUE(c.moe.biased_routing && !c.moe.sigmoid_scores && c.moe.norm_topk_prob) << c.source;
    EXPECT_FALSE(c.moe.is_sparse_layer(0)) << c.source;
    EXPECT_TRUE(c.moe.is_sparse_layer(1) && c.moe.is_sparse_layer(2)) << c.source;
    EXPECT_TRUE(c.tie_word_embeddings && c.traits().hf_rope_interleaved) << c.source;
  }
  const ModelConfig c = load_hf_model_config(dir);
  expect_dummy_names_match(c, dir);
  EXPECT_EQ(open_safetensors_dir(dir)->get_f32("model.layers.1.mlp.moe_statics.e_score_correction_bias").shape(),
            (std::vector<int64_t>{1, 8}));
  std::ifstream in(dir + "/config.json");
  json j = json::parse(in);
  j["moe_layer_end_index"] = 1;
  j["moe_layer_interval"] = 2;  // (layer + 1) % 2 == 0 within [1, 1]: layer 1 alone
  const ModelConfig one = load_config(j);
  EXPECT_TRUE(!one.moe.is_sparse_layer(0) && one.moe.is_sparse_layer(1) && !one.moe.is_sparse_layer(2));
  j["moe_num_shared_experts"] = 0;
  EXPECT_EQ(load_config(j).moe.shared_expert_intermediate_size, 0);
  j["moe_layer_end_index"] = 3;  // past the 3 layers
  expect_error_naming([&] { load_config(j); }, {"moe_layer_end_index"});
  j["moe_layer_end_index"] = -1;
  j["moe_norm_min"] = 0.5;  // could bind: the best 2 of 8 scores may sum below it
  expect_error_naming([&] { load_config(j); }, {"moe_norm_min"});
  j["moe_norm_min"] = 1e-12;
  j["num_experts"] = 8;
  expect_error_naming([&] { load_config(j); }, {"num_experts", "ERNIE 4.5"});
}

// EXAONE 4 (tests/goldens/exaone4-tiny and its GGUF): with a sliding window its full layers rotate
// nothing; without one (EXAONE-4.0-1.2B: sliding_window null) every layer rotates. The 32B's config
// names its layer kinds as letters (sliding_window_pattern "LLLG") where layer_types is missing.
TEST(Architecture, Exaone4NoRopeOnItsFullLayers) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/exaone4-tiny";
  const std::vector<bool> full = {false, false, false, true};
  for (const ModelConfig& c : {load_hf_model_config(dir), open_gguf(dir + "/exaone4-tiny.bf16.gguf").config}) {
    EXPECT_EQ(c.layer_no_rope, full) << c.source;
    EXPECT_EQ(c.layer_sliding_window, (std::vector<int64_t>{8, 8, 8, 0})) << c.source;
    EXPECT_TRUE(c.qk_norm && !c.traits().qk_norm_full_width && !c.traits().input_norms) << c.source;
  }
  std::ifstream in(dir + "/config.json");
  json j = json::parse(in);
  j.erase("layer_types");
  j["sliding_window_pattern"] = "LLGL";
  ModelConfig c = load_config(j);
  EXPECT_EQ(c.layer_no_rope, (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(c.layer_sliding_window, (std::vector<int64_t>{8, 8, 0, 8}));
  j["sliding_window_pattern"] = "LXG";
  expect_error_naming([&] { load_config(j); }, {"sliding_window_pattern", "LXG"});
  j["sliding_window"] = nullptr;
  j["sliding_window_pattern"] = 0;
  j["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
  c = load_config(j);
  for (bool nope : c.layer_no_rope) EXPECT_FALSE(nope);
  for (int64_t w : c.layer_sliding_window) EXPECT_EQ(w, 0);
}

// Gemma-2-9b-it's published config.json (tools/configs/gemma-2-9b-it.json), written by
// transformers 4.42: a sliding_window and no layer_types, so the family's pattern decides, as 4.x
// transformers' (layer i slides when i is even).
TEST(Architecture, Gemma2PublishedConfigAlternatesSlidingLayers) {
  std::ifstream in(std::string(MINIVLLM_SOURCE_DIR) + "/tools/configs/gemma-2-9b-it.json");
  ASSERT_TRUE(in) << "tools/configs/gemma-2-9b-it.json";
  const ModelConfig c = load_config(json::parse(in));
  ASSERT_EQ(c.layer_sliding_window.size(), 42u);
  for (size_t i = 0; i < 42; ++i) EXPECT_EQ(c.layer_sliding_window[i], i % 2 == 0 ? 4096 : 0) << "layer " << i;
  EXPECT_DOUBLE_EQ(c.attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(c.final_logit_softcapping, 30.0);
}

// Phi-3-mini-4k-instruct's published config.json: Llama-like, every layer sliding over 2,047 keys.
json phi3_mini_config() {
  return json::parse(R"({
    "architectures": ["Phi3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 1,
    "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
    "rope_scaling": null, "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 32064})");
}

TEST(Architecture, Phi3ConfigLoads) {
  json j = phi3_mini_config();
  const ModelConfig c = load_config(j);
  EXPECT_STREQ(c.arch->hf_name, "Phi3ForCausalLM");
  EXPECT_EQ(c.head_dim, 96);
  EXPECT_EQ(c.rope_dim(), 96);
  ASSERT_EQ(c.layer_sliding_window.size(), 32u);
  for (int64_t w : c.layer_sliding_window) EXPECT_EQ(w, 2047);
}

// Phi-4-mini's published rope keys: 3/4 of each head of 128 rotates, longrope over 48 frequencies,
// the top-level original_max_position_embeddings; the attention factor transformers derives from
// max_position_embeddings / original (32: sqrt(1 + ln 32 / ln 4096) = 1.19024).
TEST(Architecture, Phi4MiniPartialRotaryAndLongrope) {
  json j = phi3_mini_config();
  j["hidden_size"] = 3072;
  j["num_attention_heads"] = 24;
  j["num_key_value_heads"] = 8;
  j["max_position_embeddings"] = 131072;
  j["partial_rotary_factor"] = 0.75;
  j["sliding_window"] = 262144;
  std::vector<double> long_factor(48), short_factor(48, 1.0);
  for (size_t i = 0; i < 48; ++i) long_factor[i] = 1.0 + static_cast<double>(i);
  for (const char* type : {"longrope", "su"}) {  // "su": the first Phi-3-128k releases
    j["rope_scaling"] = {{"type", type}, {"long_factor", long_factor}, {"short_factor", short_factor}};
    const ModelConfig c = load_config(j);
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(c.rotary_dim, 96);
    EXPECT_EQ(c.rope_scaling.type, "longrope");
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
    EXPECT_EQ(c.rope_scaling.long_factor, long_factor);
    EXPECT_NEAR(c.rope_scaling.attention_factor, 1.19024, 1e-5);
  }
  // transformers 5's spelling: everything inside rope_parameters, an explicit attention_factor.
  json t5 = j;
  t5.erase("rope_scaling");
  t5.erase("original_max_position_embeddings");
  t5.erase("partial_rotary_factor");
  t5["rope_parameters"] = {{"rope_type", "longrope"}, {"long_factor", long_factor}, {"short_factor", short_factor},
                           {"original_max_position_embeddings", 2048}, {"partial_rotary_factor", 0.75},
                           {"rope_theta", 10000.0}, {"attention_factor", 1.5}};
  const ModelConfig c5 = load_config(t5);
  EXPECT_EQ(c5.rotary_dim, 96);
  EXPECT_EQ(c5.rope_scaling.original_max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c5.rope_scaling.attention_factor, 1.5);
  // One factor per rotary frequency (48 here, not head_dim / 2 = 64).
  ScratchDir dir("arch_phi4");
  j["rope_scaling"]["long_factor"] = std::vector<double>(64, 1.0);
  write_text(dir.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(dir.str()); }, {"long_factor", "96"});
  j.erase("original_max_position_embeddings");
  j["rope_scaling"]["long_factor"] = long_factor;
  write_text(dir.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(dir.str()); }, {"original_max_position_embeddings"});
}

// Phi-3's fused tensors appear by role: q, k, v the row ranges of qkv_proj, gate and up of
// gate_up_proj, whole or in the slices tensor parallelism reads; the fused names are gone.
TEST(Architecture, Phi3FusedWeightsSplitByRole) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/phi3-tiny";
  const ModelConfig c = load_hf_model_config(dir);
  const std::unique_ptr<WeightSource> w = split_fused_weights(open_safetensors_dir(dir), c);
  const std::unique_ptr<WeightSource> raw = open_safetensors_dir(dir);
  const Tensor qkv = raw->get_f32("model.layers.1.self_attn.qkv_proj.weight", {128, 64});  // head_dim 16
  const Tensor gate_up = raw->get_f32("model.layers.0.mlp.gate_up_proj.weight", {256, 64});
  auto expect_rows = [](const Tensor& part, const Tensor& fused, int64_t first_row) {
    const int64_t cols = fused.size(1);
    for (int64_t i = 0; i < part.numel(); ++i) {
      ASSERT_EQ(part.ptr<float>()[i], fused.ptr<float>()[first_row * cols + i]) << i;
    }
  };
  expect_rows(w->get_f32("model.layers.1.self_attn.q_proj.weight", {64, 64}), qkv, 0);
  expect_rows(w->get_f32("model.layers.1.self_attn.k_proj.weight", {32, 64}), qkv, 64);
  expect_rows(w->get_f32("model.layers.1.self_attn.v_proj.weight", {32, 64}), qkv, 96);
  expect_rows(w->get_f32_slice("model.layers.1.self_attn.v_proj.weight", {32, 64}, 0, 16, 16), qkv, 112);
  expect_rows(w->get_f32("model.layers.0.mlp.gate_proj.weight", {128, 64}), gate_up, 0);
  expect_rows(w->get_f32("model.layers.0.mlp.up_proj.weight", {128, 64}), gate_up, 128);
  const Tensor cols = w->get_f32_slice("model.layers.0.mlp.up_proj.weight", {128, 64}, 1, 32, 32);
  ASSERT_EQ(cols.shape(), (std::vector<int64_t>{128, 32}));
  for (int64_t r = 0; r < 128; ++r) {
    for (int64_t k = 0; k < 32; ++k) {
      ASSERT_EQ(cols.ptr<float>()[r * 32 + k], gate_up.ptr<float>()[(128 + r) * 64 + 32 + k]);
    }
  }
  EXPECT_TRUE(w->has("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_FALSE(w->has("model.layers.0.self_attn.qkv_proj.weight"));
  for (const std::string& n : w->names()) EXPECT_EQ(n.find("qkv_proj"), std::string::npos) << n;
  expect_error_naming([&] { w->get_f32("model.layers.0.self_attn.k_proj.weight", {64, 64}); },
                      {"model.layers.0.self_attn.k_proj.weight", "qkv_proj", "expected shape"});
}

}  // namespace
}  // namespace minivllm
