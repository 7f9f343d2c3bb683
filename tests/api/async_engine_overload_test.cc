// AsyncEngine under pressure, on stories260K on the CPU: a full waiting queue refuses a request
// (QueueFullError, counted) instead of queueing it, and a request past its deadline ends with an
// error, counted, with its KV blocks freed.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "api/async_engine.h"
#include "../golden/engine_test_util.h"

namespace minivllm {
namespace {

using std::chrono::milliseconds;

EngineConfig pressure_config(int max_num_seqs, int max_waiting_requests) {
  EngineConfig c = tiny_config("unused");
  c.model = std::string(MINIVLLM_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  c.max_num_seqs = max_num_seqs;
  c.max_waiting_requests = max_waiting_requests;
  return c;
}

SamplingParams long_greedy() {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 200;
  p.ignore_eos = true;
  return p;
}

TEST(AsyncEngineOverload, AFullWaitingQueueRefusesAndCounts) {
  AsyncEngine engine(pressure_config(/*max_num_seqs=*/1, /*max_waiting_requests=*/1));
  const std::vector<int32_t> ids = engine.tokenize_text("Once upon a time");
  // Paused, nothing is scheduled: the first submit waits and the other four are refused, however
  // fast the engine thread would have stepped (stepping, it raced the submits: a CI flake).
  engine.pause_generation();
  std::vector<std::unique_ptr<RequestHandle>> taken;
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    try {
      taken.push_back(engine.submit_tokens(ids, long_greedy()));
    } catch (const QueueFullError& e) {
      EXPECT_NE(std::string(e.what()).find("max_waiting_requests is 1"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 4);
  EXPECT_EQ(engine.stats().num_requests_rejected, refused);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_TRUE(taken[0]->next(milliseconds(50)).empty()) << "a paused engine stepped";
  engine.resume_generation();
  EXPECT_EQ(taken[0]->wait().at(0).finish_reason, "length");
  // The queue has room again.
  EXPECT_NO_THROW(engine.submit_tokens(ids, long_greedy())->wait());
}

// One HTTP call's prompts go in together, all or none: a batch that the queue cannot take whole is
// refused, and the requests of it already added are aborted, not left running for nobody.
TEST(AsyncEngineOverload, ABatchIsAddedWholeOrNotAtAll) {
  AsyncEngine engine(pressure_config(/*max_num_seqs=*/1, /*max_waiting_requests=*/3));
  const std::vector<int32_t> ids = engine.tokenize_text("Once upon a time");
  engine.pause_generation();
  EXPECT_THROW(engine.submit_tokens_batch({ids, ids, ids, ids}, std::vector<SamplingParams>(4, long_greedy())),
               QueueFullError);
  EXPECT_EQ(engine.stats().num_requests_in_flight, 0) << "a refused batch left some of its requests";
  auto batch = engine.submit_tokens_batch({ids, ids, ids}, std::vector<SamplingParams>(3, long_greedy()));
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(engine.stats().num_requests_in_flight, 3);
  EXPECT_EQ(batch[2]->prompt_token_ids(), ids);
  engine.resume_generation();
  for (auto& h : batch) EXPECT_EQ(h->wait().at(0).finish_reason, "length");
}

TEST(AsyncEngineOverload, ARequestPastItsDeadlineEndsWithAnErrorAndFreesItsBlocks) {
  AsyncEngine engine(pressure_config(/*max_num_seqs=*/16, /*max_waiting_requests=*/16));
  const std::vector<int32_t> ids = engine.tokenize_text("Once upon a time");
  // Already past: it ends before its first step. The other has no deadline and runs to the end.
  auto late = engine.submit_tokens(ids, long_greedy(), AsyncEngine::Clock::now());
  auto unbounded = engine.submit_tokens(ids, long_greedy());
  const RequestOutput out = late->wait().at(0);
  EXPECT_EQ(out.finish_reason, "error");
  EXPECT_NE(out.error.find("deadline"), std::string::npos) << out.error;
  EXPECT_EQ(unbounded->wait().at(0).finish_reason, "length");
  for (int i = 0; i < 200 && engine.stats().num_requests_in_flight > 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  const ServingStats s = engine.stats();
  EXPECT_EQ(s.num_requests_timed_out, 1);
  EXPECT_EQ(s.engine.kv_blocks_free, s.engine.kv_blocks_total);
}

}  // namespace
}  // namespace minivllm
