// The engine features behind the OpenAI parameters (issue 9), end to end on the CPU with a tiny
// checkpoint: logprobs against a log-softmax of the engine's own logits, penalties against a host
// re-run of greedy decoding, n > 1 sharing the prompt's blocks, a failing step that fails only its
// batch and leaves no prefix-cache hash behind, and the counters of stats().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>

#include "api/llm_engine.h"
#include "common/check.h"
#include "engine_test_util.h"
#include "scoped_env.h"
#include "sampling/logits_processing.h"

namespace minivllm {
namespace {

EngineConfig tiny() {
  EngineConfig c = tiny_config("qwen3-tiny");
  c.num_kvcache_blocks = 128;
  return c;
}

std::vector<int32_t> prompt_of(int n, int32_t start = 3) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[i] = static_cast<int32_t>((start + 37 * i) % 500);
  return p;
}

// The logits after `tokens` (the last row of a teacher-forced prefill).
std::vector<float> next_logits(LLMEngine& engine, const std::vector<int32_t>& tokens) {
  const std::vector<float> all = engine.score(tokens);
  const int64_t v = engine.model_config().vocab_size;
  return std::vector<float>(all.end() - v, all.end());
}

void expect_all_blocks_free(const LLMEngine& engine) {
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

TEST(EngineLogprobs, ChosenAndTopMatchALogSoftmaxOfTheEnginesLogits) {
  LLMEngine engine(tiny());
  SamplingParams p = greedy(6);
  p.logprobs = 5;
  const std::vector<int32_t> prompt = prompt_of(21);
  const RequestOutput out = engine.generate(std::vector<std::vector<int32_t>>{prompt}, p)[0];
  ASSERT_EQ(out.token_ids.size(), 6u);
  ASSERT_EQ(out.logprobs.size(), 6u);
  std::vector<int32_t> seen = prompt;
  const int64_t vocab = engine.model_config().vocab_size;
  for (size_t t = 0; t < out.token_ids.size(); ++t) {
    const TokenLogprob& lp = out.logprobs[t];
    EXPECT_EQ(lp.token_id, out.token_ids[t]);
    ASSERT_EQ(lp.top.size(), 5u);
    const std::vector<float> logits = next_logits(engine, seen);
    float chosen = 0;
    std::vector<int32_t> ids(5);
    std::vector<float> lps(5);
    logprobs_row(logits.data(), vocab, out.token_ids[t], 5, &chosen, ids.data(), lps.data());
    EXPECT_NEAR(lp.logprob, chosen, 1e-3) << "token " << t;
    EXPECT_EQ(lp.top[0].first, out.token_ids[t]) << "greedy picks the most likely token";
    for (int j = 0; j < 5; ++j) {
      EXPECT_LE(lp.top[j].second, 0.0f);
      if (j > 0) {
        EXPECT_GE(lp.top[j - 1].second, lp.top[j].second);
      }
      EXPECT_NEAR(lp.top[j].second, lps[j], 1e-3) << "token " << t << " rank " << j;
    }
    seen.push_back(out.token_ids[t]);
  }
}

TEST(EngineLogprobs, ZeroGivesTheChosenTokenOnlyAndNoneGivesNothing) {
  LLMEngine engine(tiny());
  SamplingParams p = greedy(3);
  p.logprobs = 0;
  SamplingParams none = greedy(3);
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(9)};
  const RequestOutput a = engine.generate(prompts, p)[0];
  const RequestOutput b = engine.generate(prompts, none)[0];
  ASSERT_EQ(a.logprobs.size(), 3u);
  for (const TokenLogprob& lp : a.logprobs) EXPECT_TRUE(lp.top.empty());
  EXPECT_TRUE(b.logprobs.empty());
  EXPECT_EQ(a.token_ids, b.token_ids);  // logprobs never change what is sampled
}

// Greedy decoding with penalties: each token is the argmax of the engine's own logits after the
// reference penalties over the counts so far.
TEST(EnginePenalties, GreedyMatchesAHostReRun) {
  LLMEngine engine(tiny());
  SamplingParams p = greedy(10);
  p.presence_penalty = 0.6f;
  p.frequency_penalty = 0.9f;
  p.repetition_penalty = 1.4f;
  const std::vector<int32_t> prompt = prompt_of(17);
  const RequestOutput plain = engine.generate(std::vector<std::vector<int32_t>>{prompt}, greedy(10))[0];
  const RequestOutput out = engine.generate(std::vector<std::vector<int32_t>>{prompt}, p)[0];
  ASSERT_EQ(out.token_ids.size(), 10u);
  const int64_t vocab = engine.model_config().vocab_size;
  std::vector<int32_t> counts(static_cast<size_t>(vocab), 0);
  for (int32_t t : prompt) count_token(counts.data(), t, true);
  std::vector<int32_t> seen = prompt;
  for (size_t t = 0; t < out.token_ids.size(); ++t) {
    std::vector<float> logits = next_logits(engine, seen);
    apply_penalties_row(logits.data(), vocab, counts.data(), p.presence_penalty, p.frequency_penalty,
                        p.repetition_penalty);
    const int32_t want = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ASSERT_EQ(out.token_ids[t], want) << "token " << t;
    count_token(counts.data(), want, false);
    seen.push_back(want);
  }
  EXPECT_NE(out.token_ids, plain.token_ids) << "the penalties changed nothing: too weak a test";
}

// Penalised and plain requests in one batch, and through preemption: each still matches its own
// run alone (the counts are per sequence and rebuilt when a sequence is prefilled again).
TEST(EnginePenalties, MixedBatchAndPreemptionMatchRunsAlone) {
  SamplingParams pen = greedy(24);
  pen.frequency_penalty = 1.5f;
  pen.repetition_penalty = 1.2f;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(prompt_of(20 + 3 * i, 11 * i + 1));
  std::vector<std::vector<int32_t>> alone;
  {
    LLMEngine engine(tiny());
    for (size_t i = 0; i < prompts.size(); ++i) {
      alone.push_back(engine.generate({prompts[i]}, i % 2 == 0 ? pen : greedy(24))[0].token_ids);
    }
  }
  EngineConfig c = tiny();
  c.num_kvcache_blocks = 8;  // 128 tokens for six sequences of up to 59: preemption
  c.max_model_length = 128;
  LLMEngine engine(c);
  for (size_t i = 0; i < prompts.size(); ++i) engine.add_request(prompts[i], i % 2 == 0 ? pen : greedy(24));
  std::map<int64_t, std::vector<int32_t>> got;
  while (!engine.is_finished()) {
    for (const RequestOutput& o : engine.step().finished) got[o.request_id] = o.token_ids;
  }
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[static_cast<int64_t>(i)], alone[i]) << "prompt " << i;
  EXPECT_GT(engine.stats().num_preemptions, 0);
  expect_all_blocks_free(engine);
}

