// Chunked prefill: prompts longer than the token budget over several steps, decodes batched first
// with prefill chunks after them, which rows sample, the StepInput of a mixed batch, prefix-cache
// hashes only for blocks a successful step wrote, preemption, failure and abort mid-prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "common/check.h"
#include "engine/scheduler.h"
#include "engine/step_input.h"

namespace minivllm {
namespace {

constexpr int kBs = 4;

SchedulerConfig chunked_config(int num_blocks, int max_batched, int max_num_seqs = 8, int max_len = 64) {
  SchedulerConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_batched;
  c.num_kvcache_blocks = num_blocks;
  c.block_size = kBs;
  c.max_model_length = max_len;
  c.eos_token_ids = {2};
  c.enable_chunked_prefill = true;
  return c;
}

std::shared_ptr<Sequence> make_seq(int64_t id, int n, SamplingParams p = {}) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 100 + static_cast<int32_t>(id) * 1000);
  return std::make_shared<Sequence>(id, std::move(t), p, kBs);
}

std::shared_ptr<Sequence> seq_of(int64_t id, std::vector<int32_t> tokens, SamplingParams p = {}) {
  return std::make_shared<Sequence>(id, std::move(tokens), p, kBs);
}

std::vector<int64_t> ids(const ScheduledBatch& b) {
  std::vector<int64_t> out;
  for (Sequence* s : b.seqs) out.push_back(s->seq_id());
  return out;
}

std::vector<int> spans(const ScheduledBatch& b) {
  std::vector<int> out;
  for (Sequence* s : b.seqs) out.push_back(s->num_new_tokens);
  return out;
}

// The step succeeded: token 7 (never eos) for each row that samples.
std::vector<std::shared_ptr<Sequence>> succeed(Scheduler& s, const ScheduledBatch& b, int32_t token = 7) {
  size_t n = 0;
  for (Sequence* q : b.seqs) n += q->samples() ? 1 : 0;
  return s.postprocess(b.seqs, std::vector<int32_t>(n, token));
}

TEST(ChunkedScheduler, LongPromptIsPrefilledInChunksAndSamplesOnlyAtItsEnd) {
  Scheduler s(chunked_config(100, /*max_batched=*/8));
  s.add(make_seq(0, 20));
  ScheduledBatch b = s.schedule();
  EXPECT_TRUE(b.is_prefill);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0}));
  EXPECT_EQ(b.num_tokens, 8);
  Sequence& q = *b.seqs[0];
  EXPECT_EQ(q.num_computed_tokens, 0);
  EXPECT_EQ(q.num_new_tokens, 8);
  EXPECT_FALSE(q.samples());
  EXPECT_EQ(q.block_table.size(), 5u) << "every block of the prompt is allocated up front";
  // A token for a row that does not sample is an error.
  EXPECT_THROW(s.postprocess(b.seqs, {7}), Error);
  EXPECT_TRUE(succeed(s, b).empty());
  EXPECT_EQ(q.num_computed_tokens, 8);
  EXPECT_EQ(q.num_tokens(), 20) << "a partial chunk appends nothing";
  EXPECT_FALSE(q.prefilled);

  b = s.schedule();
  EXPECT_EQ(spans(b), (std::vector<int>{8}));
  EXPECT_EQ(q.num_computed_tokens, 8);
  succeed(s, b);
  b = s.schedule();
  EXPECT_EQ(spans(b), (std::vector<int>{4}));
  EXPECT_TRUE(q.samples());
  EXPECT_TRUE(b.is_prefill);
  succeed(s, b);
  EXPECT_EQ(q.num_tokens(), 21);
  EXPECT_EQ(q.num_computed_tokens, 20);
  EXPECT_TRUE(q.prefilled);
  b = s.schedule();
  EXPECT_FALSE(b.is_prefill) << "a pure decode step keeps the decode path (CUDA graphs)";
  EXPECT_EQ(spans(b), (std::vector<int>{1}));
}

