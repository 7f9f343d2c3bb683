// Scheduler::advance / resolve, the two halves of postprocess that async scheduling pulls apart: the
// next step is scheduled between them, over placeholder tokens.
#include <gtest/gtest.h>

#include <numeric>

#include "common/check.h"
#include "engine/scheduler.h"
#include "engine/step_input.h"

namespace minivllm {
namespace {

constexpr int kBlockSize = 4;

SchedulerConfig config(int num_blocks, int max_batched = 64) {
  SchedulerConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = max_batched;
  c.num_kvcache_blocks = num_blocks;
  c.block_size = kBlockSize;
  c.max_model_length = 64;
  c.eos_token_ids = {2};
  return c;
}

std::shared_ptr<Sequence> make_seq(int64_t id, int n, int max_tokens = 16) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 100 + static_cast<int32_t>(id) * 1000);
  SamplingParams p;
  p.max_tokens = max_tokens;
  return std::make_shared<Sequence>(id, std::move(t), p, kBlockSize);
}

TEST(AsyncScheduler, TheNextStepIsScheduledOverPlaceholders) {
  Scheduler s(config(100));
  auto a = make_seq(0, 6), b = make_seq(1, 3);
  s.add(a);
  s.add(b);
  ScheduledBatch first = s.schedule();  // both prompts
  s.advance(first);
  EXPECT_EQ(a->num_tokens(), 7);
  EXPECT_EQ(a->last_token(), pending_token(0));
  EXPECT_EQ(b->last_token(), pending_token(1));
  ScheduledBatch second = s.schedule();  // before first's tokens are known
  ASSERT_EQ(second.seqs.size(), 2u);
  EXPECT_FALSE(second.is_prefill);
  const StepInput in = build_step_input(second.seqs, false, 16);
  EXPECT_EQ(in.input_ids, (std::vector<int32_t>{pending_token(0), pending_token(1)}));
  EXPECT_EQ(in.positions, (std::vector<int32_t>{6, 3}));
  // Nothing of the first step is in the prefix cache until it resolves.
  EXPECT_EQ(s.block_manager().num_cached_tokens_if_allocated(*make_seq(0, 6)), 0);
  EXPECT_TRUE(s.resolve(first, {2, 9}).size() == 1) << "a sampled eos";
  EXPECT_TRUE(a->is_finished());
  EXPECT_EQ(a->token_ids().back(), 2);
  EXPECT_EQ(b->token_ids().back(), 9);
  EXPECT_EQ(s.block_manager().num_cached_tokens_if_allocated(*make_seq(0, 6)), 4) << "block 0 registered";
  // The second step still holds a's row: advance and resolve skip it.
  s.advance(second);
  EXPECT_EQ(a->num_tokens(), 7);
  EXPECT_EQ(b->last_token(), pending_token(1));
  EXPECT_TRUE(s.resolve(second, {5, 11}).empty());
  EXPECT_EQ(b->completion_token_ids(), (std::vector<int32_t>{9, 11}));
  EXPECT_EQ(s.num_running(), 1);
}

// A decode that needs a block preempts a sequence whose token is still in flight: it waits with its
// placeholder, and gets its token (and its finish decision) when the step resolves.
TEST(AsyncScheduler, ASequencePreemptedInFlightGetsItsToken) {
  for (const int32_t b_token : {2, 9}) {  // eos: b finishes from the waiting queue; else it waits
    Scheduler s(config(4));
    auto a = make_seq(0, 8), b = make_seq(1, 7);
    s.add(a);
    s.add(b);
    ScheduledBatch first = s.schedule();  // 2 + 2 blocks: the cache is full
    ASSERT_EQ(first.seqs.size(), 2u);
    s.advance(first);  // a: 9 tokens (its placeholder needs a third block), b: 8
    ScheduledBatch second = s.schedule();
    ASSERT_EQ(second.seqs.size(), 1u);
    EXPECT_EQ(second.seqs[0], a.get());
    EXPECT_EQ(s.num_preemptions(), 1);
    EXPECT_EQ(b->status, SequenceStatus::kWaiting);
    EXPECT_EQ(b->last_token(), pending_token(1));
    const auto done = s.resolve(first, {7, b_token});
    EXPECT_EQ(b->completion_token_ids(), (std::vector<int32_t>{b_token}));
    if (b_token == 2) {
      ASSERT_EQ(done.size(), 1u);
      EXPECT_EQ(done[0].get(), b.get());
      EXPECT_EQ(s.num_waiting(), 0);
    } else {
      EXPECT_TRUE(done.empty());
      EXPECT_EQ(s.num_waiting(), 1);
    }
    s.advance(second);
    EXPECT_TRUE(s.resolve(second, {7}).empty());
    EXPECT_EQ(a->completion_token_ids(), (std::vector<int32_t>{7, 7}));
  }
}

TEST(AsyncScheduler, ResolveChecksItsStep) {
  Scheduler s(config(100));
  s.add(make_seq(0, 5));
  ScheduledBatch b = s.schedule();
  EXPECT_THROW(s.resolve(b, {7}), Error) << "not advanced";
  s.advance(b);
  EXPECT_THROW(s.advance(b), Error);
  EXPECT_THROW(s.resolve(b, {}), Error) << "one token per sampling row";
  EXPECT_TRUE(s.resolve(b, {7}).empty());
}

}  // namespace
}  // namespace minivllm
