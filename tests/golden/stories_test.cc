// A real trained model end to end on the CPU: stories260K (GGUF, SentencePiece vocabulary) writes its
// known story from BOS (llama2.c's run.c at temperature 0 on the same weights), and the text API's
// stop strings, streaming and per-request errors behave.
#include <gtest/gtest.h>

#include "api/llm_engine.h"
#include "engine_test_util.h"
#include "common/check.h"

namespace minivllm {
namespace {

const char* kStory = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";

TEST(Stories260K, GreedyFromBosWritesTheKnownStory) {
  LLMEngine engine(stories_config());
  const int32_t bos = engine.tokenizer()->bos_token_id();
  ASSERT_GE(bos, 0);
  auto out = engine.generate(std::vector<std::vector<int32_t>>{{bos}}, greedy(40));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].text.rfind(kStory, 0), 0u) << out[0].text;
  EXPECT_EQ(out[0].finish_reason, "length");
}

TEST(Stories260K, TextPromptContinuesTheStory) {
  LLMEngine engine(stories_config());
  auto out = engine.generate(std::vector<std::string>{"Once upon a time, there was a little girl named"}, greedy(4));
  // SentencePiece drops the first piece's space marker when a completion is decoded on its own (as
  // HF's decode of the completion ids does).
  EXPECT_EQ(out[0].text.rfind("Lily.", 0), 0u) << out[0].text;
}

// "little girl" spans several tokens; the stop text and what follows it are not returned.
TEST(Stories260K, StopStringSpanningTokensIsCutOff) {
  LLMEngine engine(stories_config());
  SamplingParams p = greedy(40);
  p.stop = {"little girl"};
  auto out = engine.generate(std::vector<std::vector<int32_t>>{{engine.tokenizer()->bos_token_id()}}, p);
  EXPECT_EQ(out[0].text, "Once upon a time, there was a ");
  EXPECT_EQ(out[0].finish_reason, "stop");
}

// Streaming deltas concatenate to the final text, and no delta holds part of a stop string.
TEST(Stories260K, StreamingDeltasConcatenateToTheText) {
  LLMEngine engine(stories_config());
  SamplingParams p = greedy(30);
  p.stop = {"named Lily"};
  const int64_t id = engine.add_request(std::vector<int32_t>{engine.tokenizer()->bos_token_id()}, p);
  std::string streamed, final_text;
  while (!engine.is_finished()) {
    StepResult r = engine.step();
    for (const auto& d : r.deltas) {
      if (d.request_id == id) streamed += d.text;
    }
    for (const auto& o : r.finished) final_text = o.text;
  }
  EXPECT_EQ(final_text, "Once upon a time, there was a little girl ");
  EXPECT_EQ(streamed, final_text);
}

// generate() steps without deltas; its outputs equal those of the same request streamed through
// step() (text, tokens, logprobs, finish reason), with and without a stop string.
TEST(Stories260K, GenerateMatchesTheStepStream) {
  LLMEngine engine(stories_config());
  const int32_t bos = engine.tokenizer()->bos_token_id();
  for (const std::vector<std::string>& stop : {std::vector<std::string>{}, std::vector<std::string>{"named Lily"}}) {
    SamplingParams p = greedy(30);
    p.stop = stop;
    p.logprobs = 2;
    const RequestOutput gen = engine.generate(std::vector<std::vector<int32_t>>{{bos}}, p).at(0);
    const int64_t id = engine.add_request(std::vector<int32_t>{bos}, p);
    RequestOutput streamed;
    while (!engine.is_finished()) {
      for (RequestOutput& o : engine.step().finished) {
        if (o.request_id == id) streamed = std::move(o);
      }
    }
    EXPECT_EQ(gen.text, streamed.text);
    EXPECT_EQ(gen.token_ids, streamed.token_ids);
    EXPECT_EQ(gen.finish_reason, streamed.finish_reason);
    ASSERT_EQ(gen.logprobs.size(), streamed.logprobs.size());
    ASSERT_EQ(gen.logprobs.size(), gen.token_ids.size());
    for (size_t i = 0; i < gen.logprobs.size(); ++i) EXPECT_EQ(gen.logprobs[i].token_id, streamed.logprobs[i].token_id);
    EXPECT_FALSE(gen.text.empty());
  }
}