TEST(ChunkedScheduler, BudgetBelowMaxModelLengthIsAcceptedAndBelowOneIsNot) {
  EXPECT_NO_THROW(Scheduler(chunked_config(100, /*max_batched=*/1)));
  EXPECT_THROW(Scheduler(chunked_config(100, /*max_batched=*/0)), Error);
  SchedulerConfig whole = chunked_config(100, 8);
  whole.enable_chunked_prefill = false;
  EXPECT_THROW(Scheduler{whole}, Error) << "whole prompts need max_num_batched_tokens >= max_model_length";
}

TEST(ChunkedScheduler, OnlyBlocksAStepFilledAreFoundInThePrefixCache) {
  Scheduler s(chunked_config(100, /*max_batched=*/6));
  s.add(make_seq(0, 20));
  ScheduledBatch b = s.schedule();  // tokens [0, 6): block 0 full, block 1 half written
  EXPECT_EQ(s.block_manager().num_pending_hashes(), 0) << "hashed when the step resolves";
  succeed(s, b);
  const std::shared_ptr<Sequence> probe = make_seq(0, 20);  // the same tokens
  EXPECT_EQ(s.block_manager().num_cached_tokens_if_allocated(*probe), 4);
  b = s.schedule();  // [6, 12): blocks 1 and 2 filled
  EXPECT_EQ(s.block_manager().num_cached_tokens_if_allocated(*probe), 4) << "not before the step succeeded";
  succeed(s, b);
  EXPECT_EQ(s.block_manager().num_cached_tokens_if_allocated(*probe), 12);
}

