// What the loaders refuse because the engine cannot honour it: config.json features the engine
// does not implement (activation, MLP / o_proj biases, Llama sliding windows, rope variants), GGUF
// metadata of the same kind, tensors whose data overlap or sit off general.alignment, shapes whose
// sizes overflow, and GGUF special-token ids outside the vocabulary. Each error must name the file,
// the key or tensor and the value. The real checkpoints must still load.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "loader/gguf.h"
#include "loader/model_config.h"
#include "loader/safetensors.h"
#include "loader/weight_source.h"
#include "gguf_test_writer.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using nlohmann::json;
using testing::expect_error_naming;
using testing::GgufTestWriter;
using testing::ScratchDir;
using testing::write_bytes;
using testing::write_text;
using W = GgufTestWriter;
namespace fs = std::filesystem;

const std::string kModels = std::string(MINIVLLM_SHARED_DIR) + "/models";
const std::string kGoldens = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens";

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

json qwen3_config() { return read_json(kModels + "/qwen3-0.6b/config.json"); }
json llama_config() { return read_json(kModels + "/llama-3.2-1b-instruct/config.json"); }

// A scratch model directory holding one config.json.
class ConfigDir {
 public:
  explicit ConfigDir(const json& config) : dir_("refuse_cfg") {
    write_text(dir_.file("config.json"), config.dump(2));
  }
  std::string config_path() const { return dir_.file("config.json"); }
  ModelConfig load() const { return load_hf_model_config(dir_.str()); }

 private:
  ScratchDir dir_;
};

// Expects loading `config` to fail with a message naming its config.json and every one of `parts`.
void expect_config_refused(const json& config, std::vector<std::string> parts) {
  ConfigDir d(config);
  parts.push_back(d.config_path());
  expect_error_naming([&] { d.load(); }, parts);
}

void expect_config_loads(const json& config) {
  ConfigDir d(config);
  EXPECT_NO_THROW(d.load()) << config.dump();
}

// ---------------------------------------------------------------------------------------------
// The real configs and checkpoints still load.

TEST(LoaderRefusals, RealConfigsStillLoad) {
  EXPECT_NO_THROW(load_hf_model_config(kModels + "/qwen3-0.6b"));
  EXPECT_NO_THROW(load_hf_model_config(kModels + "/llama-3.2-1b-instruct"));
  int goldens = 0;
  for (const auto& e : fs::directory_iterator(kGoldens)) {
    if (!fs::exists(e.path() / "config.json")) continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW(load_hf_model_config(e.path().string()));
    EXPECT_NO_THROW(open_safetensors_dir(e.path().string()));  // overlap and overflow checks pass
    ++goldens;
  }
  EXPECT_GE(goldens, 3);
  // The Qwen3 configs say sliding_window: null, use_sliding_window: false.
  const json q = qwen3_config();
  EXPECT_TRUE(q.at("sliding_window").is_null());
  EXPECT_FALSE(q.at("use_sliding_window").get<bool>());
}

TEST(LoaderRefusals, RealGgufStillLoads) {
  const GgufModel m = open_gguf(kModels + "/stories260K/stories260K.gguf");
  EXPECT_EQ(m.config.head_dim, 8);  // llama.rope.dimension_count is 8 too
  EXPECT_EQ(m.vocab.bos_token_id, 1);
  EXPECT_EQ(m.vocab.eos_token_id, 2);
  EXPECT_EQ(m.vocab.padding_token_id, -1);  // 0xFFFFFFFF: none
  EXPECT_NO_THROW(m.weights->get_f32("model.embed_tokens.weight"));
}

// ---------------------------------------------------------------------------------------------
// config.json

TEST(LoaderRefusals, HiddenActOtherThanSilu) {
  for (const char* act : {"gelu", "gelu_pytorch_tanh", "relu"}) {
    json j = qwen3_config();
    j["hidden_act"] = act;
    expect_config_refused(j, {"hidden_act", std::string("\"") + act + "\"", "Qwen3ForCausalLM", "\"silu\""});
  }
  json j = llama_config();
  j["hidden_act"] = "swish";
  expect_config_loads(j);
  j.erase("hidden_act");  // absent: the architectures' default, SiLU
  expect_config_loads(j);
  j["hidden_act"] = 3;
  expect_config_refused(j, {"hidden_act", "string"});
}

TEST(LoaderRefusals, LayerCountOutOfRange) {
  for (int64_t n : {int64_t{0}, int64_t{-1}, int64_t{1025}, int64_t{1} << 40}) {
    json j = llama_config();
    j["num_hidden_layers"] = n;
    expect_config_refused(j, {"num_hidden_layers", "[1, 1024]"});
    j["sliding_window"] = 64;  // sized per layer
    expect_config_refused(j, {"num_hidden_layers", "[1, 1024]"});
  }
}

TEST(LoaderRefusals, MlpBias) {
  json j = llama_config();
  ASSERT_FALSE(j.at("mlp_bias").get<bool>());
  j["mlp_bias"] = true;
  expect_config_refused(j, {"mlp_bias", "true"});
  json q = qwen3_config();
  q["mlp_bias"] = true;
  expect_config_refused(q, {"mlp_bias", "true"});
}

