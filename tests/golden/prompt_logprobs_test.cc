// Prompt logprobs (SamplingParams::prompt_logprobs, vLLM's; OpenAI's echo with logprobs) end to end
// on the CPU with a tiny checkpoint, against a log-softmax of the engine's own teacher-forced
// logits (LLMEngine::score): whole prompts and chunked ones, a prompt already in the prefix cache,
// n > 1, a one-token prompt, and tensor parallelism (worker processes) against world_size 1.
#include <gtest/gtest.h>

#include <vector>

#include "api/llm_engine.h"
#include "engine_test_util.h"
#include "sampling/logits_processing.h"

namespace minivllm {
namespace {

std::vector<int32_t> prompt_of(int n, int32_t start = 5) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[i] = static_cast<int32_t>((start + 41 * i) % 500);
  return p;
}

// Expects `got` to score prompt tokens 1.. with the log-softmax of the rows before them, and the
// `top` most likely tokens of each row.
void expect_scores(LLMEngine& engine, const std::vector<int32_t>& prompt, const std::vector<TokenLogprob>& got,
                   int top) {
  ASSERT_EQ(got.size(), prompt.size() - 1);
  const std::vector<float> logits = engine.score(prompt);
  const int64_t vocab = engine.model_config().vocab_size;
  std::vector<int32_t> ids(static_cast<size_t>(top));
  std::vector<float> lps(static_cast<size_t>(top));
  for (size_t j = 1; j < prompt.size(); ++j) {
    const TokenLogprob& lp = got[j - 1];
    EXPECT_EQ(lp.token_id, prompt[j]) << "prompt token " << j;
    float chosen = 0;
    logprobs_row(logits.data() + (j - 1) * vocab, vocab, prompt[j], top, &chosen, ids.data(), lps.data());
    EXPECT_NEAR(lp.logprob, chosen, 1e-3) << "prompt token " << j;
    ASSERT_EQ(lp.top.size(), static_cast<size_t>(top)) << "prompt token " << j;
    for (int r = 0; r < top; ++r) {
      EXPECT_EQ(lp.top[r].first, ids[r]) << "prompt token " << j << " rank " << r;
      EXPECT_NEAR(lp.top[r].second, lps[r], 1e-3) << "prompt token " << j << " rank " << r;
    }
  }
}

SamplingParams with_prompt_logprobs(int top, int max_tokens = 3) {
  SamplingParams p = greedy(max_tokens);
  p.prompt_logprobs = top;
  return p;
}

TEST(PromptLogprobs, EachPromptTokenIsScoredByTheRowBeforeIt) {
  LLMEngine engine(tiny_config("qwen3-tiny"));
  const std::vector<int32_t> prompt = prompt_of(37);
  const RequestOutput out = engine.generate(std::vector<std::vector<int32_t>>{prompt}, with_prompt_logprobs(4))[0];
  expect_scores(engine, prompt, out.prompt_logprobs, 4);
  // They change nothing that is generated.
  const RequestOutput plain = engine.generate(std::vector<std::vector<int32_t>>{prompt}, greedy(3))[0];
  EXPECT_EQ(out.token_ids, plain.token_ids);
  EXPECT_TRUE(plain.prompt_logprobs.empty());
}

TEST(PromptLogprobs, ChunkedPrefillScoresEveryChunk) {
  EngineConfig c = tiny_config("qwen3-tiny");
  c.enable_chunked_prefill = true;
  c.max_num_batched_tokens = 16;  // the 70-token prompt in five chunks, beside a second request's
  LLMEngine engine(c);
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(70), prompt_of(23, 11)};
  const std::vector<RequestOutput> out = engine.generate(prompts, with_prompt_logprobs(2));
  expect_scores(engine, prompts[0], out[0].prompt_logprobs, 2);
  expect_scores(engine, prompts[1], out[1].prompt_logprobs, 2);
}

TEST(PromptLogprobs, APromptInThePrefixCacheIsComputedAgain) {
  LLMEngine engine(tiny_config("qwen3-tiny"));
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(50)};
  engine.generate(prompts, greedy(2));  // its blocks are in the cache now
  const RequestOutput cached = engine.generate(prompts, greedy(2))[0];
  EXPECT_GT(cached.num_cached_tokens, 0);
  const RequestOutput out = engine.generate(prompts, with_prompt_logprobs(0, 2))[0];
  EXPECT_EQ(out.num_cached_tokens, 0);
  expect_scores(engine, prompts[0], out.prompt_logprobs, 0);
  EXPECT_EQ(out.token_ids, cached.token_ids);
}

