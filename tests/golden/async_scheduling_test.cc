// Async scheduling (LLMEngine: step n+1 scheduled and launched before step n's tokens are back),
// forced on for the CPU backend, against the synchronous engine on the same requests: the same
// tokens, texts, finish reasons and cached-token counts, with greedy and seeded sampling, stop
// strings, n > 1, a KV cache small enough to preempt in-flight sequences, aborts between steps, a
// failing step, and mixed penalties / logprobs rows (which fall back to synchronous steps).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "api/llm_engine.h"
#include "engine_test_util.h"
#include "scoped_env.h"

namespace minivllm {
namespace {

EngineConfig tiny(const std::string& async, int blocks = 128) {
  EngineConfig c = tiny_config("qwen3-tiny");
  c.num_kvcache_blocks = blocks;
  c.async_scheduling = async;
  return c;
}

std::vector<int32_t> prompt_of(int n, int32_t start = 3) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[i] = static_cast<int32_t>((start + 37 * i) % 500);
  return p;
}

std::vector<std::vector<int32_t>> prompts(int count) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < count; ++i) out.push_back(prompt_of(5 + 7 * i, 3 + i));
  return out;
}

void expect_same(const std::vector<RequestOutput>& a, const std::vector<RequestOutput>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    EXPECT_EQ(a[i].token_ids, b[i].token_ids);
    EXPECT_EQ(a[i].finish_reason, b[i].finish_reason);
    EXPECT_EQ(a[i].error, b[i].error);
    EXPECT_EQ(a[i].text, b[i].text);
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].logprobs.size(), b[i].logprobs.size());
  }
}