TEST(LoaderRefusals, AttentionBiasWithOutputProjectionBias) {
  json j = llama_config();
  j["attention_bias"] = true;
  expect_config_refused(j, {"attention_bias", "true", "LlamaForCausalLM", "o_proj"});
  json q = qwen3_config();
  q["attention_bias"] = true;
  expect_config_refused(q, {"attention_bias", "true", "Qwen3ForCausalLM", "o_proj"});
  // Qwen2's biases are on q/k/v only: served.
  json q2 = qwen3_config();
  q2["architectures"] = {"Qwen2ForCausalLM"};
  q2["attention_bias"] = true;
  EXPECT_TRUE(ConfigDir(q2).load().attention_bias);
}

// The layers' windows (0: full attention) of a config.
std::vector<int64_t> windows_of(const json& config) { return ConfigDir(config).load().layer_sliding_window; }
std::vector<int64_t> windows(int64_t full_layers, int64_t sliding_layers, int64_t window) {
  std::vector<int64_t> w(static_cast<size_t>(full_layers), 0);
  w.resize(static_cast<size_t>(full_layers + sliding_layers), window);
  return w;
}

TEST(LoaderRefusals, QwenSlidingWindow) {
  for (const char* arch : {"Qwen3ForCausalLM", "Qwen2ForCausalLM"}) {
    SCOPED_TRACE(arch);
    json j = qwen3_config();  // 28 layers, max_window_layers 28, max_position_embeddings 40960
    j["architectures"] = {arch};
    j["sliding_window"] = 4096;
    EXPECT_EQ(windows_of(j), windows(28, 0, 0));  // use_sliding_window: false
    j["use_sliding_window"] = true;
    EXPECT_EQ(windows_of(j), windows(28, 0, 0));  // max_window_layers 28: no layer slides
    j["max_window_layers"] = 20;
    EXPECT_EQ(windows_of(j), windows(20, 8, 4096));  // layers 20..27 slide
    j.erase("max_window_layers");  // transformers' default is 28
    EXPECT_EQ(windows_of(j), windows(28, 0, 0));
    j["max_window_layers"] = 0;
    j["sliding_window"] = nullptr;
    EXPECT_EQ(windows_of(j), windows(28, 0, 0));  // no window
    j["sliding_window"] = 40960;
    EXPECT_EQ(windows_of(j), windows(28, 0, 0));  // the window covers every position
    j["sliding_window"] = 40959;
    EXPECT_EQ(windows_of(j), windows(0, 28, 40959));
    j["sliding_window"] = -1;
    expect_config_refused(j, {"sliding_window", ">= 0"});
  }
}

TEST(LoaderRefusals, LlamaStyleSlidingWindow) {
  json j = llama_config();  // max_position_embeddings 131072
  j["sliding_window"] = 4096;
  expect_config_refused(j, {"sliding_window 4096", "131072"});
  j["sliding_window"] = 131072;
  expect_config_loads(j);
  j["sliding_window"] = nullptr;
  expect_config_loads(j);
  j["sliding_window"] = 4096;
  j["use_sliding_window"] = false;
  expect_config_loads(j);
  j["use_sliding_window"] = true;
  expect_config_refused(j, {"sliding_window 4096"});
  j["sliding_window"] = "4096";
  expect_config_refused(j, {"sliding_window", "integer"});
}

TEST(LoaderRefusals, LayerTypes) {
  json j = qwen3_config();
  j["layer_types"] = json::array();
  for (int i = 0; i < 28; ++i) j["layer_types"].push_back(i < 20 ? "full_attention" : "sliding_attention");
  j["sliding_window"] = 4096;
  EXPECT_EQ(windows_of(j), windows(28, 0, 0));  // use_sliding_window: false drops Qwen's window (as HF)
  j["use_sliding_window"] = true;
  EXPECT_EQ(windows_of(j), windows(20, 8, 4096));
  j["layer_types"][3] = "chunked_attention";
  expect_config_refused(j, {"layer_types[3]", "\"chunked_attention\""});
  for (auto& t : j["layer_types"]) t = "full_attention";
  j["use_sliding_window"] = true;  // layer_types decides: every layer is full attention
  j["max_window_layers"] = 0;
  expect_config_loads(j);
  j["layer_types"] = "full_attention";
  expect_config_refused(j, {"layer_types", "list"});
}

