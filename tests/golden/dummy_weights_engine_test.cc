// The engine on dummy weights (load_format dummy): a model from its config.json alone generates,
// its logits finite and spread, and the same seed gives the same model at world_size 1 and 2 (each
// rank made only its shard).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "api/llm_engine.h"
#include "backend/cpu/cpu_backend.h"
#include "common/fp8.h"
#include "engine_test_util.h"
#include "scoped_env.h"

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

std::vector<std::vector<int32_t>> run(const std::string& dir, int world_size, int64_t seed, int max_tokens,
                                      const std::string& quantization = "none") {
  EngineConfig c = tiny_config("mistral-tiny", world_size);
  c.model = dir;
  c.load_format = "dummy";
  c.dummy_seed = seed;
  c.quantization = quantization;
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

// Online FP8 of dummy weights: each rank makes whole rows and rounds them (Backend::
// quantize_weight_fp8), so a row-parallel shard's scales span the full row and world_size 1 and 2
// hold the same model.
TEST(DummyWeightsEngine, OnlineFp8IsTheSameAtEveryWorldSize) {
  const std::string dir = config_only_dir("mistral-tiny");
  const auto one = run(dir, 1, 3, 24, "fp8");
  for (const auto& seq : one) ASSERT_EQ(seq.size(), 24u);
  EXPECT_EQ(run(dir, 2, 3, 24, "fp8"), one);
  fs::remove_all(dir);
}

// The host path of Backend::quantize_weight_fp8 (the CPU's): whole rows rounded through e4m3,
// then the column range kept; the CPU keeps the values, not the codes.
TEST(DummyWeightsEngine, CpuQuantizeWeightFp8RoundsWholeRows) {
  auto cpu = make_cpu_backend();
  Tensor w = host_tensor(DType::kF32, {3, 40});
  for (int64_t i = 0; i < w.numel(); ++i) w.ptr<float>()[i] = 0.01f * static_cast<float>((i * 37) % 101 - 50);
  const Tensor dev = cpu->upload_weight(w);
  const Tensor got = cpu->quantize_weight_fp8(dev, 10, 30);
  ASSERT_EQ(got.dtype(), DType::kF32);
  ASSERT_EQ(got.shape(), (std::vector<int64_t>{3, 20}));
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<uint8_t> codes(40);
    float scale = 0;
    quantize_e4m3_row(w.ptr<float>() + r * 40, 40, codes.data(), &scale);
    for (int64_t c = 0; c < 20; ++c) {
      EXPECT_EQ(got.ptr<float>()[r * 20 + c], e4m3_to_f32(codes[static_cast<size_t>(10 + c)]) * scale) << r << "," << c;
    }
  }
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

// A .gguf file carries its weights and their types: dummy weights (bf16 of the config's shapes)
// would stand in for its Q4_K blocks unnoticed, so the engine refuses the pair and names the fix.
TEST(DummyWeightsEngine, RefusesAGgufFile) {
  EngineConfig c = tiny_config("mistral-tiny", 1);
  c.model = golden_dir("gguf-tiny-kquant") + "/llama-Q4_K_M.gguf";
  c.load_format = "dummy";
  try {
    LLMEngine engine(c);
    FAIL() << "load_format dummy with a .gguf file was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("llama-Q4_K_M.gguf"), std::string::npos) << what;
    EXPECT_NE(what.find("load_format auto"), std::string::npos) << what;
  }
  c.load_format = "auto";
  LLMEngine engine(c);  // the same file loads as itself
  const std::vector<std::vector<int32_t>> prompt = {{1, 2, 3}};
  EXPECT_EQ(engine.generate(prompt, greedy(4)).at(0).token_ids.size(), 4u);
}

}  // namespace
}  // namespace minivllm

namespace minivllm {
namespace {

// MINIVLLM_DECODE_PERSISTENT=1 on a backend without the persistent decode kernel (the CPU's): the
// model describes its layers, the backend says no, and decode keeps the layer path, token for token.
TEST(DummyWeightsEngine, PersistentDecodeKnobKeepsTheLayerPathWhereTheBackendHasNoKernel) {
  const std::string dir = config_only_dir("qwen3-tiny");  // dense, plain RMSNorm: the model asks
  const auto generate = [&] {
    EngineConfig c = tiny_config("qwen3-tiny", 1);
    c.model = dir;
    c.load_format = "dummy";
    LLMEngine engine(c);
    std::vector<std::vector<int32_t>> out;
    for (const auto& o : engine.generate(prompts(), greedy(12))) out.push_back(o.token_ids);
    return out;
  };
  const auto plain = generate();
  const auto knob = test::with_env({{"MINIVLLM_DECODE_PERSISTENT", "1"}}, generate);
  EXPECT_EQ(knob, plain);
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[0].size(), 12u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace minivllm
