// AsyncEngine on a real tiny model (stories260K on the CPU): streams that add up to the final
// text, submissions from many threads, synchronous rejections, aborts (explicit, by dropping the
// handle, by shutdown) and the counters behind /metrics.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "api/async_engine.h"
#include "common/check.h"
#include "../golden/engine_test_util.h"

namespace minivllm {
namespace {

using std::chrono::milliseconds;

// The golden tests' small CPU settings, with the real trained stories260K.
EngineConfig stories_config() {
  EngineConfig c = tiny_config("unused");
  c.model = std::string(MINIVLLM_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  return c;
}

// Reads a whole stream: the concatenated text and the final outputs. first_token, when given, is
// raised once the stream has delivered a token, after pausing pause_engine when one is given.
struct Collected {
  std::string text;
  std::vector<int32_t> token_ids;
  int finals = 0;
  RequestOutput output;
};
Collected collect(RequestHandle& h, std::atomic<bool>* first_token = nullptr, AsyncEngine* pause_engine = nullptr) {
  Collected c;
  while (!h.finished()) {
    for (StreamEvent& e : h.next(milliseconds(1000))) {
      c.text += e.text;
      c.token_ids.insert(c.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
      if (first_token != nullptr && !c.token_ids.empty() && !first_token->load()) {
        if (pause_engine != nullptr) pause_engine->pause_generation();
        first_token->store(true);
      }
      if (e.final) {
        ++c.finals;
        c.output = *e.final;
      }
    }
  }
  return c;
}

// Waits until the engine thread has nothing in flight (the step after an abort).
bool wait_idle(const AsyncEngine& engine) {
  for (int i = 0; i < 200; ++i) {
    if (engine.stats().num_requests_in_flight == 0) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

TEST(AsyncEngine, StreamAddsUpToTheFinalOutput) {
  AsyncEngine engine(stories_config());
  auto h = engine.submit_text("Once upon a time", greedy(24));
  const Collected c = collect(*h);
  EXPECT_EQ(c.finals, 1);
  EXPECT_EQ(c.output.finish_reason, "length");
  EXPECT_EQ(c.text, c.output.text);
  EXPECT_EQ(c.token_ids, c.output.token_ids);
  EXPECT_EQ(c.token_ids.size(), 24u);
  EXPECT_FALSE(h->prompt_token_ids().empty());
}

TEST(AsyncEngine, ManyThreadsGetWhatOneAtATimeGets) {
  AsyncEngine engine(stories_config());
  const std::vector<std::string> prompts = {"Once upon a time", "The cat", "Lily and Tom", "One day",
                                            "The sun was", "A little dog", "Mom said", "They played"};
  std::vector<std::string> alone;
  for (const std::string& p : prompts) alone.push_back(engine.submit_text(p, greedy(16))->wait().at(0).text);
  std::vector<std::string> together(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] { together[i] = engine.submit_text(prompts[i], greedy(16))->wait().at(0).text; });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(together, alone);
  const ServingStats s = engine.stats();
  EXPECT_EQ(s.time_to_first_token.count(), 2 * prompts.size());
  EXPECT_EQ(s.e2e_request_latency.count(), 2 * prompts.size());
  EXPECT_EQ(s.inter_token_latency.count(), 2 * prompts.size() * 15);
  EXPECT_EQ(s.engine.generation_tokens_total, static_cast<int64_t>(2 * prompts.size() * 16));
}

TEST(AsyncEngine, RejectionsReachTheSubmitterAndTheEngineGoesOn) {
  AsyncEngine engine(stories_config());
  EXPECT_THROW(engine.submit_tokens(std::vector<int32_t>(300, 5), greedy(4)), Error);  // over max_model_length
  EXPECT_THROW(engine.submit_tokens({1, 100000}, greedy(4)), Error);                  // outside the vocabulary
  EXPECT_THROW(engine.submit_tokens({}, greedy(4)), Error);
  SamplingParams bad = greedy(4);
  bad.top_p = 0;
  EXPECT_THROW(engine.submit_text("Once", bad), Error);
  EXPECT_THROW(engine.submit_chat(nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}}), greedy(4)), Error)
      << "stories260K has no chat template";
  EXPECT_EQ(engine.submit_text("Once upon a time", greedy(4))->wait().at(0).token_ids.size(), 4u);
}

// The other thread aborts once the stream is under way, not after a fixed delay: stories260K can
// generate all its tokens in under 20 ms (a fixed 20 ms sleep let the request finish first). The
// engine is paused at the first token the consumer sees, so the aborter's wake-up races nothing.
TEST(AsyncEngine, AbortFromAnotherThreadEndsTheStream) {
  AsyncEngine engine(stories_config());
  auto h = engine.submit_text("Once upon a time", greedy(240));
  std::atomic<bool> started{false};
  std::thread aborter([&] {
    while (!started.load()) std::this_thread::sleep_for(std::chrono::microseconds(20));
    engine.abort(h->id());
    engine.resume_generation();
  });
  const Collected c = collect(*h, &started, &engine);
  started = true;  // a stream that ended without a token must not leave the aborter waiting
  aborter.join();
  EXPECT_EQ(c.finals, 1);
  EXPECT_EQ(c.output.finish_reason, "abort");
  EXPECT_LT(c.token_ids.size(), 240u);
  EXPECT_TRUE(wait_idle(engine));
}

TEST(AsyncEngine, DroppedHandleAbortsItsRequestAndFreesItsBlocks) {
  AsyncEngine engine(stories_config());
  {
    auto h = engine.submit_text("Once upon a time", greedy(200));
    while (h->next(milliseconds(1000)).empty()) {
    }
  }  // a client that went away
  ASSERT_TRUE(wait_idle(engine));
  const ServingStats s = engine.stats();
  EXPECT_EQ(s.finished_by_reason.at("abort"), 1);
  EXPECT_EQ(s.engine.num_running, 0);
  EXPECT_EQ(s.engine.kv_blocks_free, s.engine.kv_blocks_total);
  // The engine still serves.
  EXPECT_EQ(engine.submit_text("Once", greedy(3))->wait().at(0).finish_reason, "length");
}

TEST(AsyncEngine, ShutdownEndsStreamsInFlightAndRefusesNewWork) {
  AsyncEngine engine(stories_config());
  auto h = engine.submit_text("Once upon a time", greedy(250));
  engine.shutdown();
  const Collected c = collect(*h);
  EXPECT_EQ(c.output.finish_reason, "abort");
  EXPECT_THROW(engine.submit_text("Once", greedy(3)), Error);
  engine.shutdown();  // idempotent
}

TEST(AsyncEngine, BadModelThrowsFromTheConstructor) {
  EngineConfig c = stories_config();
  c.model = "/nonexistent/model.gguf";
  EXPECT_THROW(AsyncEngine engine(c), Error);
}

}  // namespace
}  // namespace minivllm
