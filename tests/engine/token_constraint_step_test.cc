// The structured-output seam on the engine side, with a scripted TokenConstraint (no grammar
// engine): build_step_input fills the constrained rows' bitmasks (all ones elsewhere), and
// Scheduler-free resolution is left to the engine tests; apply_bitmask_row bans the clear bits.
#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "engine/sequence.h"
#include "engine/step_input.h"
#include "engine/token_constraint.h"
#include "sampling/logits_processing.h"

namespace minivllm {
namespace {

constexpr int kBs = 16;

// Allows exactly the token after the last one accepted (starting at `first`), in a 40-token vocabulary.
class CountingConstraint : public TokenConstraint {
 public:
  explicit CountingConstraint(int32_t first) : next_(first) {}
  int bitmask_words() const override { return 2; }
  void fill_bitmask(int32_t* words) override {
    words[0] = words[1] = 0;
    words[next_ / 32] = static_cast<int32_t>(1u << (next_ % 32));
  }
  bool accept(int32_t token) override {
    if (token != next_) return false;
    ++next_;
    return true;
  }
  void rollback(int n) override { next_ -= n; }
  bool is_terminated() const override { return next_ >= 40; }

 private:
  int32_t next_;
};

TEST(TokenConstraintStep, ConstrainedRowsGetTheirMaskOthersAllOnes) {
  Sequence free_seq(0, {1, 2, 3}, SamplingParams{}, kBs);
  Sequence ruled(1, {4, 5}, SamplingParams{}, kBs);
  free_seq.block_table = {0};
  ruled.block_table = {1};
  ruled.constraint = std::make_shared<CountingConstraint>(33);
  for (Sequence* s : {&free_seq, &ruled}) {
    s->num_computed_tokens = 0;
    s->num_new_tokens = s->num_tokens();
  }
  const StepInput s = build_step_input({&free_seq, &ruled}, true, 2);
  EXPECT_EQ(s.sampling.bitmask_words, 2);
  EXPECT_EQ(s.sampling.bitmask, (std::vector<int32_t>{-1, -1, 0, 2}));  // token 33: word 1, bit 1
  EXPECT_TRUE(s.needs_full_logits());
  // The workers' image carries no mask (rank 0 samples), only that rank 0 needs whole rows.
  const StepInput back = StepInput::deserialize(s.serialize());
  EXPECT_FALSE(back.sampling.has_bitmask());
  EXPECT_TRUE(back.needs_full_logits());

  // No grammar in the batch: no mask at all.
  ruled.constraint = nullptr;
  EXPECT_FALSE(build_step_input({&free_seq, &ruled}, true, 2).sampling.has_bitmask());
}

// Deferred: the step carries no mask, only that it needs one (and whole rows); fill_token_bitmask
// gives it later from the grammars as they are then, a finished sequence's row all ones.
TEST(TokenConstraintStep, DeferredMasksComeFromTheGrammarsLater) {
  Sequence free_seq(0, {1, 2, 3}, SamplingParams{}, kBs);
  Sequence ruled(1, {4, 5}, SamplingParams{}, kBs);
  free_seq.block_table = {0};
  ruled.block_table = {1};
  auto grammar = std::make_shared<CountingConstraint>(33);
  ruled.constraint = grammar;
  for (Sequence* s : {&free_seq, &ruled}) {
    s->num_computed_tokens = 0;
    s->num_new_tokens = s->num_tokens();
  }
  const StepInput s = build_step_input({&free_seq, &ruled}, true, 2, true, /*defer_bitmask=*/true);
  EXPECT_TRUE(s.defer_bitmask);
  EXPECT_FALSE(s.sampling.has_bitmask());
  EXPECT_TRUE(s.needs_full_logits());
  EXPECT_TRUE(StepInput::deserialize(s.serialize()).needs_full_logits());
  ASSERT_TRUE(grammar->accept(33));  // the step before resolves meanwhile
  int words = 0;
  EXPECT_EQ(fill_token_bitmask({&free_seq, &ruled}, words), (std::vector<int32_t>{-1, -1, 0, 4}));  // token 34
  EXPECT_EQ(words, 2);
  ruled.status = SequenceStatus::kFinished;
  EXPECT_EQ(fill_token_bitmask({&free_seq, &ruled}, words), (std::vector<int32_t>{-1, -1, -1, -1}));
  EXPECT_TRUE(fill_token_bitmask({&free_seq}, words).empty());
  EXPECT_EQ(words, 0);
  // No grammar in the batch: nothing deferred.
  EXPECT_FALSE(build_step_input({&free_seq}, true, 2, true, true).defer_bitmask);
}

TEST(TokenConstraintStep, ApplyBitmaskRowBansClearBits) {
  std::vector<float> logits(40, 1.0f);
  const int32_t words[2] = {static_cast<int32_t>(0x80000001u), 0x00000004};  // tokens 0, 31 and 34
  apply_bitmask_row(logits.data(), 40, words);
  for (int v = 0; v < 40; ++v) {
    const bool allowed = v == 0 || v == 31 || v == 34;
    EXPECT_EQ(logits[v], allowed ? 1.0f : -std::numeric_limits<float>::infinity()) << v;
  }
}

}  // namespace
}  // namespace minivllm