TEST(EngineN, ChoicesShareThePromptBlocksAndReproduceWithASeed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = 8;
  p.ignore_eos = true;
  p.n = 3;
  p.seed = 1234;
  const std::vector<int32_t> prompt = prompt_of(40);  // two full blocks of 16
  std::vector<RequestOutput> first;
  {
    LLMEngine engine(tiny());
    first = engine.generate({prompt}, p);
    expect_all_blocks_free(engine);
  }
  ASSERT_EQ(first.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(first[i].index, i);
    EXPECT_EQ(first[i].prompt_token_ids, prompt);
    EXPECT_EQ(first[i].token_ids.size(), 8u);
    EXPECT_EQ(first[i].num_cached_tokens, i == 0 ? 0 : 32) << "choice " << i;
  }
  EXPECT_FALSE(first[0].token_ids == first[1].token_ids && first[1].token_ids == first[2].token_ids)
      << "three identical choices";
  LLMEngine engine(tiny());
  const std::vector<RequestOutput> again = engine.generate({prompt}, p);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(again[i].token_ids, first[i].token_ids) << "choice " << i;
  // Choice 0 with the seed samples as a request of n = 1 does.
  SamplingParams one = p;
  one.n = 1;
  EXPECT_EQ(engine.generate({prompt}, one)[0].token_ids, first[0].token_ids);
}

