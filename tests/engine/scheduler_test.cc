// Scheduler: budgets, prefill before decode, preemption order, stop conditions, abort, rejection.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "common/check.h"

namespace minivllm {
namespace {

constexpr int kBlockSize = 4;

SchedulerConfig make_config(int num_blocks, int max_num_seqs = 8, int max_batched = 64, int max_len = 64) {
  SchedulerConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_batched;
  c.num_kvcache_blocks = num_blocks;
  c.block_size = kBlockSize;
  c.max_model_length = max_len;
  c.eos_token_ids = {2};
  c.enable_chunked_prefill = false;  // these tests pin the whole-prompt scheduler; chunked_scheduler_test.cc the other
  return c;
}

std::shared_ptr<Sequence> make_seq(int64_t id, int n, SamplingParams p = {}, int32_t start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start + static_cast<int32_t>(id) * 1000);
  return std::make_shared<Sequence>(id, std::move(t), p, kBlockSize);
}

std::vector<int64_t> ids(const ScheduledBatch& b) {
  std::vector<int64_t> out;
  for (Sequence* s : b.seqs) out.push_back(s->seq_id());
  return out;
}

// Samples token 7 (never eos) for every sequence of the batch.
std::vector<std::shared_ptr<Sequence>> step_tokens(Scheduler& s, const ScheduledBatch& b, int32_t token = 7) {
  return s.postprocess(b.seqs, std::vector<int32_t>(b.seqs.size(), token));
}

TEST(Scheduler, MaxNumSeqsBoundsRunningSequences) {
  Scheduler s(make_config(100, /*max_num_seqs=*/2));
  for (int i = 0; i < 3; ++i) s.add(make_seq(i, 5));
  ScheduledBatch b = s.schedule();
  EXPECT_TRUE(b.is_prefill);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(b.num_tokens, 10);
  step_tokens(s, b);
  b = s.schedule();
  EXPECT_FALSE(b.is_prefill);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_EQ(s.num_running(), 2);
  // Once one finishes, the waiting one is prefilled before any decode.
  s.postprocess(b.seqs, {2, 7});
  b = s.schedule();
  EXPECT_TRUE(b.is_prefill);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{2}));
}

TEST(Scheduler, MaxNumBatchedTokensAndPrefillBeforeDecode) {
  Scheduler s(make_config(100, 8, /*max_batched=*/16, /*max_len=*/16));
  s.add(make_seq(0, 10));
  s.add(make_seq(1, 10));
  ScheduledBatch b = s.schedule();
  EXPECT_TRUE(b.is_prefill);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0}));
  step_tokens(s, b);
  b = s.schedule();
  EXPECT_TRUE(b.is_prefill);  // the waiting sequence goes before seq 0's decode
  EXPECT_EQ(ids(b), (std::vector<int64_t>{1}));
  step_tokens(s, b);
  b = s.schedule();
  EXPECT_FALSE(b.is_prefill);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(b.num_tokens, 2);
}

TEST(Scheduler, CachedPrefixTokensDoNotCountAgainstTheBudget) {
  Scheduler s(make_config(100, 8, /*max_batched=*/16, /*max_len=*/16));
  std::vector<int32_t> prefix = {11, 12, 13, 14, 15, 16, 17, 18};
  auto with_tail = [&](int64_t id, std::vector<int32_t> tail) {
    std::vector<int32_t> t = prefix;
    t.insert(t.end(), tail.begin(), tail.end());
    return std::make_shared<Sequence>(id, t, SamplingParams{}, kBlockSize);
  };
  s.add(with_tail(0, {1, 3, 4, 5}));
  ScheduledBatch b = s.schedule();
  EXPECT_EQ(b.num_tokens, 12);
  step_tokens(s, b);
  s.add(with_tail(1, {6, 8, 9, 10}));  // 8 cached, 4 to compute
  s.add(make_seq(2, 12));             // 12 to compute: 16 in all
  b = s.schedule();
  EXPECT_TRUE(b.is_prefill);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.seqs[0]->num_cached_tokens, 8);
  EXPECT_EQ(b.num_tokens, 16);
}

