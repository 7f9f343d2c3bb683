// load_hf_model_config on the real Qwen3-0.6B and Llama-3.2-1B configs, on transformers-5 and
// Qwen2 spellings, and on broken files whose errors must name the key and the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loader/model_config.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using nlohmann::json;
using testing::expect_error_naming;
using testing::ScratchDir;
using testing::write_text;

const std::string kModels = std::string(MINIVLLM_SHARED_DIR) + "/models";

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(ModelConfig, Qwen3RealConfig) {
  const ModelConfig c = load_hf_model_config(kModels + "/qwen3-0.6b");
  EXPECT_STREQ(c.arch->hf_name, "Qwen3ForCausalLM");
  EXPECT_EQ(c.arch_name, "Qwen3ForCausalLM");
  EXPECT_EQ(c.num_layers, 28);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // not hidden / heads = 64: Qwen3 says so explicitly
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, "");
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.bos_token_id, 151643);
  // config.json says 151645; generation_config.json adds 151643.
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
}

TEST(ModelConfig, Llama32RealConfig) {
  const ModelConfig c = load_hf_model_config(kModels + "/llama-3.2-1b-instruct");
  EXPECT_STREQ(c.arch->hf_name, "LlamaForCausalLM");
  EXPECT_EQ(c.num_layers, 16);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));  // merged without duplicates
}

// A scratch model dir holding `config` (and optionally a generation config).
class ConfigDir {
 public:
  explicit ConfigDir(const json& config, const json* generation = nullptr) : dir_("config") {
    write_text(dir_.file("config.json"), config.dump(2));
    if (generation) write_text(dir_.file("generation_config.json"), generation->dump());
  }
  const std::string str() const { return dir_.str(); }
  ModelConfig load() const { return load_hf_model_config(dir_.str()); }

 private:
  ScratchDir dir_;
};

json qwen3_config() { return read_json(kModels + "/qwen3-0.6b/config.json"); }

TEST(ModelConfig, Transformers5Spelling) {
  json j = read_json(kModels + "/llama-3.2-1b-instruct/config.json");
  j["rope_parameters"] = j["rope_scaling"];
  j["rope_parameters"]["rope_theta"] = 500000.0;
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "float16";
  j["head_dim"] = nullptr;
  j["eos_token_id"] = 128009;
  const ModelConfig c = ConfigDir(j).load();
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.torch_dtype, "float16");
  EXPECT_EQ(c.head_dim, 2048 / 32);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128009}));
}

TEST(ModelConfig, DefaultRopeTypeMeansNone) {
  json j = qwen3_config();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000}};
  const ModelConfig c = ConfigDir(j).load();
  EXPECT_EQ(c.rope_scaling.type, "");
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
}

TEST(ModelConfig, Qwen2DefaultsAndEosMerge) {
  json j = qwen3_config();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j.erase("head_dim");
  j.erase("attention_bias");
  j.erase("num_key_value_heads");
  j.erase("tie_word_embeddings");
  j["eos_token_id"] = {151645, 151643};
  json gen = {{"eos_token_id", {151643, 151644}}};
  const ModelConfig c = ConfigDir(j, &gen).load();
  EXPECT_STREQ(c.arch->hf_name, "Qwen2ForCausalLM");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.num_kv_heads, 16);  // defaults to the number of heads
  EXPECT_EQ(c.head_dim, 64);      // hidden / heads
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643, 151644}));
}

TEST(ModelConfig, MissingKeyNamesKeyAndFile) {
  json j = qwen3_config();
  j.erase("num_attention_heads");
  ConfigDir d(j);
  expect_error_naming([&] { d.load(); }, {"config.json", "num_attention_heads", d.str()});
}

TEST(ModelConfig, NonPositiveValuesNamed) {
  for (const char* key : {"num_attention_heads", "hidden_size", "num_hidden_layers", "intermediate_size",
                          "num_key_value_heads", "vocab_size", "max_position_embeddings"}) {
    json j = qwen3_config();
    j[key] = 0;
    ConfigDir d(j);
    // The layer count is checked against its range before per-layer tables are sized from it.
    const std::string want = std::string(key) == "num_hidden_layers" ? " must be in [1, " : " must be > 0";
    expect_error_naming([&] { d.load(); }, {std::string("config.json: ") + key + want});
  }
  json j = qwen3_config();
  j["rms_norm_eps"] = -1.0;
  ConfigDir d(j);
  expect_error_naming([&] { d.load(); }, {"config.json", "rms_norm_eps"});
}

TEST(ModelConfig, HeadsNotDivisibleByKvHeads) {
  json j = qwen3_config();
  j["num_key_value_heads"] = 3;
  ConfigDir d(j);
  expect_error_naming([&] { d.load(); }, {"config.json", "num_attention_heads", "num_key_value_heads"});
}

