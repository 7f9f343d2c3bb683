// The engine on dummy weights (load_format dummy): a model from its config.json alone generates,
// its logits finite and spread, and the same seed gives the same model at world_size 1 and 2 (each
// rank made only its shard).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "api/llm_engine.h"
#include "engine_test_util.h"

namespace minivllm {
namespace {

namespace fs = std::filesystem;

// A directory holding only a copy of `model`'s config.json: no weights, no tokenizer.
std::string config_only_dir(const std::string& model) {
  const fs::path dir = fs::temp_directory_path() / ("minivllm_dummy_" + model + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(golden_dir(model) + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  return dir.string();
}

std::vector<std::vector<int32_t>> prompts() { return {{1, 2, 3, 4, 5}, {100, 200, 300}, {7}}; }

std::vector<std::vector<int32_t>> run(const std::string& dir, int world_size, int64_t seed, int max_tokens) {
  EngineConfig c = tiny_config("mistral-tiny", world_size);
  c.model = dir;
  c.load_format = "dummy";
  c.dummy_seed = seed;
  LLMEngine engine(c);
  std::vector<std::vector<int32_t>> out;
  for (const auto& o : engine.generate(prompts(), greedy(max_tokens))) out.push_back(o.token_ids);
  return out;
}

TEST(DummyWeightsEngine, ConfigOnlyDirGeneratesTheSameAtEveryWorldSize) {
  const std::string dir = config_only_dir("mistral-tiny");
  const auto one = run(dir, 1, 3, 48);
  std::set<int32_t> distinct;
  for (const auto& seq : one) {
    ASSERT_EQ(seq.size(), 48u);
    distinct.insert(seq.begin(), seq.end());
  }
  EXPECT_GE(distinct.size(), 20u) << "the dummy model's greedy output collapsed onto a few tokens";
  EXPECT_EQ(run(dir, 2, 3, 48), one);
  EXPECT_NE(run(dir, 1, 4, 48), one);  // another seed, another model
  fs::remove_all(dir);
}

TEST(DummyWeightsEngine, WithoutTheFlagTheMissingWeightsAreNamed) {
  const std::string dir = config_only_dir("mistral-tiny");
  EngineConfig c = tiny_config("mistral-tiny");
  c.model = dir;
  try {
    LLMEngine engine(c);
    FAIL() << "loaded a directory without weights";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace minivllm
