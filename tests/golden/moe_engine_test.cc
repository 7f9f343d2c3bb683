// Mixture of experts in the engine, beyond the HF goldens (golden_test.cc, qwen3-moe-tiny): dummy
// weights for an MoE config generate the same tokens at world_size 1 and 2, with and without
// expert parallelism; a backend without MoE kernels refuses the model (safetensors or GGUF) at
// start-up, naming what it lacks; online FP8, which would leave the experts unquantized, is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "api/llm_engine.h"
#include "backend/cpu/cpu_backend.h"
#include "common/config_key.h"
#include "engine_test_util.h"
#include "loader/dummy_weights.h"
#include "loader/gguf.h"
#include "model/transformer.h"

namespace minivllm {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<int32_t>> run_dummy(const std::string& dir, int world_size, bool expert_parallel,
                                            const std::string& model = "qwen3-moe-tiny") {
  EngineConfig c = tiny_config(model, world_size);
  c.model = dir;
  c.load_format = "dummy";
  c.dummy_seed = 5;
  c.enable_expert_parallel = expert_parallel;
  LLMEngine engine(c);
  std::vector<std::vector<int32_t>> out;
  for (const auto& o : engine.generate(std::vector<std::vector<int32_t>>{{1, 2, 3, 4, 5}, {100, 200, 300}, {7}}, greedy(24))) out.push_back(o.token_ids);
  return out;
}

TEST(MoeEngine, DummyWeightsGenerateTheSameAtEveryWorldSizeAndSplit) {
  const fs::path dir = fs::temp_directory_path() / ("minivllm_dummy_moe_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(golden_dir("qwen3-moe-tiny") + "/config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  const auto one = run_dummy(dir.string(), 1, false);
  std::set<int32_t> distinct;
  for (const auto& seq : one) distinct.insert(seq.begin(), seq.end());
  EXPECT_GE(distinct.size(), 12u) << "the dummy model's greedy output collapsed onto a few tokens";
  EXPECT_EQ(run_dummy(dir.string(), 2, false), one);
  EXPECT_EQ(run_dummy(dir.string(), 2, true), one);
  fs::remove_all(dir);
}

// gpt-oss's dummy weights: the sinks, the o_proj, router and expert biases made too, each rank its share.
TEST(MoeEngine, GptOssDummyWeightsGenerateTheSameAtEveryWorldSizeAndSplit) {
  const fs::path dir = fs::temp_directory_path() / ("minivllm_dummy_gptoss_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(golden_dir("gptoss-tiny") + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  const auto one = run_dummy(dir.string(), 1, false, "gptoss-tiny");
  std::set<int32_t> distinct;
  for (const auto& seq : one) distinct.insert(seq.begin(), seq.end());
  EXPECT_GE(distinct.size(), 12u) << "the dummy model's greedy output collapsed onto a few tokens";
  EXPECT_EQ(run_dummy(dir.string(), 2, false, "gptoss-tiny"), one);
  EXPECT_EQ(run_dummy(dir.string(), 2, true, "gptoss-tiny"), one);
  fs::remove_all(dir);
}

// A backend without attention sinks or gpt-oss's activation (the CUDA backend's case today) refuses
// gpt-oss at start-up, naming the feature and the backend that has it.
TEST(MoeEngine, ABackendWithoutGptOssFeaturesRefusesItAtStartUp) {
  struct NoSinks : CpuBackend {
    bool supports_attention_sinks() const override { return false; }
  } no_sinks;
  struct NoActivation : CpuBackend {
    bool supports_activation(Activation act) const override { return act != Activation::kSwigluOai; }
  } no_activation;
  const ModelConfig cfg = load_hf_model_config(golden_dir("gptoss-tiny"));
  const auto weights = make_dummy_weight_source(cfg, 0);
  using Case = std::pair<Backend*, std::vector<std::string>>;
  for (const auto& [backend, parts] : {Case{&no_sinks, {"GptOssForCausalLM", "sink logits", "--device cpu"}},
                                       Case{&no_activation, {"GptOssForCausalLM", "swiglu_oai", "--device cpu"}}}) {
    const auto comm = backend->create_communicator(0, 1, "");
    try {
      Transformer t(cfg, *weights, *backend, *comm, 64, 4, 128);
      ADD_FAILURE() << "gpt-oss loaded on a backend without its features";
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const std::string& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;
    }
  }
}

TEST(MoeEngine, ABackendWithoutMoeKernelsRefusesTheModelAtStartUp) {
  struct NoMoe : CpuBackend {
    bool supports_moe() const override { return false; }
  } backend;
  const auto comm = backend.create_communicator(0, 1, "");
  auto expect_refused = [&](const ModelConfig& cfg, const WeightSource& weights, const std::vector<std::string>& parts) {
    try {
      Transformer t(cfg, weights, backend, *comm, 64, 4, 128);
      ADD_FAILURE() << "an MoE model loaded on a backend without MoE kernels";
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const std::string& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;
    }
  };
  const ModelConfig cfg = load_hf_model_config(golden_dir("qwen3-moe-tiny"));
  expect_refused(cfg, *make_dummy_weight_source(cfg, 0),
                 {"Qwen3MoeForCausalLM", "mixture-of-experts", "moe_route", "moe_experts_add"});
  // llama.cpp's qwen3moe file is refused the same way (the CUDA backend's case today).
  const GgufModel gguf = open_gguf(golden_dir("qwen3-moe-tiny-gguf") + "/qwen3-moe-tiny.bf16.gguf");
  expect_refused(gguf.config, *gguf.weights,
                 {"qwen3-moe-tiny.bf16.gguf", "qwen3moe", "mixture-of-experts", "moe_route", "moe_experts_add"});
}

TEST(MoeEngine, OnlineFp8IsRefusedNamingTheKey) {
  EngineConfig c = tiny_config("qwen3-moe-tiny");
  c.quantization = "fp8";
  try {
    LLMEngine engine(c);
    FAIL() << "quantization fp8 accepted for an MoE model";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "quantization");
    EXPECT_NE(std::string(e.what()).find("experts"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minivllm
