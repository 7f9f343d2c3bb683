// The model's sampling defaults (api/generation_defaults.h), as vLLM reads generation_config.json:
// the published Qwen3-0.6B and Llama-3.2-1B files, the keys transformers would drop as its own
// defaults, generation_config vllm / a folder / a .gguf, errors naming the file; the engine's.
// (The server's requests over them: tests/server/openai_request_test.cc.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "api/generation_defaults.h"
#include "api/llm_engine.h"
#include "../golden/engine_test_util.h"
#include "../loader/gguf_test_writer.h"

namespace minivllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kModels = std::string(MINIVLLM_SHARED_DIR) + "/models";
const std::string kGoldens = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens";

// A scratch folder holding generation_config.json = `g`.
struct GenDir {
  fs::path dir;
  explicit GenDir(const json& g) {
    dir = fs::temp_directory_path() / ("minivllm_gen_" + std::to_string(::getpid()) + "_" + std::to_string(count()++));
    fs::create_directories(dir);
    std::ofstream(dir / "generation_config.json") << g.dump();
  }
  ~GenDir() { fs::remove_all(dir); }
  static int& count() {
    static int n = 0;
    return n;
  }
};

TEST(GenerationDefaults, PublishedFiles) {
  const GenerationDefaults q = read_generation_defaults("auto", kModels + "/qwen3-0.6b");
  EXPECT_EQ(q.keys, json({{"temperature", 0.6}, {"top_k", 20}, {"top_p", 0.95}}));
  EXPECT_NE(q.source.find("generation_config.json"), std::string::npos);
  EXPECT_FLOAT_EQ(q.params.temperature, 0.6f);
  EXPECT_EQ(q.params.top_k, 20);
  EXPECT_FLOAT_EQ(q.params.top_p, 0.95f);
  EXPECT_EQ(q.params.max_tokens, SamplingParams{}.max_tokens);
  EXPECT_FALSE(q.max_tokens());
  const GenerationDefaults l = read_generation_defaults("auto", kModels + "/llama-3.2-1b-instruct");
  EXPECT_EQ(l.keys, json({{"temperature", 0.6}, {"top_p", 0.9}}));
  EXPECT_TRUE(read_generation_defaults("vllm", kModels + "/qwen3-0.6b").keys.empty());
  // A .gguf has no generation_config.json; a folder without one has none either.
  EXPECT_TRUE(read_generation_defaults("auto", kModels + "/stories260K/stories260K.gguf").keys.empty());
  EXPECT_TRUE(read_generation_defaults("auto", kGoldens + "/qwen3-tiny").keys.empty());  // eos and bos only
}

TEST(GenerationDefaults, TransformersOwnDefaultsAreNotDifferences) {
  GenDir d({{"temperature", 1.0}, {"top_p", 1.0}, {"top_k", 50}, {"repetition_penalty", 1.0}, {"min_p", 0.05},
            {"max_new_tokens", 100}, {"do_sample", false}, {"num_beams", 1}});
  const GenerationDefaults g = read_generation_defaults(d.dir.string(), "unused");
  EXPECT_EQ(g.keys, json({{"min_p", 0.05}, {"max_tokens", 100}}));
  EXPECT_EQ(g.max_tokens(), 100);
  EXPECT_EQ(g.params.max_tokens, 100);
  SamplingParams mine;
  mine.temperature = 0.25f;
  mine.min_p = 0.5f;
  const SamplingParams over = g.apply(mine);
  EXPECT_FLOAT_EQ(over.temperature, 0.25f);  // not in the file: kept
  EXPECT_FLOAT_EQ(over.min_p, 0.05f);
}

TEST(GenerationDefaults, ErrorsNameTheFileAndKey) {
  GenDir bad(json{{"temperature", -1.0}});
  try {
    read_generation_defaults(bad.dir.string(), "unused");
    FAIL() << "a negative temperature was taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("temperature"), std::string::npos) << e.what();
  }
  GenDir text(json{{"top_k", "20"}});
  EXPECT_THROW(read_generation_defaults(text.dir.string(), "unused"), std::exception);
  try {
    read_generation_defaults("/nonexistent/folder", "unused");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/folder"), std::string::npos) << e.what();
  }
}

// A .gguf: llama.cpp's general.sampling.* keys, as llama.cpp takes them (top_k 50 included).
TEST(GenerationDefaults, GgufSamplingMetadata) {
  testing::GgufTestWriter w;
  w.add_scalar("general.sampling.temp", testing::GgufTestWriter::F32, 0.7f);
  w.add_scalar("general.sampling.top_k", testing::GgufTestWriter::I32, int32_t{50});
  w.add_scalar("general.sampling.penalty_repeat", testing::GgufTestWriter::F32, 1.25f);
  const std::vector<uint8_t> bytes = w.build();
  const fs::path file = fs::temp_directory_path() / ("minivllm_gen_" + std::to_string(::getpid()) + ".gguf");
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  const GenerationDefaults g = read_generation_defaults("auto", file.string());
  EXPECT_NEAR(g.keys["temperature"].get<double>(), 0.7, 1e-6);
  EXPECT_EQ(g.keys["top_k"], 50);
  EXPECT_FLOAT_EQ(g.params.repetition_penalty, 1.25f);
  EXPECT_EQ(g.source, file.string());
  EXPECT_TRUE(read_generation_defaults("vllm", file.string()).keys.empty());
  fs::remove(file);
}

// The engine reads them per EngineConfig::generation_config.
TEST(GenerationDefaults, EngineTakesTheConfiguredOnes) {
  GenDir d({{"temperature", 0.7}, {"top_p", 0.8}});
  EngineConfig c = tiny_config("qwen3-tiny");
  EXPECT_TRUE(LLMEngine(c).generation_defaults().keys.empty());
  c.generation_config = d.dir.string();
  LLMEngine e(c);
  EXPECT_FLOAT_EQ(e.default_sampling_params().temperature, 0.7f);
  EXPECT_FLOAT_EQ(e.default_sampling_params().top_p, 0.8f);
  EXPECT_EQ(e.generation_defaults().source, (d.dir / "generation_config.json").string());
}

}  // namespace
}  // namespace minivllm