// Two prefilled streams decode while a long prompt arrives: each step gives them their token first
// and the prompt the rest of the budget; the StepInput has three spans and two sampling rows.
TEST(ChunkedScheduler, DecodesGoFirstAndPrefillChunksFillTheBudget) {
  Scheduler s(chunked_config(100, /*max_batched=*/8));
  s.add(make_seq(0, 3));
  s.add(make_seq(1, 2));
  ScheduledBatch b = s.schedule();
  EXPECT_EQ(spans(b), (std::vector<int>{3, 2}));
  succeed(s, b);
  SamplingParams pen;
  pen.presence_penalty = 0.5f;
  s.add(make_seq(2, 13, pen));
  b = s.schedule();
  EXPECT_TRUE(b.is_prefill);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(spans(b), (std::vector<int>{1, 1, 6}));
  EXPECT_EQ(b.num_tokens, 8);

  const StepInput in = build_step_input(b.seqs, b.is_prefill, /*max_blocks_per_seq=*/16, /*draw_samples=*/false);
  const Sequence &a = *b.seqs[0], &c = *b.seqs[1], &p = *b.seqs[2];
  EXPECT_EQ(in.num_seqs(), 3);
  EXPECT_EQ(in.num_samples(), 2);
  EXPECT_EQ(in.cu_seqlens_q, (std::vector<int32_t>{0, 1, 2, 8}));
  EXPECT_EQ(in.cu_seqlens_k, (std::vector<int32_t>{0, 4, 7, 13}));
  EXPECT_EQ(in.positions, (std::vector<int32_t>{3, 2, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(in.input_ids, (std::vector<int32_t>{7, 7, 2100, 2101, 2102, 2103, 2104, 2105}));
  EXPECT_EQ(in.last_indices, (std::vector<int32_t>{0, 1})) << "the partial chunk has no sampling row";
  EXPECT_EQ(in.sampling.size(), 2);
  EXPECT_EQ(in.max_seqlen_q, 6);
  EXPECT_EQ(in.max_seqlen_k, 6);
  const std::vector<int32_t> expect_slots = {
      a.block_table[0] * kBs + 3, c.block_table[0] * kBs + 2,  p.block_table[0] * kBs + 0,
      p.block_table[0] * kBs + 1, p.block_table[0] * kBs + 2,  p.block_table[0] * kBs + 3,
      p.block_table[1] * kBs + 0, p.block_table[1] * kBs + 1};
  EXPECT_EQ(in.slot_mapping, expect_slots);
  EXPECT_TRUE(in.penalty_slots.empty()) << "only the partial chunk has penalties, and it does not sample";
  EXPECT_EQ(StepInput::deserialize(in.serialize()).cu_seqlens_k, in.cu_seqlens_k);
  succeed(s, b);

  b = s.schedule();
  EXPECT_EQ(spans(b), (std::vector<int>{1, 1, 6}));
  succeed(s, b);
  b = s.schedule();  // the prompt's last token: it samples and rebuilds its penalties' count row
  EXPECT_EQ(spans(b), (std::vector<int>{1, 1, 1}));
  // One last token each: the decode path (graphs) takes it; the counts row is rebuilt all the same.
  EXPECT_FALSE(b.is_prefill);
  const StepInput last = build_step_input(b.seqs, b.is_prefill, 16, false);
  EXPECT_EQ(last.num_samples(), 3);
  EXPECT_EQ(last.penalty_slots, (std::vector<int32_t>{-1, -1, p.slot}));
  EXPECT_EQ(last.count_offsets, (std::vector<int32_t>{0, 0, 0, 13}));
  EXPECT_EQ(last.count_num_prompt, (std::vector<int32_t>{0, 0, 13}));
  succeed(s, b);
  b = s.schedule();
  EXPECT_FALSE(b.is_prefill);
  const StepInput dec = build_step_input(b.seqs, b.is_prefill, 16, false);
  EXPECT_EQ(dec.count_offsets, (std::vector<int32_t>{0, 0, 0, 0})) << "decode rows add their input token";
}

// max_num_seqs bounds running sequences, partly prefilled ones included; a prompt waits while the
// decodes take the whole budget.
TEST(ChunkedScheduler, BudgetsBoundDecodesAndRunningSequences) {
  Scheduler s(chunked_config(100, /*max_batched=*/3, /*max_num_seqs=*/3));
  for (int i = 0; i < 3; ++i) s.add(make_seq(i, 1));
  succeed(s, s.schedule());
  s.add(make_seq(3, 9));
  ScheduledBatch b = s.schedule();
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(s.num_waiting(), 1) << "max_num_seqs running: nobody is admitted";
  s.postprocess(b.seqs, {2, 7, 7});  // 0 ends with eos
  b = s.schedule();
  EXPECT_EQ(ids(b), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(spans(b), (std::vector<int>{1, 1, 1}));
}

TEST(ChunkedScheduler, PrefixCacheHitThenChunks) {
  Scheduler s(chunked_config(100, /*max_batched=*/16));
  std::vector<int32_t> prefix(12);
  std::iota(prefix.begin(), prefix.end(), 500);
  std::vector<int32_t> first = prefix, second = prefix;
  first.push_back(1);
  for (int i = 0; i < 20; ++i) second.push_back(600 + i);  // 32 tokens, 12 of them cached
  s.add(seq_of(0, first));
  succeed(s, s.schedule());
  s.add(seq_of(1, second));
  ScheduledBatch b = s.schedule();
  ASSERT_EQ(ids(b), (std::vector<int64_t>{0, 1}));
  const Sequence& q = *b.seqs[1];
  EXPECT_EQ(q.num_cached_tokens, 12);
  EXPECT_EQ(q.num_computed_tokens, 12);
  EXPECT_EQ(q.num_new_tokens, 15);
  const StepInput in = build_step_input(b.seqs, b.is_prefill, 16, false);
  EXPECT_EQ(in.cu_seqlens_q, (std::vector<int32_t>{0, 1, 16}));
  EXPECT_EQ(in.cu_seqlens_k, (std::vector<int32_t>{0, 14, 41}));
  EXPECT_EQ(in.positions[1], 12);
  EXPECT_EQ(in.positions.back(), 26);
  succeed(s, b);
  b = s.schedule();
  EXPECT_EQ(spans(b), (std::vector<int>{1, 5}));
  EXPECT_TRUE(b.seqs[1]->samples());
}

// A decode that needs a block preempts the newest running sequence, a partly prefilled one: its
// blocks are freed, it waits at the front, and is prefilled again from what its committed chunks
// left in the prefix cache. The step that preempted admits nobody.
TEST(ChunkedScheduler, PreemptsAPartlyPrefilledSequence) {
  Scheduler s(chunked_config(/*num_blocks=*/6, /*max_batched=*/5, 8, 24));
  s.add(make_seq(0, 3));
  succeed(s, s.schedule());  // 0: 4 tokens in 1 block
  s.add(make_seq(1, 20));    // 5 blocks: the cache is full
  ScheduledBatch b = s.schedule();
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(spans(b), (std::vector<int>{1, 4}));
  EXPECT_EQ(s.block_manager().num_free_blocks(), 0);
  std::shared_ptr<Sequence> one = b.owners[1];
  succeed(s, b);  // 0: 5 tokens, its next needs a second block; 1: 4 computed, block 0 committed
  const int64_t before = s.num_preemptions();
  b = s.schedule();
  EXPECT_EQ(s.num_preemptions(), before + 1);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0}));
  EXPECT_EQ(one->status, SequenceStatus::kWaiting);
  EXPECT_TRUE(one->block_table.empty());
  EXPECT_EQ(one->num_computed_tokens, 0);
  EXPECT_EQ(s.num_waiting(), 1);
  succeed(s, b);
  ASSERT_NE(s.abort(0), nullptr);  // room again
  b = s.schedule();
  ASSERT_EQ(ids(b), (std::vector<int64_t>{1}));
  EXPECT_EQ(one->num_cached_tokens, 4) << "its committed chunk was still cached";
  EXPECT_EQ(one->num_computed_tokens, 4);
  EXPECT_EQ(one->num_new_tokens, 5);
  EXPECT_FALSE(one->prefilled);
}

TEST(ChunkedScheduler, FailureAndAbortMidPrefillFreeEverythingAndRegisterNothing) {
  Scheduler s(chunked_config(20, /*max_batched=*/8));
  s.add(make_seq(0, 20));
  s.add(make_seq(1, 20));
  ScheduledBatch b = s.schedule();
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0}));
  succeed(s, b);
  b = s.schedule();
  auto failed = s.fail(b.seqs);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]->finish_reason, FinishReason::kError);
  EXPECT_EQ(s.block_manager().num_pending_hashes(), 0);
  const std::shared_ptr<Sequence> probe = make_seq(0, 20);
  EXPECT_EQ(s.block_manager().num_cached_tokens_if_allocated(*probe), 8) << "only the first chunk's blocks";
  b = s.schedule();
  ASSERT_EQ(ids(b), (std::vector<int64_t>{1}));
  succeed(s, b);
  ASSERT_NE(s.abort(1), nullptr);
  EXPECT_EQ(s.block_manager().num_free_blocks(), 20);
  EXPECT_TRUE(s.is_finished());
}