TEST(PromptLogprobs, EveryChoiceCarriesTheSameAndAOneTokenPromptHasNone) {
  LLMEngine engine(tiny_config("qwen3-tiny"));
  SamplingParams p = with_prompt_logprobs(1, 4);
  p.n = 3;
  p.temperature = 1.0f;
  p.seed = 7;
  const std::vector<int32_t> prompt = prompt_of(19);
  const std::vector<RequestOutput> out = engine.generate(std::vector<std::vector<int32_t>>{prompt}, p);
  ASSERT_EQ(out.size(), 3u);
  expect_scores(engine, prompt, out[0].prompt_logprobs, 1);
  for (const RequestOutput& o : out) {
    ASSERT_EQ(o.prompt_logprobs.size(), out[0].prompt_logprobs.size());
    for (size_t j = 0; j < o.prompt_logprobs.size(); ++j) {
      EXPECT_EQ(o.prompt_logprobs[j].token_id, out[0].prompt_logprobs[j].token_id);
      EXPECT_EQ(o.prompt_logprobs[j].logprob, out[0].prompt_logprobs[j].logprob);
    }
  }
  const RequestOutput one = engine.generate(std::vector<std::vector<int32_t>>{{42}}, with_prompt_logprobs(2))[0];
  EXPECT_TRUE(one.prompt_logprobs.empty());
  EXPECT_EQ(one.token_ids.size(), 3u);
}

// A sequence preempted and recomputed asks for no position twice: the prompt logprobs are whole
// and in order.
TEST(PromptLogprobs, PreemptedSequencesKeepTheirScores) {
  EngineConfig c = tiny_config("qwen3-tiny");
  c.max_num_batched_tokens = 32;
  c.max_model_length = 128;
  c.num_kvcache_blocks = 12;  // 192 tokens for three sequences that grow to 100-110 each
  LLMEngine engine(c);
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(40), prompt_of(45, 7), prompt_of(50, 13)};
  const std::vector<RequestOutput> out = engine.generate(prompts, with_prompt_logprobs(1, 60));
  EXPECT_GT(engine.stats().num_preemptions, 0);
  for (size_t i = 0; i < prompts.size(); ++i) expect_scores(engine, prompts[i], out[i].prompt_logprobs, 1);
}

TEST(PromptLogprobs, OutOfRangeIsRefusedByName) {
  SamplingParams p = greedy(2);
  p.prompt_logprobs = SamplingParams::kMaxLogprobs + 1;
  try {
    p.validate();
    FAIL() << "prompt_logprobs " << p.prompt_logprobs << " was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("prompt_logprobs"), std::string::npos) << e.what();
  }
}

// The workers compute the rows' logits too (the vocabulary is split over the ranks): the same
// scores as one rank, within the float differences of a split reduction.
TEST(PromptLogprobs, TensorParallelMatchesOneRank) {
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(33), prompt_of(12, 9)};
  std::vector<RequestOutput> one, two;
  {
    LLMEngine engine(tiny_config("qwen3-tiny"));
    one = engine.generate(prompts, with_prompt_logprobs(3));
  }
  {
    LLMEngine engine(tiny_config("qwen3-tiny", 2));
    two = engine.generate(prompts, with_prompt_logprobs(3));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(two[i].prompt_logprobs.size(), prompts[i].size() - 1);
    ASSERT_EQ(one[i].prompt_logprobs.size(), prompts[i].size() - 1);
    for (size_t j = 0; j < one[i].prompt_logprobs.size(); ++j) {
      EXPECT_EQ(two[i].prompt_logprobs[j].token_id, one[i].prompt_logprobs[j].token_id);
      EXPECT_NEAR(two[i].prompt_logprobs[j].logprob, one[i].prompt_logprobs[j].logprob, 1e-3);
      ASSERT_EQ(two[i].prompt_logprobs[j].top.size(), 3u);
      EXPECT_EQ(two[i].prompt_logprobs[j].top[0].first, one[i].prompt_logprobs[j].top[0].first);
    }
  }
}

}  // namespace
}  // namespace minivllm