TEST(LoaderRefusals, UnknownRopeScaling) {
  // (yarn and linear load: tests/loader/rope_scaling_test.cc; dynamic NTK rescales with each
  // sequence's length, which a cached key cannot follow.)
  for (const char* type : {"dynamic", "ntk", "mrope"}) {
    SCOPED_TRACE(type);
    json j = qwen3_config();
    j["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}};
    expect_config_refused(j, {"rope_scaling", std::string("\"") + type + "\""});
    json k = qwen3_config();
    k["rope_scaling"] = {{"type", type}, {"factor", 4.0}};  // the old spelling of the key
    expect_config_refused(k, {"rope_scaling", std::string("\"") + type + "\""});
    json t5 = qwen3_config();
    t5.erase("rope_scaling");
    t5.erase("rope_theta");
    t5["rope_parameters"] = {{"rope_type", type}, {"factor", 4.0}, {"rope_theta", 1e6}};
    expect_config_refused(t5, {"rope_parameters", std::string("\"") + type + "\""});
  }
  json j = qwen3_config();
  j["rope_scaling"] = {{"factor", 4.0}};
  expect_config_refused(j, {"rope_scaling", "factor", "no rope_type"});
  j["rope_scaling"] = {{"rope_type", "default"}};
  expect_config_loads(j);
  // A partial rotary factor outside (0, 1], or one that rotates an odd number of dims, is refused.
  for (double f : {1.5, 0.0, 0.5 + 1.0 / 128}) {
    j["partial_rotary_factor"] = f;
    expect_config_refused(j, {"partial_rotary_factor"});
  }
  // llama3 is implemented (the Llama-3.2 config uses it).
  EXPECT_EQ(load_hf_model_config(kModels + "/llama-3.2-1b-instruct").rope_scaling.type, "llama3");
}

// ---------------------------------------------------------------------------------------------
// GGUF: a one-layer F32 llama (hidden 32, 2 heads / 1 KV head, head_dim 16, ffn 32, 4 tokens).

constexpr uint64_t kHidden = 32, kHeads = 2, kKvHeads = 1, kHeadDim = 16, kFfn = 32, kVocab = 4;

std::vector<uint8_t> f32_zeros(uint64_t n) { return std::vector<uint8_t>(n * 4, 0); }

struct GgufOptions {
  std::function<void(W&)> metadata = nullptr;  // extra keys
  std::function<void(W&)> tensors = nullptr;   // extra tensors, after the model's
  uint32_t bos = 2, eos = 3, eot = 1;
  uint32_t blocks = 1;  // llama.block_count (the file holds one layer's tensors whatever it says)
  uint64_t alignment = 32;
  const char* arch = "llama";  // general.architecture (the other keys stay llama.*)
  std::vector<std::string> tokens = {"a", "b", "<s>", "</s>"};
};

std::vector<uint8_t> tiny_llama(const GgufOptions& o = {}) {
  W w;
  w.add_string("general.architecture", o.arch);
  if (o.alignment != 32) w.add_scalar("general.alignment", W::U32, uint32_t(o.alignment));
  w.add_scalar("llama.embedding_length", W::U32, uint32_t{kHidden});
  w.add_scalar("llama.block_count", W::U32, o.blocks);
  w.add_scalar("llama.feed_forward_length", W::U32, uint32_t{kFfn});
  w.add_scalar("llama.attention.head_count", W::U32, uint32_t{kHeads});
  w.add_scalar("llama.attention.head_count_kv", W::U32, uint32_t{kKvHeads});
  w.add_scalar("llama.attention.layer_norm_rms_epsilon", W::F32, 1e-5f);
  w.add_scalar("llama.context_length", W::U32, uint32_t{256});
  if (o.metadata) o.metadata(w);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_strings("tokenizer.ggml.tokens", o.tokens);
  w.add_strings("tokenizer.ggml.merges", {"a b"});
  w.add_scalar("tokenizer.ggml.bos_token_id", W::U32, o.bos);
  w.add_scalar("tokenizer.ggml.eos_token_id", W::U32, o.eos);
  w.add_scalar("tokenizer.ggml.eot_token_id", W::U32, o.eot);
  w.add_tensor("token_embd.weight", {kHidden, kVocab}, 0, f32_zeros(kHidden * kVocab));
  w.add_tensor("blk.0.attn_q.weight", {kHidden, kHeads * kHeadDim}, 0, f32_zeros(kHidden * kHeads * kHeadDim));
  w.add_tensor("blk.0.attn_k.weight", {kHidden, kKvHeads * kHeadDim}, 0, f32_zeros(kHidden * kKvHeads * kHeadDim));
  w.add_tensor("blk.0.attn_v.weight", {kHidden, kKvHeads * kHeadDim}, 0, f32_zeros(kHidden * kKvHeads * kHeadDim));
  w.add_tensor("blk.0.attn_output.weight", {kHidden, kHidden}, 0, f32_zeros(kHidden * kHidden));
  w.add_tensor("blk.0.ffn_gate.weight", {kHidden, kFfn}, 0, f32_zeros(kHidden * kFfn));
  w.add_tensor("blk.0.ffn_up.weight", {kHidden, kFfn}, 0, f32_zeros(kHidden * kFfn));
  w.add_tensor("blk.0.ffn_down.weight", {kFfn, kHidden}, 0, f32_zeros(kHidden * kFfn));
  for (const char* n : {"blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"}) {
    w.add_tensor(n, {kHidden}, 0, f32_zeros(kHidden));
  }
  if (o.tensors) o.tensors(w);
  return w.build(o.alignment);
}

// Writes the file and expects open_gguf to fail naming it and every one of `parts`.
void expect_gguf_refused(const std::vector<uint8_t>& bytes, std::vector<std::string> parts) {
  ScratchDir dir("refuse_gguf");
  const std::string path = dir.file("m.gguf");
  write_bytes(path, bytes);
  parts.push_back(path);
  expect_error_naming([&] { open_gguf(path); }, parts);
}

GgufModel open_bytes(const std::vector<uint8_t>& bytes) {
  ScratchDir dir("refuse_gguf_ok");
  write_bytes(dir.file("m.gguf"), bytes);
  return open_gguf(dir.file("m.gguf"));
}

TEST(LoaderRefusals, TinyGgufLoads) {
  const GgufModel m = open_bytes(tiny_llama());
  EXPECT_EQ(m.config.head_dim, static_cast<int64_t>(kHeadDim));
  EXPECT_EQ(m.config.eos_token_ids, (std::vector<int64_t>{3, 1}));
  EXPECT_NO_THROW(m.weights->get_f32("model.layers.0.mlp.down_proj.weight"));
}

// gpt-oss's harmony vocabulary: the file names <|return|> and (as an eot) <|end|>; the reply ends on
// <|return|> and <|call|> (a tool call), not on <|end|> (between its messages), as in llama.cpp.
TEST(LoaderRefusals, GgufHarmonyStopsOnReturnAndCall) {
  const GgufModel m = open_bytes(tiny_llama({.bos = 0, .eos = 1, .eot = 3,
                                             .tokens = {"a", "<|return|>", "<|call|>", "<|end|>"}}));
  EXPECT_EQ(m.config.eos_token_ids, (std::vector<int64_t>{1, 2}));
  // Without <|call|>, <|end|> is an eot like any other.
  const GgufModel plain =
      open_bytes(tiny_llama({.bos = 0, .eos = 1, .eot = 3, .tokens = {"a", "<|return|>", "b", "<|end|>"}}));
  EXPECT_EQ(plain.config.eos_token_ids, (std::vector<int64_t>{1, 3}));
}

TEST(LoaderRefusals, GgufRopeDimensionCount) {
  auto with_rot = [](uint32_t n) {
    return tiny_llama({.metadata = [n](W& w) { w.add_scalar("llama.rope.dimension_count", W::U32, n); }});
  };
  EXPECT_NO_THROW(open_bytes(with_rot(kHeadDim)));
  // Part of each head rotating: the unpermute moves only those rows (loader/rope_rows.h).
  EXPECT_EQ(open_bytes(with_rot(8)).config.rope_dim(), 8);
  expect_gguf_refused(with_rot(7), {"llama.rope.dimension_count", "= 7", "even", "head_dim 16"});
  expect_gguf_refused(with_rot(32), {"llama.rope.dimension_count", "= 32", "head_dim 16"});
}

// Fused q/k/v is read only where the row declares it (phi3); llama.cpp's --fuse-qkv llama is refused.
// Longrope's two factor tensors come together, with their switch.
TEST(LoaderRefusals, GgufFusedQkvAndLongropeFactors) {
  expect_gguf_refused(tiny_llama({.tensors = [](W& w) {
                        w.add_tensor("blk.0.attn_qkv.weight", {kHidden, 4 * kHeadDim}, 0, f32_zeros(kHidden * 64));
                      }}),
                      {"blk.0.attn_qkv.weight", "--fuse-qkv", "llama"});
  const std::vector<uint8_t> ones(4 * kHeadDim / 2, 0);
  expect_gguf_refused(tiny_llama({.tensors = [&](W& w) { w.add_tensor("rope_factors_long.weight", {8}, 0, ones); }}),
                      {"rope_factors_long.weight", "rope_factors_short.weight"});
  expect_gguf_refused(tiny_llama({.tensors = [&](W& w) {
                        w.add_tensor("rope_factors_long.weight", {8}, 0, ones);
                        w.add_tensor("rope_factors_short.weight", {8}, 0, ones);
                      }}),
                      {"llama.rope.scaling.original_context_length"});
}

TEST(LoaderRefusals, GgufRopeScalingSlidingWindowExperts) {
  auto with = [](std::function<void(W&)> f) { return tiny_llama({.metadata = std::move(f)}); };
  EXPECT_NO_THROW(open_bytes(with([](W& w) { w.add_string("llama.rope.scaling.type", "none"); })));
  expect_gguf_refused(with([](W& w) { w.add_string("llama.rope.scaling.type", "dynamic"); }),
                      {"llama.rope.scaling.type", "\"dynamic\""});
  expect_gguf_refused(with([](W& w) { w.add_string("llama.rope.scaling.type", "longrope"); }),
                      {"llama.rope.scaling.type", "rope_factors_long.weight"});
  // yarn as llama.cpp reads it (tests/goldens/qwen3-tiny-yarn's GGUF runs it end to end): the
  // factor, the pretrained length, the betas, yarn_log_multiplier and attn_factor in the cos/sin scale.
  const auto yarn = [&](std::function<void(W&)> more) {
    return with([more](W& w) {
      w.add_string("llama.rope.scaling.type", "yarn");
      w.add_scalar("llama.rope.scaling.factor", W::F32, 4.0f);
      w.add_scalar("llama.rope.scaling.original_context_length", W::U32, uint32_t{64});
      if (more) more(w);
    });
  };
  const RopeScaling plain = open_bytes(yarn(nullptr)).config.rope_scaling;
  EXPECT_EQ(plain.type, "yarn");
  EXPECT_DOUBLE_EQ(plain.factor, 4.0);
  EXPECT_EQ(plain.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(plain.beta_fast, 32.0);
  EXPECT_NEAR(plain.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-9);
  const RopeScaling tuned = open_bytes(yarn([](W& w) {
                              w.add_scalar("llama.rope.scaling.yarn_beta_fast", W::F32, 16.0f);
                              w.add_scalar("llama.rope.scaling.yarn_log_multiplier", W::F32, 0.5f);
                              w.add_scalar("llama.rope.scaling.attn_factor", W::F32, 2.0f);
                            })).config.rope_scaling;
  EXPECT_DOUBLE_EQ(tuned.beta_fast, 16.0);
  EXPECT_NEAR(tuned.attention_factor, 2.0 * (0.1 * std::log(4.0) + 1.0) / (0.05 * std::log(4.0) + 1.0), 1e-6);
  expect_gguf_refused(yarn([](W& w) { w.add_scalar("llama.rope.scaling.yarn_ext_factor", W::F32, 0.5f); }),
                      {"llama.rope.scaling.yarn_ext_factor"});
  expect_gguf_refused(with([](W& w) {
                        w.add_string("llama.rope.scaling.type", "linear");
                        w.add_scalar("llama.rope.scaling.factor", W::F32, 0.0f);
                      }),
                      {"llama.rope.scaling.factor"});
  EXPECT_EQ(open_bytes(with([](W& w) {
              w.add_string("llama.rope.scaling.type", "linear");
              w.add_scalar("llama.rope.scaling.factor", W::F32, 2.0f);
            })).config.max_context_length(),
            512);  // context_length 256 x 2
  // A window that binds (context_length 256) slides every layer; one that does not, none.
  const GgufModel swa =
      open_bytes(with([](W& w) { w.add_scalar("llama.attention.sliding_window", W::U32, uint32_t{64}); }));
  for (int64_t w : swa.config.layer_sliding_window) EXPECT_EQ(w, 64);
  const GgufModel full =
      open_bytes(with([](W& w) { w.add_scalar("llama.attention.sliding_window", W::U32, uint32_t{256}); }));
  for (int64_t w : full.config.layer_sliding_window) EXPECT_EQ(w, 0);
  // A llama file with experts is Mixtral's (tests/goldens/mixtral-tiny): it needs their keys.
  expect_gguf_refused(with([](W& w) { w.add_scalar("llama.expert_count", W::U32, uint32_t{8}); }),
                      {"llama.expert_used_count"});
  EXPECT_NO_THROW(open_bytes(with([](W& w) { w.add_scalar("llama.expert_count", W::U32, uint32_t{0}); })));
}

// ---------------------------------------------------------------------------------------------
// GGUF qwen3moe: one layer of the llama above's attention with q/k norms, a router and 4 experts
// of width 32 (top 2), each role's experts one 3-D tensor, F32 or Q8_0 (blocks of 32 along ne[0]).

constexpr uint64_t kExperts = 4, kExpertFfn = 32;

struct MoeOptions {
  std::function<void(W&)> metadata = nullptr;
  std::function<void(W&)> tensors = nullptr;
  uint32_t expert_count = kExperts;    // qwen3moe.expert_count
  uint64_t experts_stored = kExperts;  // ne[2] of the expert tensors
  bool q8_0 = false;
  bool width_key = true;  // qwen3moe.expert_feed_forward_length
};

// Element (r, c) of expert e's matrix: small multiples of 0.5, different for each expert.
float expert_value(uint64_t e, uint64_t r, uint64_t c) {
  return 0.5f * static_cast<float>(static_cast<int>((e * 7 + r * 3 + c) % 17) - 8);
}

// n experts' [rows, cols] matrices stacked (GGUF ne {cols, rows, n}), as F32 or as Q8_0 blocks of
// scale 0.5 (f16 0x3800) and codes 2 x value.
std::vector<uint8_t> expert_bytes(uint64_t n, uint64_t rows, uint64_t cols, bool q8_0) {
  std::vector<uint8_t> out;
  for (uint64_t e = 0; e < n; ++e) {
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t c = 0; c < cols; ++c) {
        const float v = expert_value(e, r, c);
        if (!q8_0) {
          const auto* b = reinterpret_cast<const uint8_t*>(&v);
          out.insert(out.end(), b, b + 4);
          continue;
        }
        if (c % 32 == 0) out.insert(out.end(), {0x00, 0x38});
        out.push_back(static_cast<uint8_t>(static_cast<int8_t>(2 * v)));
      }
    }
  }
  return out;
}

