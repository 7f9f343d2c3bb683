// yarn and linear rope scaling against transformers: each case of
// tests/goldens/rope-scaling/rope_goldens.json (tools/make_rope_goldens.py) is a config.json and the
// inverse frequencies and attention factor transformers makes of it. The engine's loader reads the
// config, model/rope.cc makes the frequencies and the cos / sin table. Also the context a scaled rope
// serves (the cap on max_model_length) and the keys' errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loader/model_config.h"
#include "loader_test_util.h"
#include "model/rope.h"

namespace minivllm {
namespace {

using nlohmann::json;
using testing::expect_error_naming;
using testing::ScratchDir;
using testing::write_text;

json read_goldens() {
  std::ifstream in(std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/rope-scaling/rope_goldens.json");
  return json::parse(in);
}

ModelConfig load(const json& config) {
  ScratchDir d("rope_scaling");
  write_text(d.file("config.json"), config.dump(2));
  return load_hf_model_config(d.str());
}

TEST(RopeScaling, MatchesTransformers) {
  const json doc = read_goldens();
  ASSERT_GE(doc["cases"].size(), 8u);
  for (const json& c : doc["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const ModelConfig cfg = load(c["config"]);
    EXPECT_EQ(cfg.rope_scaling.type, name == "linear" ? "linear" : "yarn");
    const std::vector<double> want = c["inv_freq"];
    const std::vector<double> got = rope_inv_freq(cfg, 256);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      // transformers computes in float32; the engine in double, rounded to float32 for the angles.
      EXPECT_NEAR(static_cast<float>(got[i]), want[i], 2e-6 * want[i]) << "frequency " << i;
    }
    const double attention = c["attention_scaling"];
    const Tensor table = rope_cos_sin_table(cfg, 8);
    const int64_t half = cfg.rope_dim() / 2;
    // Position 0: cos 1 and sin 0 times the attention factor; position 5, frequency 1.
    EXPECT_NEAR(table.ptr<float>()[0], attention, 1e-6);
    EXPECT_EQ(table.ptr<float>()[half], 0.0f);
    EXPECT_NEAR(table.ptr<float>()[5 * 2 * half + 1], std::cos(5.0 * want[1]) * attention, 2e-5);
  }
}

// The context cap: yarn serves factor x original_max_position_embeddings (Qwen's recipe: 4 x 32,768
// over a config whose max_position_embeddings stays 40,960), linear factor x max_position_embeddings.
TEST(RopeScaling, ContextTheScalingServes) {
  const json doc = read_goldens();
  for (const json& c : doc["cases"]) {
    const std::string name = c["name"];
    const ModelConfig cfg = load(c["config"]);
    const int64_t want = name == "linear"             ? 2560   // 2.5 x 1,024
                         : name == "yarn_v4_spelling" ? 1024   // 4 x 256 past max_position_embeddings 640
                         : name == "yarn_untruncated" ? 3072   // 32 x 96
                         : name == "yarn_mscale"      ? 2560   // 40 x 64
                         : name == "yarn_no_original" ? 8192   // 8 x 1,024
                                                      : 1024;  // 4 x 256, 2 x 512: max_position_embeddings
    EXPECT_EQ(cfg.max_context_length(), want) << name;
  }
  json q = doc["cases"][0]["config"];
  q.erase("rope_parameters");
  q["rope_theta"] = 1e6;
  q["max_position_embeddings"] = 40960;
  q["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  const ModelConfig qwen = load(q);
  EXPECT_EQ(qwen.max_context_length(), 131072);
  EXPECT_NEAR(qwen.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-12);
  q.erase("rope_scaling");
  EXPECT_EQ(load(q).max_context_length(), 40960);
}

TEST(RopeScaling, BadKeysNamed) {
  json base = read_goldens()["cases"][0]["config"];
  json no_factor = base;
  no_factor["rope_parameters"].erase("factor");
  expect_error_naming([&] { load(no_factor); }, {"config.json", "yarn", "factor"});
  json zero = base;
  zero["rope_parameters"]["factor"] = 0.0;
  expect_error_naming([&] { load(zero); }, {"config.json", "factor"});
  json truncate = base;
  truncate["rope_parameters"]["truncate"] = "no";
  expect_error_naming([&] { load(truncate); }, {"config.json", "truncate"});
  json dynamic = base;
  dynamic["rope_parameters"]["rope_type"] = "dynamic";
  expect_error_naming([&] { load(dynamic); }, {"config.json", "dynamic", "yarn"});
}

// hf_overrides merge into config.json before it is read (RFC 7386): Qwen's recipe added to a config
// without scaling; a nested object merged key by key (rope_parameters keeps its rope_theta); null
// removes a key; errors name the overrides.
TEST(RopeScaling, HfOverridesMergeIntoTheConfig) {
  const json c0 = read_goldens()["cases"][0]["config"];  // rope_parameters: yarn, rope_theta 1e4
  ScratchDir d("hf_overrides");
  write_text(d.file("config.json"), c0.dump(2));
  const ModelConfig yarn = load_hf_model_config(d.str());
  const ModelConfig plain = load_hf_model_config(d.str(), R"({"rope_parameters": {"rope_type": "default",)"
                                                          R"( "factor": null, "original_max_position_embeddings": null}})");
  EXPECT_EQ(plain.rope_scaling.type, "");
  EXPECT_DOUBLE_EQ(plain.rope_theta, 1e4);  // kept from the file's rope_parameters
  const ModelConfig longer = load_hf_model_config(d.str(), R"({"rope_parameters": {"factor": 8.0}})");
  EXPECT_EQ(longer.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(longer.rope_scaling.factor, 8.0);
  EXPECT_EQ(longer.rope_scaling.original_max_position_embeddings, 256);
  EXPECT_EQ(longer.max_context_length(), 2048);
  EXPECT_EQ(yarn.max_context_length(), 1024);
  // A transformers 4 config (rope_theta at the top, rope_scaling null) and the recipe as vLLM's docs
  // give it.
  json v4 = c0;
  v4.erase("rope_parameters");
  v4["rope_theta"] = 1e4;
  v4["rope_scaling"] = nullptr;
  write_text(d.file("config.json"), v4.dump(2));
  const ModelConfig recipe = load_hf_model_config(
      d.str(), R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256}})");
  ASSERT_EQ(recipe.rope_scaling.type, "yarn");
  EXPECT_EQ(rope_inv_freq(recipe, 256), rope_inv_freq(yarn, 256));
  EXPECT_NE(recipe.source.find("hf_overrides"), std::string::npos);
  expect_error_naming([&] { load_hf_model_config(d.str(), "[1, 2]"); }, {"hf_overrides", "JSON object"});
  expect_error_naming([&] { load_hf_model_config(d.str(), R"({"rope_scaling": {"rope_type": "yarn"}})"); },
                      {"config.json with hf_overrides", "factor"});
}

}  // namespace
}  // namespace minivllm
