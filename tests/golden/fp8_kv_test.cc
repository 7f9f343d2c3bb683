// kv_cache_dtype fp8 end to end on the CPU backend (its fp8 cache is the CUDA kernels' reference):
// the tiny goldens' last-position logits stay close to Hugging Face's fp32 ones, yet differ from
// the f32 cache's (the cache really is fp8), with prompts prefilled in chunks that read their
// cached fp8 prefix, and decodes; the CPU's bf16 cache lies between f32 and fp8.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "api/llm_engine.h"
#include "common/config_key.h"
#include "engine_test_util.h"

namespace minivllm {
namespace {

struct Case {
  std::vector<int32_t> prompt;
  std::vector<float> last_logits;
};

std::vector<Case> load(const std::string& model) {
  std::ifstream f(golden_dir(model) + "/goldens.json");
  nlohmann::json j = nlohmann::json::parse(f);
  const nlohmann::json& cases = j.is_object() ? j.at("cases") : j;
  std::vector<Case> out;
  for (const auto& c : cases) {
    out.push_back({c.at("prompt_ids").get<std::vector<int32_t>>(), c.at("last_logits").get<std::vector<float>>()});
  }
  return out;
}

// Relative L2 distance of the last position's logits from HF's, over every case.
double last_logits_error(const std::string& model, const std::string& kv_cache_dtype) {
  EngineConfig c = tiny_config(model);
  c.kv_cache_dtype = kv_cache_dtype;
  c.max_num_batched_tokens = 16;  // score() in chunks: later chunks read the cached prefix
  c.max_num_seqs = 16;
  LLMEngine engine(c);
  EXPECT_EQ(engine.config().kv_cache_element, kv_cache_dtype == "fp8"    ? DType::kF8E4M3
                                             : kv_cache_dtype == "bf16" ? DType::kBF16
                                                                        : DType::kF32);
  const int64_t vocab = engine.model_config().vocab_size;
  double err = 0, norm = 0;
  for (const Case& k : load(model)) {
    const std::vector<float> all = engine.score(k.prompt);
    const float* last = all.data() + (k.prompt.size() - 1) * vocab;
    for (int64_t v = 0; v < vocab; ++v) {
      err += (last[v] - k.last_logits[v]) * static_cast<double>(last[v] - k.last_logits[v]);
      norm += static_cast<double>(k.last_logits[v]) * k.last_logits[v];
    }
  }
  return std::sqrt(err / norm);
}

TEST(Fp8KvCache, TinyModelsStayCloseToHf) {
  for (const char* model : {"qwen3-tiny", "llama3-tiny"}) {
    const double f32 = last_logits_error(model, "auto");
    const double fp8 = last_logits_error(model, "fp8");
    std::cout << model << ": last logits' relative L2 error vs HF: f32 KV " << f32 << ", fp8 KV " << fp8 << "\n";
    EXPECT_LT(f32, 1e-4) << model;
    EXPECT_GT(fp8, 2 * f32) << model << ": the fp8 cache changed nothing";
    // e4m3 keeps 3 mantissa bits (~3.6% rms error per element); these random-weight models show
    // 6.4% (qwen3-tiny) and 7.4% (llama3-tiny). A misplaced row or scale gives O(1).
    EXPECT_LT(fp8, 0.15) << model;
  }
}

TEST(Fp8KvCache, GreedyDecodeRunsOverTheFp8Cache) {
  EngineConfig c = tiny_config("qwen3-tiny");
  c.kv_cache_dtype = "fp8_e4m3";
  LLMEngine engine(c);
  const auto outs = engine.generate(std::vector<std::vector<int32_t>>{load("qwen3-tiny")[0].prompt}, greedy(24));
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_TRUE(outs[0].error.empty()) << outs[0].error;
  EXPECT_EQ(outs[0].token_ids.size(), 24u);
}

// The CPU's bf16 cache (as llama.cpp's f16 one): between the f32 and the fp8 cache in error (8
// mantissa bits against 3), but not the f32 result. An unknown element type is refused by name.
TEST(Fp8KvCache, CpuBf16CacheIsBetween) {
  for (const char* model : {"qwen3-tiny", "llama3-tiny"}) {
    const double f32 = last_logits_error(model, "auto");
    const double bf16 = last_logits_error(model, "bf16");
    const double fp8 = last_logits_error(model, "fp8");
    std::cout << model << ": last logits' relative L2 error vs HF: bf16 KV " << bf16 << "\n";
    EXPECT_GT(bf16, f32) << model << ": the bf16 cache changed nothing";
    EXPECT_LT(bf16, fp8 / 4) << model;
  }
  EngineConfig c = tiny_config("qwen3-tiny");
  c.kv_cache_dtype = "fp16";
  try {
    LLMEngine engine(c);
    FAIL() << "kv_cache_dtype fp16 accepted";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "kv_cache_dtype");
  }
}

}  // namespace
}  // namespace minivllm