std::vector<uint8_t> tiny_qwen3moe(const MoeOptions& o = {}) {
  W w;
  w.add_string("general.architecture", "qwen3moe");
  w.add_scalar("qwen3moe.embedding_length", W::U32, uint32_t{kHidden});
  w.add_scalar("qwen3moe.block_count", W::U32, uint32_t{1});
  w.add_scalar("qwen3moe.feed_forward_length", W::U32, uint32_t{2 * kExpertFfn});
  w.add_scalar("qwen3moe.attention.head_count", W::U32, uint32_t{kHeads});
  w.add_scalar("qwen3moe.attention.head_count_kv", W::U32, uint32_t{kKvHeads});
  w.add_scalar("qwen3moe.attention.key_length", W::U32, uint32_t{kHeadDim});
  w.add_scalar("qwen3moe.attention.layer_norm_rms_epsilon", W::F32, 1e-6f);
  w.add_scalar("qwen3moe.context_length", W::U32, uint32_t{256});
  w.add_scalar("qwen3moe.expert_count", W::U32, o.expert_count);
  w.add_scalar("qwen3moe.expert_used_count", W::U32, uint32_t{2});
  if (o.width_key) w.add_scalar("qwen3moe.expert_feed_forward_length", W::U32, uint32_t{kExpertFfn});
  if (o.metadata) o.metadata(w);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_strings("tokenizer.ggml.tokens", {"a", "b", "<s>", "</s>"});
  w.add_strings("tokenizer.ggml.merges", {"a b"});
  w.add_scalar("tokenizer.ggml.eos_token_id", W::U32, uint32_t{3});
  w.add_tensor("token_embd.weight", {kHidden, kVocab}, 0, f32_zeros(kHidden * kVocab));
  w.add_tensor("blk.0.attn_q.weight", {kHidden, kHeads * kHeadDim}, 0, f32_zeros(kHidden * kHeads * kHeadDim));
  w.add_tensor("blk.0.attn_k.weight", {kHidden, kKvHeads * kHeadDim}, 0, f32_zeros(kHidden * kKvHeads * kHeadDim));
  w.add_tensor("blk.0.attn_v.weight", {kHidden, kKvHeads * kHeadDim}, 0, f32_zeros(kHidden * kKvHeads * kHeadDim));
  w.add_tensor("blk.0.attn_output.weight", {kHeads * kHeadDim, kHidden}, 0, f32_zeros(kHidden * kHeads * kHeadDim));
  w.add_tensor("blk.0.attn_q_norm.weight", {kHeadDim}, 0, f32_zeros(kHeadDim));
  w.add_tensor("blk.0.attn_k_norm.weight", {kHeadDim}, 0, f32_zeros(kHeadDim));
  w.add_tensor("blk.0.ffn_gate_inp.weight", {kHidden, kExperts}, 0, f32_zeros(kHidden * kExperts));
  const uint32_t type = o.q8_0 ? 8 : 0;
  const uint64_t n = o.experts_stored;
  w.add_tensor("blk.0.ffn_gate_exps.weight", {kHidden, kExpertFfn, n}, type, expert_bytes(n, kExpertFfn, kHidden, o.q8_0));
  w.add_tensor("blk.0.ffn_up_exps.weight", {kHidden, kExpertFfn, n}, type, expert_bytes(n, kExpertFfn, kHidden, o.q8_0));
  w.add_tensor("blk.0.ffn_down_exps.weight", {kExpertFfn, kHidden, n}, type, expert_bytes(n, kHidden, kExpertFfn, o.q8_0));
  for (const char* name : {"blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"}) {
    w.add_tensor(name, {kHidden}, 0, f32_zeros(kHidden));
  }
  if (o.tensors) o.tensors(w);
  return w.build();
}