TEST(Scheduler, PreemptsFromTheBackAndRequeuesAtTheFront) {
  // 3 blocks of 4 tokens: three 4-token prompts fill the cache; each decode then needs a block.
  Scheduler s(make_config(3, 8, 12, 12));
  for (int i = 0; i < 3; ++i) s.add(make_seq(i, 4));
  ScheduledBatch b = s.schedule();
  ASSERT_EQ(ids(b), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(s.block_manager().num_free_blocks(), 0);
  const int32_t block_of_2 = b.seqs[2]->block_table[0];
  Sequence* two = b.seqs[2];
  step_tokens(s, b);
  b = s.schedule();
  EXPECT_FALSE(b.is_prefill);
  // 0 takes the block of 2 (the last running); 1 is then alone and preempts itself.
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0}));
  EXPECT_EQ(b.seqs[0]->block_table, (std::vector<int32_t>{b.seqs[0]->block_table[0], block_of_2}));
  EXPECT_EQ(two->status, SequenceStatus::kWaiting);
  EXPECT_TRUE(two->block_table.empty());
  EXPECT_EQ(s.num_running(), 1);
  ASSERT_EQ(s.num_waiting(), 2);
  std::shared_ptr<Sequence> aborted_1 = s.abort(1);  // also checks the waiting order through abort
  ASSERT_NE(aborted_1, nullptr);
  EXPECT_TRUE(aborted_1->block_table.empty());
  EXPECT_EQ(aborted_1->num_tokens(), 5);
  EXPECT_EQ(s.block_manager().num_free_blocks(), 1);
}

TEST(Scheduler, PreemptedSequencesWaitInRunningOrder) {
  Scheduler s(make_config(3, 8, 12, 12));
  for (int i = 0; i < 3; ++i) s.add(make_seq(i, 4));
  step_tokens(s, s.schedule());
  ScheduledBatch b = s.schedule();
  ASSERT_EQ(ids(b), (std::vector<int64_t>{0}));
  Sequence* zero = b.seqs[0];
  EXPECT_EQ(zero->block_table.size(), 2u);
  step_tokens(s, b);
  // 1 (preempted last, pushed to the front) needs 2 blocks with 1 free: decode of 0 goes on.
  b = s.schedule();
  EXPECT_FALSE(b.is_prefill);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0}));
  // Finishing 0 frees its blocks; 1 is prefilled before 2, each with its recomputed tokens.
  s.postprocess(b.seqs, {2});
  b = s.schedule();
  EXPECT_TRUE(b.is_prefill);
  ASSERT_GE(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0]->seq_id(), 1);
  EXPECT_EQ(b.seqs[0]->num_tokens(), 5);
  EXPECT_EQ(b.seqs[0]->num_cached_tokens, 4);  // its first block was still cached
  EXPECT_EQ(b.seqs[0]->status, SequenceStatus::kRunning);
}

TEST(Scheduler, FinishesOnEosStopTokensAndLengths) {
  Scheduler s(make_config(100, 8, 64, 8));
  SamplingParams ignore;
  ignore.ignore_eos = true;
  SamplingParams stop_tok;
  stop_tok.stop_token_ids = {5};
  SamplingParams short_max;
  short_max.max_tokens = 2;
  s.add(make_seq(0, 4));              // eos
  s.add(make_seq(1, 4, ignore));      // eos ignored, then the context limit (8)
  s.add(make_seq(2, 4, stop_tok));    // stop token id
  s.add(make_seq(3, 4, short_max));   // max_tokens
  ScheduledBatch b = s.schedule();
  ASSERT_EQ(b.seqs.size(), 4u);
  std::vector<std::shared_ptr<Sequence>> done = s.postprocess(b.seqs, {2, 2, 5, 7});
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0]->seq_id(), 0);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::kStop);
  EXPECT_EQ(done[1]->seq_id(), 2);
  EXPECT_EQ(done[1]->finish_reason, FinishReason::kStop);
  EXPECT_TRUE(done[0]->is_finished());
  EXPECT_TRUE(done[0]->block_table.empty());
  b = s.schedule();
  EXPECT_EQ(ids(b), (std::vector<int64_t>{1, 3}));
  done = s.postprocess(b.seqs, {2, 7});
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->seq_id(), 3);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::kLength);
  EXPECT_EQ(done[0]->num_completion_tokens(), 2);
  b = s.schedule();
  EXPECT_EQ(ids(b), (std::vector<int64_t>{1}));
  EXPECT_TRUE(s.postprocess(b.seqs, {2}).empty());  // 7 tokens
  b = s.schedule();
  done = s.postprocess(b.seqs, {2});
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->seq_id(), 1);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::kLength);
  EXPECT_EQ(done[0]->num_tokens(), 8);
  EXPECT_TRUE(s.is_finished());
  EXPECT_EQ(s.block_manager().num_free_blocks(), 100);
  EXPECT_TRUE(s.schedule().empty());
}