// Random arrivals, lengths and finishes against a small cache: every step within its budgets,
// every span continuing where the sequence's computed tokens end, every StepInput well formed,
// and everything finishes.
TEST(ChunkedScheduler, StressRunsToCompletionWithinBudgets) {
  std::mt19937 rng(7);
  for (int budget : {4, 7, 16}) {
    SCOPED_TRACE(budget);
    Scheduler s(chunked_config(/*num_blocks=*/12, budget, /*max_num_seqs=*/4, /*max_len=*/40));
    int added = 0, finished = 0;
    for (int step = 0; step < 2000 && (added < 30 || !s.is_finished()); ++step) {
      if (added < 30 && rng() % 3 == 0) {
        SamplingParams p;
        p.max_tokens = 1 + static_cast<int>(rng() % 8);
        s.add(make_seq(added++, 1 + static_cast<int>(rng() % 30), p));
      }
      ScheduledBatch b = s.schedule();
      if (b.empty()) continue;
      ASSERT_LE(b.num_tokens, budget);
      ASSERT_LE(static_cast<int>(b.seqs.size()), 4);
      bool seen_chunk = false;
      for (Sequence* q : b.seqs) {
        const bool decode = q->prefilled;
        ASSERT_FALSE(decode && seen_chunk) << "decodes come before prefill chunks";
        seen_chunk = seen_chunk || !decode;
      }
      ASSERT_NO_THROW(build_step_input(b.seqs, b.is_prefill, 10, false));
      std::vector<int32_t> tokens;
      for (Sequence* q : b.seqs) {
        if (q->samples()) tokens.push_back(rng() % 5 == 0 ? 2 : 7);
      }
      finished += static_cast<int>(s.postprocess(b.seqs, tokens).size());
    }
    EXPECT_EQ(finished, 30);
    EXPECT_TRUE(s.is_finished());
    EXPECT_EQ(s.block_manager().num_free_blocks(), 12);
  }
}

}  // namespace
}  // namespace minivllm