TEST(GgufQwen3Moe, TinyFileLoads) {
  for (const bool width_key : {true, false}) {  // absent: feed_forward_length / expert_used_count, as llama.cpp
    const GgufModel m = open_bytes(tiny_qwen3moe({.width_key = width_key}));
    const ModelConfig& c = m.config;
    EXPECT_STREQ(c.arch->hf_name, "Qwen3MoeForCausalLM");
    EXPECT_EQ(c.moe.num_experts, static_cast<int64_t>(kExperts));
    EXPECT_EQ(c.moe.num_experts_per_tok, 2);
    EXPECT_EQ(c.moe.moe_intermediate_size, static_cast<int64_t>(kExpertFfn));
    EXPECT_TRUE(c.moe.norm_topk_prob);
    EXPECT_TRUE(c.moe.is_sparse_layer(0));
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(m.weights->get_f32("model.layers.0.mlp.gate.weight").shape(),
              (std::vector<int64_t>{kExperts, kHidden}));
    for (const std::string& name : m.weights->names()) EXPECT_EQ(name.find("_exps"), std::string::npos) << name;
    expect_error_naming([&] { m.weights->get_f32("model.layers.0.mlp.experts.4.up_proj.weight"); },
                        {"experts.4.up_proj", "not found"});
  }
}