TEST(EngineN, OutputsComeNPerPromptInOrderAndOneTokenChoicesStillRun) {
  LLMEngine engine(tiny());
  SamplingParams p = greedy(1);
  p.n = 2;
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(5), {}, prompt_of(7, 9)};
  const std::vector<RequestOutput> outs = engine.generate(prompts, p);
  ASSERT_EQ(outs.size(), 6u);
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i].index, static_cast<int>(i % 2));
    EXPECT_EQ(outs[i].prompt_token_ids, prompts[i / 2]);
  }
  EXPECT_EQ(outs[2].finish_reason, "error");
  EXPECT_EQ(outs[3].finish_reason, "error");
  EXPECT_EQ(outs[0].token_ids, outs[1].token_ids);  // greedy choices agree
  EXPECT_EQ(outs[4].finish_reason, "length");
  EXPECT_EQ(outs[5].finish_reason, "length");
}

TEST(EngineN, AbortEndsEveryChoice) {
  LLMEngine engine(tiny());
  SamplingParams p = greedy(50);
  p.n = 4;
  const int64_t id = engine.add_request(prompt_of(30), p);
  engine.step();  // choice 0's prefill
  engine.step();  // the other choices' prefill
  EXPECT_EQ(engine.stats().num_running, 4);
  EXPECT_TRUE(engine.abort(id));
  EXPECT_FALSE(engine.abort(id));
  EXPECT_TRUE(engine.is_finished());
  expect_all_blocks_free(engine);
}

TEST(EngineN, DeltasCarryTheChoiceIndex) {
  LLMEngine engine(tiny());
  SamplingParams p = greedy(3);
  p.n = 2;
  p.logprobs = 1;
  const int64_t id = engine.add_request(prompt_of(12), p);
  std::map<int, std::vector<int32_t>> streamed;
  std::map<int, size_t> logprobs;
  std::map<int, std::vector<int32_t>> final_ids;
  while (!engine.is_finished()) {
    StepResult r = engine.step();
    for (const RequestDelta& d : r.deltas) {
      EXPECT_EQ(d.request_id, id);
      EXPECT_EQ(d.logprobs.size(), d.token_ids.size());
      streamed[d.index].insert(streamed[d.index].end(), d.token_ids.begin(), d.token_ids.end());
      logprobs[d.index] += d.logprobs.size();
    }
    for (const RequestOutput& o : r.finished) final_ids[o.index] = o.token_ids;
  }
  ASSERT_EQ(final_ids.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(streamed[i], final_ids[i]);
    EXPECT_EQ(logprobs[i], 3u);
  }
}

// MINIVLLM_STEP_FAULT makes the batch holding that token throw on rank 0: its requests end with
// "error", the blocks it filled are never found by the prefix cache, and the engine goes on.
// Whole prompts (chunked prefill off), so that bad's prefill is a batch of its own.
TEST(EngineFaults, AFailedStepFailsOnlyItsBatchAndLeavesNoHash) {
  constexpr int32_t kFault = 499;
  const std::string fault = std::to_string(kFault);
  EngineConfig whole = tiny();
  whole.enable_chunked_prefill = false;
  LLMEngine engine = test::with_env({{"MINIVLLM_STEP_FAULT", fault.c_str()}}, [&] { return LLMEngine(whole); });
  const std::vector<int32_t> good = prompt_of(20, 5);
  const int64_t good_id = engine.add_request(good, greedy(12));
  engine.step();  // good's prefill, alone
  std::vector<int32_t> bad = prompt_of(40);  // two full blocks, the fault in the third
  bad[36] = kFault;
  SamplingParams p = greedy(5);
  p.n = 2;
  const int64_t bad_id = engine.add_request(bad, p);
  StepResult r = engine.step();  // prefill first: bad's batch, alone
  ASSERT_EQ(r.finished.size(), 2u) << "both choices fail";
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.finished[i].request_id, bad_id);
    EXPECT_EQ(r.finished[i].index, i);
    EXPECT_EQ(r.finished[i].finish_reason, "error");
    EXPECT_NE(r.finished[i].error.find("injected step fault"), std::string::npos) << r.finished[i].error;
  }
  // The same two leading blocks again: nothing cached, the failed step registered no hash.
  std::vector<int32_t> same_prefix(bad.begin(), bad.begin() + 33);
  const int64_t probe = engine.add_request(same_prefix, greedy(1));
  RequestOutput probe_out, good_out;
  while (!engine.is_finished()) {
    for (RequestOutput& o : engine.step().finished) (o.request_id == probe ? probe_out : good_out) = o;
  }
  EXPECT_EQ(probe_out.finish_reason, "length");
  EXPECT_EQ(probe_out.num_cached_tokens, 0);
  EXPECT_EQ(good_out.request_id, good_id);
  EXPECT_EQ(good_out.finish_reason, "length");
  LLMEngine clean(tiny());
  EXPECT_EQ(clean.generate({good}, greedy(12))[0].token_ids, good_out.token_ids);
  expect_all_blocks_free(engine);
}