TEST(Scheduler, AbortAndFinishFreeBlocks) {
  Scheduler s(make_config(10));
  s.add(make_seq(0, 6));
  s.add(make_seq(1, 6));
  ScheduledBatch b = s.schedule();
  ASSERT_EQ(b.seqs.size(), 2u);
  s.add(make_seq(2, 6));
  EXPECT_EQ(s.block_manager().num_free_blocks(), 6);
  std::shared_ptr<Sequence> a = s.abort(0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(a->is_finished());
  EXPECT_EQ(s.block_manager().num_free_blocks(), 8);
  EXPECT_EQ(s.abort(2)->finish_reason, FinishReason::kAbort);  // a waiting one
  EXPECT_EQ(s.abort(2), nullptr);
  EXPECT_EQ(s.abort(99), nullptr);
  // The aborted sequence's sampled token is ignored.
  std::vector<std::shared_ptr<Sequence>> done = s.postprocess(b.seqs, {7, 7});
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(a->num_tokens(), 6);
  std::shared_ptr<Sequence> one = s.finish(b.seqs[1], FinishReason::kStop);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->finish_reason, FinishReason::kStop);
  EXPECT_EQ(s.finish(b.seqs[1], FinishReason::kLength), nullptr);  // already finished
  EXPECT_EQ(one->finish_reason, FinishReason::kStop);
  EXPECT_TRUE(s.is_finished());
  EXPECT_EQ(s.block_manager().num_free_blocks(), 10);
}

TEST(Scheduler, StopStringCheckIsOneOfTheFinishReasons) {
  Scheduler s(make_config(10));
  s.add(make_seq(0, 4));
  s.add(make_seq(1, 4));
  ScheduledBatch b = s.schedule();
  int calls = 0;
  auto done = s.postprocess(b.seqs, {7, 7}, [&](Sequence& seq) {
    ++calls;
    EXPECT_EQ(seq.num_tokens(), 5);  // called after the append
    return seq.seq_id() == 1;
  });
  EXPECT_EQ(calls, 2);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->seq_id(), 1);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::kStop);
}

// A failed step: its sequences end with kError, their blocks are freed and the blocks it filled
// are never found by the prefix cache; the others go on.
TEST(Scheduler, FailedStepFailsItsBatchAndRegistersNoHash) {
  Scheduler s(make_config(20));
  s.add(make_seq(0, 9));
  ScheduledBatch b = s.schedule();
  auto failed = s.fail(b.seqs);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]->finish_reason, FinishReason::kError);
  EXPECT_EQ(failed[0]->slot, -1);
  EXPECT_EQ(s.block_manager().num_free_blocks(), 20);
  s.add(make_seq(0, 9));  // the same tokens again: nothing cached
  b = s.schedule();
  EXPECT_EQ(b.seqs[0]->num_cached_tokens, 0);
  step_tokens(s, b);
  s.add(make_seq(0, 9));  // after a successful step: both full blocks are found
  b = s.schedule();
  EXPECT_EQ(b.seqs[0]->num_cached_tokens, 8);
}

// Running sequences hold distinct slots in [0, max_num_seqs); preemption and finishing free them.
TEST(Scheduler, RunningSequencesHoldDistinctSlots) {
  Scheduler s(make_config(3, 3, 12, 12));
  for (int i = 0; i < 3; ++i) s.add(make_seq(i, 4));
  ScheduledBatch b = s.schedule();
  std::vector<int> slots;
  for (Sequence* q : b.seqs) slots.push_back(q->slot);
  std::sort(slots.begin(), slots.end());
  EXPECT_EQ(slots, (std::vector<int>{0, 1, 2}));
  Sequence* two = b.seqs[2];
  step_tokens(s, b);
  b = s.schedule();  // preempts 2 and 1
  EXPECT_EQ(two->status, SequenceStatus::kWaiting);
  EXPECT_EQ(two->slot, -1);
  EXPECT_GE(b.seqs[0]->slot, 0);
  s.finish(b.seqs[0], FinishReason::kStop);
  EXPECT_EQ(b.seqs[0]->slot, -1);
}