void expect_all_blocks_free(const LLMEngine& engine) {
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

std::vector<RequestOutput> run(const std::string& async, const std::vector<std::vector<int32_t>>& ps,
                               const SamplingParams& p, int blocks = 128) {
  LLMEngine engine(tiny(async, blocks));
  std::vector<RequestOutput> out = engine.generate(ps, p);
  expect_all_blocks_free(engine);
  return out;
}

TEST(AsyncScheduling, GreedyAndSeededSamplingMatchTheSynchronousEngine) {
  SamplingParams g = greedy(9);
  expect_same(run("on", prompts(6), g), run("off", prompts(6), g));
  SamplingParams t;
  t.temperature = 0.8f;
  t.top_p = 0.9f;
  t.seed = 7;
  t.max_tokens = 11;
  t.ignore_eos = true;
  t.n = 3;
  expect_same(run("on", prompts(5), t), run("off", prompts(5), t));
}

// A model whose every layer slides releases its out-of-window blocks in resolve(), while the next
// step is already in flight: the same tokens as the synchronous engine (itself HF's, GoldenTest),
// on a cache of 16 blocks of 16, and every block free at the end.
TEST(AsyncScheduling, SlidingWindowReleaseMatchesTheSynchronousEngine) {
  auto generate = [](const std::string& async) {
    EngineConfig c = tiny_config("mistral-tiny-swa");  // window 12
    c.num_kvcache_blocks = 16;
    c.async_scheduling = async;
    LLMEngine engine(c);
    EXPECT_EQ(engine.config().sliding_window, 12);
    std::vector<RequestOutput> out = engine.generate(prompts(8), greedy(40));  // prompts of 5 .. 54 tokens
    expect_all_blocks_free(engine);
    return out;
  };
  expect_same(generate("on"), generate("off"));
}

// Requests that end at different steps (max_tokens, a stop token id) leave wasted rows in the step
// already in flight; none of them may show up in an output.
TEST(AsyncScheduling, SequencesEndingAtDifferentStepsMatch) {
  LLMEngine sync(tiny("off")), async(tiny("on"));
  for (LLMEngine* e : {&sync, &async}) {
    for (int i = 0; i < 6; ++i) {
      SamplingParams p = greedy(1 + 3 * i);
      e->add_request(prompt_of(9 + i, 11 * i), p);
    }
  }
  auto drain = [](LLMEngine& e) {
    std::vector<RequestOutput> done(6);
    while (!e.is_finished()) {
      for (RequestOutput& o : e.step().finished) done[o.request_id] = o;
    }
    return done;
  };
  expect_same(drain(async), drain(sync));
  expect_all_blocks_free(async);
  // A stop token: the first greedy token of a prompt ends it after one token in both engines.
  const std::vector<int32_t> prompt = prompt_of(12);
  const int32_t first = run("off", {prompt}, greedy(1))[0].token_ids[0];
  SamplingParams p = greedy(8);
  p.stop_token_ids = {first};
  const std::vector<RequestOutput> a = run("on", {prompt, prompt_of(20, 5)}, p);
  expect_same(a, run("off", {prompt, prompt_of(20, 5)}, p));
  EXPECT_EQ(a[0].token_ids.size(), 1u);
  EXPECT_EQ(a[0].finish_reason, "stop");
}

// 24 blocks of 16 tokens for 8 sequences that grow to 80-odd tokens: decodes preempt sequences
// whose tokens are still in flight; each gets its token when the step resolves, and is prefilled
// again later.
TEST(AsyncScheduling, PreemptionOfInFlightSequencesMatches) {
  const SamplingParams g = greedy(48);
  LLMEngine engine(tiny("on", 24));
  const std::vector<RequestOutput> a = engine.generate(prompts(8), g);
  EXPECT_GT(engine.num_preemptions(), 0) << "the cache was meant to be too small";
  expect_all_blocks_free(engine);
  expect_same(a, run("off", prompts(8), g, 24));
  expect_same(a, run("off", prompts(8), g));
}

// Stop strings need the text: they are found when a step resolves, after the next step was
// launched; the text is cut as in the synchronous engine. The streamed deltas equal the outputs.
TEST(AsyncScheduling, StopStringsAndStreamedDeltasMatch) {
  std::map<std::string, std::vector<std::string>> texts;
  for (const std::string& async : {std::string("on"), std::string("off")}) {
    EngineConfig c = stories_config();
    c.async_scheduling = async;
    LLMEngine engine(c);
    const int32_t bos = engine.tokenizer()->bos_token_id();
    for (const std::string& stop : {std::string("little girl"), std::string("named Lily"), std::string("zzz")}) {
      SamplingParams p = greedy(40);
      p.stop = {stop};
      SamplingParams q = p;
      q.temperature = 0.7f;
      q.seed = 3;
      q.n = 2;
      const int64_t a = engine.add_request(std::vector<int32_t>{bos}, p);
      engine.add_request(std::vector<int32_t>{bos}, q);
      std::map<std::pair<int64_t, int>, std::string> streamed, final_text;
      while (!engine.is_finished()) {
        StepResult r = engine.step();
        for (const RequestDelta& d : r.deltas) streamed[{d.request_id, d.index}] += d.text;
        for (const RequestOutput& o : r.finished) final_text[{o.request_id, o.index}] = o.text + "|" + o.finish_reason;
      }
      ASSERT_EQ(final_text.size(), 3u);
      for (const auto& [key, text] : final_text) {
        EXPECT_EQ(streamed[key] + text.substr(text.rfind('|')), text);
        texts[async].push_back(text);
      }
      const std::string& first = final_text[std::make_pair(a, 0)];
      if (stop != "zzz") {
        EXPECT_EQ(first.substr(first.rfind('|')), "|stop");
      }
    }
    expect_all_blocks_free(engine);
  }
  EXPECT_EQ(texts["on"], texts["off"]);
}

TEST(AsyncScheduling, AbortBetweenStepsFreesEverything) {
  LLMEngine engine(tiny("on"));
  const int64_t a = engine.add_request(prompt_of(20), greedy(30));
  const int64_t b = engine.add_request(prompt_of(25, 9), greedy(30));
  for (int i = 0; i < 4; ++i) engine.step();
  EXPECT_TRUE(engine.abort(a));
  RequestOutput out_b;
  while (!engine.is_finished()) {
    for (RequestOutput& o : engine.step().finished) {
      EXPECT_EQ(o.request_id, b);
      out_b = o;
    }
  }
  EXPECT_EQ(out_b.token_ids, run("off", {prompt_of(25, 9)}, greedy(30))[0].token_ids);
  expect_all_blocks_free(engine);
}

// Rows with penalties or logprobs are collected before the next step is launched; batches mixing
// them with plain rows give what the synchronous engine gives.
TEST(AsyncScheduling, PenaltiesAndLogprobsMatch) {
  LLMEngine sync(tiny("off")), async(tiny("on"));
  for (LLMEngine* e : {&sync, &async}) {
    SamplingParams pen = greedy(10);
    pen.repetition_penalty = 1.3f;
    pen.frequency_penalty = 0.5f;
    SamplingParams lp = greedy(6);
    lp.logprobs = 3;
    e->add_request(prompt_of(14), greedy(12));
    e->add_request(prompt_of(18, 4), pen);
    e->add_request(prompt_of(11, 6), lp);
  }
  auto drain = [](LLMEngine& e) {
    std::vector<RequestOutput> done(3);
    while (!e.is_finished()) {
      for (RequestOutput& o : e.step().finished) done[o.request_id] = o;
    }
    return done;
  };
  const std::vector<RequestOutput> a = drain(async), s = drain(sync);
  expect_same(a, s);
  ASSERT_EQ(a[2].logprobs.size(), 6u);
  for (size_t t = 0; t < 6; ++t) {
    EXPECT_EQ(a[2].logprobs[t].token_id, s[2].logprobs[t].token_id);
    EXPECT_FLOAT_EQ(a[2].logprobs[t].logprob, s[2].logprobs[t].logprob);
  }
}

// A failing step fails its batch; the step launched on its tokens fails with it; the engine goes on.
TEST(AsyncScheduling, AFailedStepFailsItsBatchAndTheEngineGoesOn) {
  constexpr int32_t kFault = 499;
  const std::string fault = std::to_string(kFault);
  LLMEngine engine = test::with_env({{"MINIVLLM_STEP_FAULT", fault.c_str()}}, [&] { return LLMEngine(tiny("on")); });
  const int64_t good = engine.add_request(prompt_of(20, 5), greedy(6));
  engine.step();
  engine.step();
  std::vector<int32_t> bad = prompt_of(30);
  for (int32_t& t : bad) t = t == kFault ? 0 : t;
  bad[10] = kFault;
  const int64_t bad_id = engine.add_request(bad, greedy(4));
  std::map<int64_t, RequestOutput> done;
  while (!engine.is_finished()) {
    for (RequestOutput& o : engine.step().finished) done[o.request_id] = o;
  }
  ASSERT_EQ(done.count(bad_id), 1u);
  EXPECT_EQ(done[bad_id].finish_reason, "error");
  EXPECT_NE(done[bad_id].error.find("injected step fault"), std::string::npos);
  ASSERT_EQ(done.count(good), 1u);
  // good shared a batch with bad's prefill, or finished before it: either way it ended, and the
  // engine serves the next request.
  EXPECT_FALSE(done[good].finish_reason.empty());
  EXPECT_EQ(engine.generate({prompt_of(12)}, greedy(5))[0].token_ids,
            run("off", {prompt_of(12)}, greedy(5))[0].token_ids);
  expect_all_blocks_free(engine);
}

// Tensor parallelism (worker processes, the shared-memory communicator): temperature rows take
// the vocabulary-parallel sampler (each rank samples its slice of the vocabulary), top-p rows the
// logits gathered to rank 0; both draw what one rank draws from the same seeds. With async
// scheduling the workers launch each step without waiting for the last one and take the pending
// ids from their own copy of the sampled tokens: the synchronous engine's outputs again.
TEST(AsyncScheduling, TensorParallelMatchesOneRankAndTheSynchronousEngine) {
  auto run_tp = [](int world, const std::string& async, const SamplingParams& p) {
    EngineConfig c = tiny(async);
    c.world_size = world;
    LLMEngine engine(c);
    std::vector<RequestOutput> out = engine.generate(prompts(5), p);
    expect_all_blocks_free(engine);
    return out;
  };
  SamplingParams plain;
  plain.temperature = 0.8f;
  plain.seed = 7;
  plain.max_tokens = 10;
  plain.ignore_eos = true;
  plain.n = 2;
  SamplingParams nucleus = plain;
  nucleus.top_p = 0.9f;
  for (const SamplingParams& p : {plain, nucleus, greedy(8)}) {
    SCOPED_TRACE("temperature " + std::to_string(p.temperature) + " top_p " + std::to_string(p.top_p));
    const std::vector<RequestOutput> one = run_tp(1, "off", p);
    expect_same(run_tp(2, "off", p), one);
    expect_same(run_tp(2, "on", p), one);
  }
}

}  // namespace
}  // namespace minivllm
