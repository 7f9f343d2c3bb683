// vLLM's include_stop_str_in_output, skip_special_tokens and truncate_prompt_tokens on the real
// trained stories260K: the text of the stop string, of eos and of a stop token id left out by
// default and kept when asked; special tokens left out of the text by default and shown when asked;
// a prompt cut to its last k tokens generates as that shorter prompt does; allowed_token_ids keeps
// every sampled token (eos included) in its set, greedy taking the best of them by the logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "api/llm_engine.h"
#include "../golden/engine_test_util.h"

namespace minivllm {
namespace {

EngineConfig stories() {
  EngineConfig c = tiny_config("unused");
  c.model = std::string(MINIVLLM_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  return c;
}

RequestOutput run(LLMEngine& e, const SamplingParams& p) {
  const std::vector<RequestOutput> out = e.generate(std::vector<std::string>{"Once upon a time"}, p);
  EXPECT_EQ(out.size(), 1u);
  return out[0];
}

TEST(SamplingExtras, StopStringsStopTokensAndSpecialTokens) {
  LLMEngine e(stories());
  const Tokenizer& tok = *e.tokenizer();
  SamplingParams p = greedy(12);
  const RequestOutput free_run = run(e, p);
  const std::string text = free_run.text;
  ASSERT_GE(text.size(), 6u) << text;

  // A stop string inside the greedy text: cut before it, or kept when asked.
  p.stop = {text.substr(2, 3)};
  EXPECT_EQ(run(e, p).text, text.substr(0, 2));
  p.include_stop_str_in_output = true;
  EXPECT_EQ(run(e, p).text, text.substr(0, 5));
  p.stop.clear();

  // A stop token id (the first greedy token, an ordinary one): its text left out, or kept.
  const int32_t first = free_run.token_ids[0];
  SamplingParams s = greedy(12);
  s.stop_token_ids = {first};
  const RequestOutput stopped = run(e, s);
  EXPECT_EQ(stopped.token_ids, std::vector<int32_t>{first});
  EXPECT_EQ(stopped.text, "");
  s.include_stop_str_in_output = true;
  EXPECT_EQ(run(e, s).text, tok.decode({first}, /*skip_special_tokens=*/false));

  // eos forced first (logit_bias): its text never shows, but with both switches set.
  const int32_t eos = static_cast<int32_t>(tok.eos_token_id());
  SamplingParams q = greedy(4);  // ignore_eos: eos is an ordinary (special) token
  q.logit_bias = {{eos, 100.0f}};
  q.skip_special_tokens = false;
  EXPECT_EQ(run(e, q).text, tok.eos_token() + tok.eos_token() + tok.eos_token() + tok.eos_token());
  q.ignore_eos = false;  // eos ends the sequence
  q.skip_special_tokens = true;
  EXPECT_EQ(run(e, q).token_ids, std::vector<int32_t>{eos});
  EXPECT_EQ(run(e, q).text, "");
  q.skip_special_tokens = false;
  EXPECT_EQ(run(e, q).text, "");
  q.include_stop_str_in_output = true;
  EXPECT_EQ(run(e, q).text, tok.eos_token());

  // bos (special, not a stop token) forced: left out of the text unless skip_special_tokens is off.
  const int32_t bos = static_cast<int32_t>(tok.bos_token_id());
  SamplingParams b = greedy(3);
  b.logit_bias = {{bos, 100.0f}};
  const RequestOutput hidden = run(e, b);
  EXPECT_EQ(hidden.token_ids, std::vector<int32_t>(3, bos));
  EXPECT_EQ(hidden.text, "");
  b.skip_special_tokens = false;
  EXPECT_EQ(run(e, b).text, tok.bos_token() + tok.bos_token() + tok.bos_token());
}

TEST(SamplingExtras, TruncatePromptTokensKeepsTheLastK) {
  LLMEngine e(stories());
  const std::vector<int32_t> prompt = e.tokenizer()->encode("Once upon a time there was a little girl named Lily. She", true);
  ASSERT_GT(prompt.size(), 10u);
  const std::vector<int32_t> tail(prompt.end() - 6, prompt.end());
  SamplingParams p = greedy(8);
  const RequestOutput whole = e.generate(std::vector<std::vector<int32_t>>{tail}, p)[0];
  p.truncate_prompt_tokens = 6;
  const RequestOutput cut = e.generate(std::vector<std::vector<int32_t>>{prompt}, p)[0];
  EXPECT_EQ(cut.prompt_token_ids, tail);
  EXPECT_EQ(cut.token_ids, whole.token_ids);
  p.truncate_prompt_tokens = -1;  // max_model_len: longer than the prompt, so all of it
  EXPECT_EQ(e.generate(std::vector<std::vector<int32_t>>{prompt}, p)[0].prompt_token_ids, prompt);
  p.truncate_prompt_tokens = -2;
  EXPECT_THROW(p.validate(), ConfigKeyError);
}

TEST(SamplingExtras, AllowedTokenIdsKeepEveryTokenInTheSet) {
  LLMEngine e(stories());
  const std::vector<int32_t> prompt = e.tokenizer()->encode("Once upon a time", true);
  const int64_t vocab = e.model_config().vocab_size;
  const std::vector<float> logits = e.score(prompt);
  const float* last = logits.data() + (prompt.size() - 1) * vocab;
  const RequestOutput free_run = run(e, greedy(6));
  // Three tokens the free run does not open with (so the mask, not chance, picks among them).
  std::vector<int64_t> set;
  for (int64_t id = 10; set.size() < 3; id += 37) {
    if (id != free_run.token_ids[0]) set.push_back(id);
  }
  int64_t best = set[0];
  for (int64_t id : set) best = last[id] > last[best] ? id : best;
  SamplingParams p = greedy(6);
  p.ignore_eos = false;
  p.allowed_token_ids = set;
  const RequestOutput out = run(e, p);
  ASSERT_EQ(out.token_ids.size(), 6u) << "eos is not in the set: the run goes to max_tokens";
  EXPECT_EQ(out.token_ids[0], best);
  for (int32_t t : out.token_ids) EXPECT_NE(std::find(set.begin(), set.end(), t), set.end()) << t;
  // Sampled too, in a batch beside a request without the key, which stays as it was.
  SamplingParams sampled = p;
  sampled.temperature = 1.0f;
  sampled.seed = 3;
  const int64_t masked = e.add_request(prompt, sampled), plain = e.add_request(prompt, greedy(6));
  std::map<int64_t, RequestOutput> done;
  while (!e.is_finished()) {
    for (RequestOutput& o : e.step().finished) done[o.request_id] = o;
  }
  ASSERT_EQ(done.size(), 2u);
  for (int32_t t : done[masked].token_ids) EXPECT_NE(std::find(set.begin(), set.end(), t), set.end()) << t;
  EXPECT_EQ(done[plain].token_ids, free_run.token_ids);
  // One token: every step is it.
  p.allowed_token_ids = {set[1]};
  EXPECT_EQ(run(e, p).token_ids, std::vector<int32_t>(6, static_cast<int32_t>(set[1])));
  // Refused: an id past the vocabulary, and a second restriction of the next token.
  p.allowed_token_ids = {vocab};
  EXPECT_THROW(e.add_request(prompt, p), ConfigKeyError);
  p.allowed_token_ids = set;
  p.min_tokens = 2;
  EXPECT_THROW(e.add_request(prompt, p), ConfigKeyError);
  p.min_tokens = 0;
  p.structured_outputs.regex = "a+";
  EXPECT_THROW(e.add_request(prompt, p), ConfigKeyError);
}

}  // namespace
}  // namespace minivllm