// Each expert's matrix is its own part of the 3-D tensor, whole, as a row or column slice, and as
// the stored Q8_0 blocks (the block types of the dense weights serve the experts the same way).
TEST(GgufQwen3Moe, ExpertsSliceByExpert) {
  for (const bool q8_0 : {false, true}) {
    SCOPED_TRACE(q8_0 ? "Q8_0" : "F32");
    const GgufModel m = open_bytes(tiny_qwen3moe({.q8_0 = q8_0}));
    const WeightSource& w = *m.weights;
    auto expect_part = [&](const Tensor& t, uint64_t e, uint64_t row0, uint64_t col0) {
      const int64_t rows = t.size(0), cols = t.size(1);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          ASSERT_EQ(t.ptr<float>()[r * cols + c], expert_value(e, row0 + r, col0 + c)) << "expert " << e << " " << r
                                                                                        << ", " << c;
        }
      }
    };
    for (uint64_t e = 0; e < kExperts; ++e) {
      const std::string prefix = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
      expect_part(w.get_f32(prefix + "gate_proj.weight", {kExpertFfn, kHidden}), e, 0, 0);
      expect_part(w.get_f32(prefix + "up_proj.weight", {kExpertFfn, kHidden}), e, 0, 0);
      expect_part(w.get_f32(prefix + "down_proj.weight", {kHidden, kExpertFfn}), e, 0, 0);
      expect_part(w.get_f32_slice(prefix + "gate_proj.weight", {kExpertFfn, kHidden}, 0, 16, 16), e, 16, 0);
      expect_part(w.get_f32_slice(prefix + "down_proj.weight", {kHidden, kExpertFfn}, 0, 8, 24), e, 8, 0);
    }
    if (!q8_0) {  // a column slice of F32 (Q8_0's rows here are one block: whole rows only)
      expect_part(w.get_f32_slice("model.layers.0.mlp.experts.2.down_proj.weight", {kHidden, kExpertFfn}, 1, 16, 16),
                  2, 0, 16);
      continue;
    }
    expect_error_naming(
        [&] { w.get_f32_slice("model.layers.0.mlp.experts.2.down_proj.weight", {kHidden, kExpertFfn}, 1, 16, 16); },
        {"experts.2.down_proj", "ffn_down_exps", "expert 2", "Q8_0", "block boundary"});
    EXPECT_EQ(w.stored_dtype("model.layers.0.mlp.experts.3.up_proj.weight"), DType::kQ8_0);
    const Tensor stored = w.get_stored_slice("model.layers.0.mlp.experts.3.up_proj.weight", {kExpertFfn, kHidden}, 0,
                                             0, kExpertFfn);
    const std::vector<uint8_t> all = expert_bytes(kExperts, kExpertFfn, kHidden, true);
    const size_t per_expert = all.size() / kExperts;
    ASSERT_EQ(stored.nbytes(), per_expert);
    EXPECT_EQ(std::memcmp(stored.data(), all.data() + 3 * per_expert, per_expert), 0);
  }
}