// Bad requests are rejected alone, each with a message naming the problem; the rest finish normally.
TEST(Stories260K, BadRequestsFailAloneAndOthersFinish) {
  LLMEngine engine(stories_config());
  const int32_t bos = engine.tokenizer()->bos_token_id();
  std::vector<std::vector<int32_t>> prompts = {{bos}, {}, std::vector<int32_t>(300, 5), {bos, 99999}, {bos}};
  auto out = engine.generate(prompts, greedy(20));
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].text.rfind("Once upon a time", 0), 0u);
  EXPECT_EQ(out[4].token_ids, out[0].token_ids);
  EXPECT_EQ(out[1].finish_reason, "error");
  EXPECT_NE(out[1].error.find("empty"), std::string::npos) << out[1].error;
  EXPECT_EQ(out[2].finish_reason, "error");
  EXPECT_NE(out[2].error.find("max_model_length"), std::string::npos) << out[2].error;
  EXPECT_EQ(out[3].finish_reason, "error");
  EXPECT_NE(out[3].error.find("99999"), std::string::npos) << out[3].error;

  // Invalid UTF-8 in a text prompt.
  auto texts = engine.generate(std::vector<std::string>{"Once upon", std::string("bad \xff\xfe text")}, greedy(5));
  EXPECT_TRUE(texts[0].error.empty());
  EXPECT_EQ(texts[1].finish_reason, "error");
  EXPECT_NE(texts[1].error.find("UTF-8"), std::string::npos) << texts[1].error;
}

TEST(Stories260K, InvalidSamplingParamsAreRejectedWhileOthersRun) {
  LLMEngine engine(stories_config());
  const int32_t bos = engine.tokenizer()->bos_token_id();
  const int64_t good = engine.add_request(std::vector<int32_t>{bos}, greedy(12));
  engine.step();  // the good request is in flight
  SamplingParams bad = greedy(5);
  bad.top_p = 1.5f;
  EXPECT_THROW(
      {
        try {
          engine.add_request(std::vector<int32_t>{bos}, bad);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  bad = greedy(5);
  bad.temperature = -1;
  EXPECT_THROW(engine.add_request(std::vector<int32_t>{bos}, bad), Error);
  bad = greedy(0);
  EXPECT_THROW(engine.add_request(std::vector<int32_t>{bos}, bad), Error);
  std::vector<RequestOutput> done;
  while (!engine.is_finished()) {
    for (auto& o : engine.step().finished) done.push_back(o);
  }
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].request_id, good);
  EXPECT_EQ(done[0].token_ids.size(), 12u);
}

// The same seed gives the same sampled text; a different seed (almost surely) another.
TEST(Stories260K, SeededSamplingIsReproducible) {
  LLMEngine engine(stories_config());
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.max_tokens = 30;
  p.ignore_eos = true;
  p.seed = 1234;
  const std::vector<std::vector<int32_t>> prompt = {{engine.tokenizer()->bos_token_id()}};
  auto a = engine.generate(prompt, p);
  auto b = engine.generate(prompt, p);
  p.seed = 99;
  auto c = engine.generate(prompt, p);
  EXPECT_EQ(a[0].token_ids, b[0].token_ids);
  EXPECT_NE(a[0].token_ids, c[0].token_ids);
}

// A real trained GGUF model split over 2 and 4 CPU processes (each rank reading only its shards of
// the file) writes what one rank writes: greedy tokens, and seeded samples (rank 0's generators).
TEST(Stories260K, TensorParallelRanksWriteTheSameStory) {
  SamplingParams greedy_p;
  greedy_p.temperature = 0;
  greedy_p.max_tokens = 120;
  greedy_p.ignore_eos = true;
  SamplingParams sampled = greedy_p;
  sampled.temperature = 0.8f;
  sampled.seed = 7;
  std::vector<std::vector<RequestOutput>> outs;
  for (int ws : {1, 2, 4}) {
    EngineConfig c = stories_config();
    c.world_size = ws;
    LLMEngine engine(c);
    ASSERT_EQ(engine.runners().worker_pids().size(), static_cast<size_t>(ws - 1));
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Ben went"};
    auto g = engine.generate(prompts, greedy_p);
    auto s = engine.generate(prompts, sampled);
    g.insert(g.end(), s.begin(), s.end());
    outs.push_back(g);
  }
  for (size_t w = 1; w < outs.size(); ++w) {
    for (size_t i = 0; i < outs[0].size(); ++i) {
      EXPECT_EQ(outs[w][i].token_ids, outs[0][i].token_ids) << "world_size " << (w == 1 ? 2 : 4) << ", request " << i;
    }
  }
}

TEST(EngineConfigErrors, MissingModelAndBadKeysAreNamed) {
  EngineConfig c = stories_config();
  c.model = "/nonexistent/model/dir";
  try {
    LLMEngine engine(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model/dir"), std::string::npos) << e.what();
  }
  c = stories_config();
  c.gpu_memory_utilization = 1.5f;
  try {
    c.validate();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu_memory_utilization"), std::string::npos) << e.what();
  }
  EXPECT_THROW(EngineConfig::from_json(nlohmann::json{{"model", "x"}, {"max_num_seqz", 3}}), Error);
}

}  // namespace
}  // namespace minivllm