TEST(Scheduler, RejectsPromptsThatCanNeverFit) {
  Scheduler s(make_config(2, 8, 64, 64));
  try {
    s.add(make_seq(0, 9));
    FAIL() << "a 9-token prompt fits no 2-block cache";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("9 tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 blocks"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(s.add(make_seq(1, 8)));
  Scheduler t(make_config(100, 8, 64, 16));
  EXPECT_THROW(t.add(make_seq(0, 17)), Error);
  EXPECT_THROW(t.add(std::make_shared<Sequence>(1, std::vector<int32_t>{}, SamplingParams{}, kBlockSize)), Error);
  EXPECT_THROW(t.add(std::make_shared<Sequence>(2, std::vector<int32_t>{1}, SamplingParams{}, 8)), Error);
  EXPECT_THROW(Scheduler(make_config(100, 8, /*max_batched=*/32, /*max_len=*/64)), Error);
}

TEST(Scheduler, SmallCacheCapsLengthInsteadOfHanging) {
  Scheduler s(make_config(3, 8, 64, 64));
  EXPECT_EQ(s.max_sequence_length(), 12);
  SamplingParams p;
  p.max_tokens = 100;
  s.add(make_seq(0, 10, p));
  std::vector<std::shared_ptr<Sequence>> done;
  for (int step = 0; step < 10 && done.empty(); ++step) done = step_tokens(s, s.schedule());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::kLength);
  EXPECT_EQ(done[0]->num_tokens(), 12);
}

// Many sequences with shared prefixes through a tight cache: every step respects the budgets, the
// engine always progresses, every request gets its tokens and every block comes back.
TEST(Scheduler, StressRunsToCompletionWithinBudgets) {
  SchedulerConfig c = make_config(12, 4, 24, 24);
  Scheduler s(c);
  std::mt19937 rng(5);
  std::vector<std::shared_ptr<Sequence>> all;
  for (int i = 0; i < 20; ++i) {
    std::vector<int32_t> t = {1, 3, 4, 5, 6, 8, 9, 10};  // a shared 2-block prefix
    t.resize(static_cast<size_t>(2 + rng() % 12), 0);
    for (size_t j = 8; j < t.size(); ++j) t[j] = 20 + static_cast<int32_t>(rng() % 5);
    SamplingParams p;
    p.max_tokens = 1 + static_cast<int>(rng() % 10);
    all.push_back(std::make_shared<Sequence>(i, t, p, kBlockSize));
    s.add(all.back());
  }
  int finished = 0, steps = 0;
  while (!s.is_finished()) {
    ASSERT_LT(++steps, 2000);
    ScheduledBatch b = s.schedule();
    ASSERT_FALSE(b.empty());
    EXPECT_LE(static_cast<int>(b.seqs.size()), c.max_num_seqs);
    EXPECT_LE(b.num_tokens, c.max_num_batched_tokens);
    EXPECT_LE(s.num_running(), c.max_num_seqs);
    for (Sequence* q : b.seqs) EXPECT_EQ(static_cast<int>(q->block_table.size()), q->num_blocks());
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < b.seqs.size(); ++i) tokens.push_back(30 + static_cast<int32_t>(rng() % 3));
    finished += static_cast<int>(s.postprocess(b.seqs, tokens).size());
  }
  EXPECT_EQ(finished, 20);
  for (const auto& q : all) {
    EXPECT_EQ(q->finish_reason, FinishReason::kLength);
    EXPECT_EQ(q->num_completion_tokens(), std::min(q->params().max_tokens, 24 - q->num_prompt_tokens()));
  }
  EXPECT_EQ(s.block_manager().num_free_blocks(), 12);
}

}  // namespace
}  // namespace minivllm