// What llama.cpp's qwen3moe cannot say, or says otherwise than minivllm computes: refused by name.
TEST(GgufQwen3Moe, Refusals) {
  expect_gguf_refused(tiny_qwen3moe({.tensors = [](W& w) {
                        w.add_tensor("blk.0.ffn_gate.weight", {kHidden, kFfn}, 0, f32_zeros(kHidden * kFfn));
                      }}),
                      {"blk.0.ffn_gate.weight", "dense MLP", "qwen3moe", "safetensors"});
  expect_gguf_refused(tiny_qwen3moe({.experts_stored = 3}),
                      {"blk.0.ffn_gate_exps.weight", "4 experts", "qwen3moe.expert_count", "[32, 32, 3]"});
  expect_gguf_refused(
      tiny_qwen3moe({.metadata = [](W& w) { w.add_scalar("qwen3moe.expert_weights_norm", W::BOOL, uint8_t{0}); }}),
      {"qwen3moe.expert_weights_norm", "= false", "renormalises"});
  EXPECT_NO_THROW(open_bytes(
      tiny_qwen3moe({.metadata = [](W& w) { w.add_scalar("qwen3moe.expert_weights_norm", W::BOOL, uint8_t{1}); }})));
  expect_gguf_refused(
      tiny_qwen3moe({.metadata = [](W& w) { w.add_scalar("qwen3moe.expert_gating_func", W::U32, uint32_t{2}); }}),
      {"qwen3moe.expert_gating_func", "= 2", "softmax"});
  expect_gguf_refused(
      tiny_qwen3moe({.metadata = [](W& w) { w.add_scalar("qwen3moe.expert_weights_scale", W::F32, 2.5f); }}),
      {"qwen3moe.expert_weights_scale", "= 2.5"});
  expect_gguf_refused(tiny_qwen3moe({.expert_count = 0}), {"qwen3moe.expert_count", "> 0"});
}

// A corrupt layer count is refused before anything is sized from it (the fuzzer's 5 GB
// allocation for the per-layer sliding-window table).
TEST(LoaderRefusals, GgufLayerCountOutOfRange) {
  for (uint32_t n : {0u, 1025u, 0x7FFFFFFFu, 0xFFFFFFFFu}) {
    expect_gguf_refused(tiny_llama({.blocks = n}), {"num_hidden_layers", "[1, 1024]"});
    expect_gguf_refused(tiny_llama({.metadata = [](W& w) {
                                      w.add_scalar("llama.attention.sliding_window", W::U32, uint32_t{64});
                                    },
                                    .blocks = n}),
                        {"num_hidden_layers", "[1, 1024]"});
  }
}

TEST(LoaderRefusals, GgufBiasesWithoutAPlace) {
  for (const char* name : {"blk.0.attn_output.bias", "blk.0.ffn_up.bias", "blk.0.ffn_gate.bias",
                           "blk.0.ffn_down.bias"}) {
    const uint64_t n = std::string(name) == "blk.0.ffn_down.bias" ? kHidden : kFfn;
    expect_gguf_refused(tiny_llama({.tensors = [&](W& w) { w.add_tensor(name, {n}, 0, f32_zeros(n)); }}),
                        {std::string("'") + name + "'", "bias"});
  }
}

TEST(LoaderRefusals, GgufSpecialTokenOutsideVocabulary) {
  expect_gguf_refused(tiny_llama({.bos = 7}), {"tokenizer.ggml.bos_token_id", "= 7", "4 tokens"});
  expect_gguf_refused(tiny_llama({.eos = 4}), {"tokenizer.ggml.eos_token_id", "= 4", "4 tokens"});
  expect_gguf_refused(tiny_llama({.eot = 100000}), {"tokenizer.ggml.eot_token_id", "= 100000", "4 tokens"});
  // 0xFFFFFFFF still means "no token".
  const GgufModel m = open_bytes(tiny_llama({.bos = 0xFFFFFFFFu}));
  EXPECT_EQ(m.vocab.bos_token_id, -1);
  EXPECT_EQ(m.config.bos_token_id, -1);
  // The vocabulary reader used by the tokenizer refuses them as well.
  ScratchDir dir("refuse_vocab");
  write_bytes(dir.file("m.gguf"), tiny_llama({.eos = 9}));
  const GgufFile f(dir.file("m.gguf"));
  expect_error_naming([&] { read_gguf_vocab(f); }, {"tokenizer.ggml.eos_token_id", "= 9", "4 tokens", f.path()});
}