TEST(ModelConfig, WrongTypeNamesKey) {
  json j = qwen3_config();
  j["hidden_size"] = "1024";
  ConfigDir d(j);
  expect_error_naming([&] { d.load(); }, {"config.json", "hidden_size", "integer"});
}

TEST(ModelConfig, UnsupportedArchitectureAndRope) {
  json j = qwen3_config();
  j["architectures"] = {"MambaForCausalLM"};
  ConfigDir d(j);
  expect_error_naming([&] { d.load(); }, {"config.json", "MambaForCausalLM"});
  json k = qwen3_config();
  k["rope_scaling"] = {{"type", "dynamic"}, {"factor", 4.0}};
  ConfigDir e(k);
  expect_error_naming([&] { e.load(); }, {"config.json", "rope_scaling", "dynamic"});
  json l = read_json(kModels + "/llama-3.2-1b-instruct/config.json");
  l["rope_scaling"].erase("low_freq_factor");
  ConfigDir f(l);
  expect_error_naming([&] { f.load(); }, {"config.json", "low_freq_factor"});
}

TEST(ModelConfig, MissingDirFileAndMalformedJson) {
  expect_error_naming([] { load_hf_model_config("/nonexistent/model/dir"); }, {"/nonexistent/model/dir"});
  ScratchDir empty("config_empty");
  expect_error_naming([&] { load_hf_model_config(empty.str()); }, {empty.file("config.json")});
  write_text(empty.file("config.json"), "{\"hidden_size\": 1024,");
  expect_error_naming([&] { load_hf_model_config(empty.str()); }, {empty.file("config.json"), "malformed JSON"});
  write_text(empty.file("config.json"), qwen3_config().dump());
  write_text(empty.file("generation_config.json"), "[1, 2");
  expect_error_naming([&] { load_hf_model_config(empty.str()); }, {empty.file("generation_config.json")});
}

TEST(ModelConfig, ValidateNamesSource) {
  ModelConfig c = load_hf_model_config(kModels + "/qwen3-0.6b");
  c.num_heads = 0;
  expect_error_naming([&] { c.validate(); }, {"qwen3-0.6b/config.json: num_attention_heads must be > 0"});
}

}  // namespace
}  // namespace minivllm

namespace minivllm {
namespace {

// The published configs tools/configs carries for the GPU checks (tools/gpu_configs_check.sh,
// make_dummy_gguf.py) load as the engine reads them: each family's traits where they show.
TEST(ModelConfig, ToolsConfigsLoad) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tools/configs";
  int loaded = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    ScratchDir d("tools_config");
    std::filesystem::copy_file(e.path(), d.file("config.json"));
    const ModelConfig c = load_hf_model_config(d.str());
    const std::string name = e.path().stem().string();
    if (name == "phi-4-mini-instruct") {
      EXPECT_EQ(c.arch_name, "Phi3ForCausalLM");
      EXPECT_EQ(c.rotary_dim, 96);  // partial_rotary_factor 0.75 of 128
      EXPECT_EQ(c.rope_scaling.type, "longrope");
      EXPECT_EQ(c.rope_scaling.long_factor.size(), 48u);
    } else if (name == "gemma-3-1b-nowindow") {
      EXPECT_EQ(c.arch_name, "Gemma3ForCausalLM");
      EXPECT_EQ(c.head_dim, 256);
      ASSERT_EQ(c.layer_sliding.size(), 26u);
      EXPECT_FALSE(c.layer_sliding[5]);  // every sixth layer global
      EXPECT_TRUE(c.layer_sliding[0]);
      EXPECT_DOUBLE_EQ(c.rope_theta_sliding, 10000.0);
    } else if (name == "mistral-7b-instruct-v0.3") {
      EXPECT_EQ(c.arch_name, "MistralForCausalLM");
      EXPECT_EQ(c.vocab_size, 32768);
    } else if (name == "mixtral-8x7b-instruct-v0.1") {
      EXPECT_EQ(c.arch_name, "MixtralForCausalLM");
      EXPECT_EQ(c.moe.num_experts, 8);
      EXPECT_EQ(c.moe.num_experts_per_tok, 2);
      EXPECT_EQ(c.moe.moe_intermediate_size, 14336);
      EXPECT_TRUE(c.moe.norm_topk_prob);
      EXPECT_TRUE(c.moe.is_sparse_layer(31));
      EXPECT_TRUE(std::all_of(c.layer_sliding_window.begin(), c.layer_sliding_window.end(),
                              [](int64_t w) { return w == 0; }));
    }
    ++loaded;
  }
  EXPECT_GE(loaded, 4);
}

}  // namespace
}  // namespace minivllm