// Chunked prefill, 16-token chunks: the two chunks before the faulty one succeeded, so their blocks
// are in the prefix cache; both choices fail with the third.
TEST(EngineFaults, AFailedChunkLeavesTheEarlierChunksBlocksOnly) {
  constexpr int32_t kFault = 499;
  const std::string fault = std::to_string(kFault);
  EngineConfig chunked = tiny();
  chunked.max_num_batched_tokens = 16;
  LLMEngine engine = test::with_env({{"MINIVLLM_STEP_FAULT", fault.c_str()}}, [&] { return LLMEngine(chunked); });
  std::vector<int32_t> bad = prompt_of(56);
  for (int32_t& t : bad) t = t == kFault ? 0 : t;
  bad[36] = kFault;  // in the third chunk, [32, 48)
  SamplingParams p = greedy(5);
  p.n = 2;
  const int64_t bad_id = engine.add_request(bad, p);
  EXPECT_TRUE(engine.step().finished.empty());
  EXPECT_TRUE(engine.step().finished.empty());
  StepResult r = engine.step();
  ASSERT_EQ(r.finished.size(), 2u) << "both choices fail";
  for (const RequestOutput& o : r.finished) {
    EXPECT_EQ(o.request_id, bad_id);
    EXPECT_EQ(o.finish_reason, "error");
  }
  // Its first 33 tokens: blocks 0 and 1 found (ChunkedScheduler.FailureAndAbort... shows that the
  // failed chunk's block is not).
  std::vector<int32_t> same_prefix(bad.begin(), bad.begin() + 33);
  const auto probe = engine.generate({same_prefix}, greedy(1));
  EXPECT_EQ(probe[0].finish_reason, "length");
  EXPECT_EQ(probe[0].num_cached_tokens, 32);
  expect_all_blocks_free(engine);
}

TEST(EngineStatsTest, CountsTokensAndPrefixCacheHits) {
  LLMEngine engine(tiny());
  const std::vector<int32_t> prompt = prompt_of(40);
  engine.generate({prompt}, greedy(4));
  engine.generate({prompt}, greedy(4));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.prompt_tokens_total, 80);
  EXPECT_EQ(s.generation_tokens_total, 8);
  EXPECT_EQ(s.prefix_cache_queried_tokens, 80);
  EXPECT_EQ(s.prefix_cache_hit_tokens, 32);
  EXPECT_EQ(s.kv_blocks_total, 128);  // tiny()
  expect_all_blocks_free(engine);
}

TEST(EngineParams, InvalidValuesNameTheField) {
  LLMEngine engine(tiny());
  auto rejects = [&](SamplingParams p, const std::string& field) {
    try {
      engine.add_request(prompt_of(4), p);
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  SamplingParams p;
  p.n = 0;
  rejects(p, "n must be");
  p = {};
  p.logprobs = 21;
  rejects(p, "logprobs");
  p = {};
  p.presence_penalty = 2.5f;
  rejects(p, "presence_penalty");
  p = {};
  p.frequency_penalty = -3.0f;
  rejects(p, "frequency_penalty");
  p = {};
  p.repetition_penalty = 0.0f;
  rejects(p, "repetition_penalty");
}

}  // namespace
}  // namespace minivllm
