// Pooling (SamplingParams::pooling: the server's /v1/embeddings) end to end on the CPU: the final-
// normed hidden state of each prompt's last token against Hugging Face transformers' (the
// embeddings.json that tools/make_embedding_goldens.py made from tests/goldens' checkpoints), whole
// and in chunks, a prompt already in the prefix cache, beside generation, and at world_size 2.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "api/llm_engine.h"
#include "engine_test_util.h"
#include "loader/safetensors.h"
#include "loader/weight_source.h"

namespace minivllm {
namespace {

struct EmbeddingCase {
  std::vector<int32_t> prompt;
  std::vector<float> embedding;
};

std::vector<EmbeddingCase> load_embeddings(const std::string& model) {
  std::ifstream f(golden_dir(model) + "/embeddings.json");
  EXPECT_TRUE(f.good()) << model;
  const nlohmann::json j = nlohmann::json::parse(f);
  std::vector<EmbeddingCase> out;
  for (const auto& c : j.at("cases")) {
    out.push_back({c.at("prompt_ids").get<std::vector<int32_t>>(), c.at("embedding").get<std::vector<float>>()});
  }
  return out;
}

SamplingParams pooling() {
  SamplingParams p = greedy(1);
  p.pooling = true;
  return p;
}

void expect_embedding(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
    EXPECT_NEAR(got[i], want[i], 2e-3 * (1 + std::fabs(want[i]))) << what << " element " << i;
  }
  EXPECT_LT(err / norm, 1e-8) << what;
}

struct Param {
  std::string model;
  int world_size;
  int budget;
};

class Embeddings : public ::testing::TestWithParam<Param> {};

TEST_P(Embeddings, LastTokenStateMatchesTransformers) {
  EngineConfig c = tiny_config(GetParam().model, GetParam().world_size);
  c.max_num_batched_tokens = GetParam().budget;
  LLMEngine engine(c);
  const std::vector<EmbeddingCase> cases = load_embeddings(GetParam().model);
  std::vector<std::vector<int32_t>> prompts;
  for (const EmbeddingCase& e : cases) prompts.push_back(e.prompt);
  const std::vector<RequestOutput> out = engine.generate(prompts, pooling());
  ASSERT_EQ(out.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    expect_embedding(out[i].embedding, cases[i].embedding, "prompt " + std::to_string(i));
  }
  // Again, the prompts' blocks now in the prefix cache; and beside a generation that is no pooling.
  const RequestOutput cached = engine.generate({prompts[3]}, pooling())[0];
  EXPECT_GT(cached.num_cached_tokens, 0);
  expect_embedding(cached.embedding, cases[3].embedding, "cached");
  const RequestOutput generated = engine.generate({prompts[2]}, greedy(3))[0];
  EXPECT_TRUE(generated.embedding.empty());
  EXPECT_EQ(generated.token_ids.size(), 3u);
}

// A base model's checkpoint (no "model." prefix, no lm_head: how embedding models such as
// Qwen3-Embedding ship): qwen3-tiny's tensors so renamed load and give the same embeddings.
TEST(EmbeddingsOfABaseModel, TensorsWithoutTheModelPrefixLoad) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("minivllm_base_model_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    const auto weights = open_safetensors_dir(golden_dir("qwen3-tiny"));
    std::map<std::string, Tensor> stripped;
    for (const std::string& name : weights->names()) {
      if (name == "lm_head.weight") continue;  // tied
      ASSERT_EQ(name.rfind("model.", 0), 0u) << name;
      stripped[name.substr(6)] = weights->get_f32(name);
    }
    write_safetensors((dir / "model.safetensors").string(), stripped);
    fs::copy_file(fs::path(golden_dir("qwen3-tiny")) / "config.json", dir / "config.json");
  }
  EngineConfig c = tiny_config("qwen3-tiny");
  c.model = dir.string();
  const std::vector<EmbeddingCase> cases = load_embeddings("qwen3-tiny");
  {
    LLMEngine engine(c);
    const RequestOutput out = engine.generate({cases[2].prompt}, pooling())[0];
    expect_embedding(out.embedding, cases[2].embedding, "base model");
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, Embeddings,
                         ::testing::Values(Param{"qwen3-tiny", 1, 1024}, Param{"qwen3-tiny", 1, 16},
                                           Param{"qwen3-tiny", 2, 1024}, Param{"llama3-tiny", 1, 1024}),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string name = info.param.model + "_tp" + std::to_string(info.param.world_size) +
                                              "_budget" + std::to_string(info.param.budget);
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

}  // namespace
}  // namespace minivllm