TEST(LoaderRefusals, GgufOverlappingTensors) {
  // An extra tensor placed over the data of the first (token_embd.weight at offset 0).
  expect_gguf_refused(
      tiny_llama({.tensors = [](W& w) { w.add_tensor_at("extra.weight", {kHidden}, 0, f32_zeros(kHidden), 64); }}),
      {"overlap", "'token_embd.weight'", "'extra.weight'", "[64, 192)", "[0, 512)"});
  // Same start, both of them.
  expect_gguf_refused(
      tiny_llama({.tensors = [](W& w) { w.add_tensor_at("extra.weight", {kHidden}, 0, f32_zeros(kHidden), 0); }}),
      {"overlap", "'token_embd.weight'", "'extra.weight'"});
  // Apart is fine.
  const GgufModel m = open_bytes(tiny_llama(
      {.tensors = [](W& w) { w.add_tensor_at("extra.weight", {kHidden}, 0, f32_zeros(kHidden), 1u << 16); }}));
  EXPECT_TRUE(m.weights->has("extra.weight"));
}

TEST(LoaderRefusals, GgufDuplicateTensorName) {
  expect_gguf_refused(
      tiny_llama({.tensors = [](W& w) { w.add_tensor("output_norm.weight", {kHidden}, 0, f32_zeros(kHidden)); }}),
      {"'output_norm.weight'", "twice"});
}

TEST(LoaderRefusals, GgufMisalignedTensorData) {
  // 16 is not a multiple of the default alignment, 32.
  std::vector<uint8_t> bytes =
      tiny_llama({.tensors = [](W& w) { w.add_tensor_at("extra.weight", {4}, 0, f32_zeros(4), (1u << 16) + 16); }});
  expect_gguf_refused(bytes, {"'extra.weight'", "data offset 65552", "general.alignment 32"});
  // With general.alignment 16 the same offset is aligned.
  EXPECT_NO_THROW(open_bytes(tiny_llama(
      {.tensors = [](W& w) { w.add_tensor_at("extra.weight", {4}, 0, f32_zeros(4), (1u << 16) + 16); },
       .alignment = 16})));
  // ...but not with 64.
  expect_gguf_refused(
      tiny_llama({.tensors = [](W& w) { w.add_tensor_at("extra.weight", {4}, 0, f32_zeros(4), (1u << 16) + 32); },
                  .alignment = 64}),
      {"'extra.weight'", "data offset 65568", "general.alignment 64"});
}

TEST(LoaderRefusals, GgufSizeOverflow) {
  // Element count past int64.
  expect_gguf_refused(
      tiny_llama({.tensors = [](W& w) { w.add_tensor("huge.weight", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, {}); }}),
      {"'huge.weight'", "element count overflows", "4294967296"});
  // A dimension past int64.
  expect_gguf_refused(
      tiny_llama({.tensors = [](W& w) { w.add_tensor("huge.weight", {uint64_t{1} << 63}, 0, {}); }}),
      {"'huge.weight'", "overflows", "9223372036854775808"});
  // Element count fits, bytes do not: 2^62 F32 elements.
  expect_gguf_refused(
      tiny_llama({.tensors = [](W& w) { w.add_tensor("huge.weight", {uint64_t{1} << 62}, 0, {}); }}),
      {"'huge.weight'", "F32", "byte size", "overflows"});
  // Fits in every integer, not in the file.
  expect_gguf_refused(
      tiny_llama({.tensors = [](W& w) { w.add_tensor("huge.weight", {uint64_t{1} << 40}, 0, {}); }}),
      {"'huge.weight'", "truncated"});
}

// ---------------------------------------------------------------------------------------------
// safetensors

std::vector<uint8_t> handmade(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8 + header.size() + data_bytes, 0);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

void expect_safetensors_refused(const std::string& header, size_t data_bytes, std::vector<std::string> parts) {
  ScratchDir dir("refuse_st");
  const std::string path = dir.file("model.safetensors");
  write_bytes(path, handmade(header, data_bytes));
  parts.push_back(path);
  expect_error_naming([&] { SafetensorsFile f(path); }, parts);
  expect_error_naming([&] { open_safetensors_dir(dir.str()); }, parts);
}

TEST(LoaderRefusals, SafetensorsOverlappingTensors) {
  expect_safetensors_refused(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
      24, {"overlap", "'a'", "'b'", "[0, 16]", "[8, 24]"});
  // One inside the other, listed the other way round; different dtypes.
  expect_safetensors_refused(
      R"({"inner":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]},)"
      R"("outer":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
      16, {"overlap", "'inner'", "'outer'"});
  // The same range twice.
  expect_safetensors_refused(
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("y":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      8, {"overlap", "'x'", "'y'"});
  // Adjacent ranges and empty tensors are fine.
  ScratchDir dir("refuse_st_ok");
  const std::string path = dir.file("model.safetensors");
  write_bytes(path, handmade(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                             16));
  SafetensorsFile f(path);
  EXPECT_EQ(f.names().size(), 3u);
}

TEST(LoaderRefusals, SafetensorsSizeOverflow) {
  // Element count past int64.
  expect_safetensors_refused(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0,
                             {"'w'", "element count", "overflows"});
  // Element count fits, bytes do not: 2^62 F32 elements.
  expect_safetensors_refused(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0,
                             {"'w'", "F32", "byte size overflows"});
  // A dimension past int64.
  expect_safetensors_refused(R"({"w":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}})", 0,
                             {"'w'", "shape", "9223372036854775808"});
}

}  // namespace
}  // namespace minivllm
