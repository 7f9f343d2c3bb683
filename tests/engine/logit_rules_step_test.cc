// The step-time half of logit_bias, min_tokens and bad_words: each sampling row's sparse bias in
// the StepInput (engine/step_input.cc), written out by hand. The request-time half (tokenizing the
// bad words, the eos ids) is api/logit_rules.cc's; here the resolved fields are set directly.
#include <gtest/gtest.h>

#include <limits>

#include "engine/sequence.h"
#include "engine/step_input.h"

namespace minivllm {
namespace {

constexpr int kBs = 16;
constexpr float kBan = -std::numeric_limits<float>::infinity();

SamplingParams with_rules() {
  SamplingParams p;
  p.max_tokens = 16;
  p.logit_bias = {{5, 2.0f}, {9, -1.5f}};
  p.min_tokens = 3;
  p.min_tokens_banned_ids = {2};                  // an eos id
  p.bad_words_token_ids = {{7}, {10, 11}, {12, 13, 14}};  // one-token words are always banned
  return p;
}

StepInput step(std::vector<Sequence*> seqs, bool is_prefill) {
  for (Sequence* s : seqs) {
    s->num_computed_tokens = is_prefill ? 0 : s->num_tokens() - 1;
    s->num_new_tokens = s->num_tokens() - s->num_computed_tokens;
  }
  return build_step_input(seqs, is_prefill, 2);
}

using Row = std::vector<std::pair<int32_t, float>>;

Row row(const StepInput& s, int r) {
  const SamplingBatch& b = s.sampling;
  Row out;
  for (int32_t i = b.bias_offsets[r]; i < b.bias_offsets[r + 1]; ++i) out.emplace_back(b.bias_ids[i], b.bias_values[i]);
  return out;
}

TEST(LogitRulesStep, PrefillRowHasBiasMinTokensBansAndOneTokenWords) {
  // The prompt ends with 10, but bad words match the completion only (as vLLM's): 11 stays allowed.
  Sequence ruled(0, {1, 2, 3, 10}, with_rules(), kBs);
  Sequence plain(1, {4, 5}, SamplingParams{}, kBs);
  ruled.block_table = {0};
  plain.block_table = {1};
  const StepInput s = step({&ruled, &plain}, true);
  ASSERT_EQ(s.sampling.bias_offsets.size(), 3u);
  EXPECT_EQ(row(s, 0), (Row{{2, kBan}, {5, 2.0f}, {7, kBan}, {9, -1.5f}}));
  EXPECT_TRUE(row(s, 1).empty());
  EXPECT_TRUE(s.needs_full_logits());  // rank 0 applies them to whole rows
  // The workers' image carries no bias, only rank 0's answer.
  const StepInput back = StepInput::deserialize(s.serialize());
  EXPECT_FALSE(back.sampling.has_bias());
  EXPECT_TRUE(back.needs_full_logits());
}

TEST(LogitRulesStep, DecodeBansTheLastTokenOfAWordItsCompletionBegan) {
  Sequence seq(0, {1, 2, 3}, with_rules(), kBs);
  seq.block_table = {0};
  seq.append_token(12);
  seq.append_token(13);  // completion [12, 13]: "12 13 14" would end here
  EXPECT_EQ(row(step({&seq}, false), 0), (Row{{2, kBan}, {5, 2.0f}, {7, kBan}, {9, -1.5f}, {14, kBan}}));
  seq.append_token(10);  // three tokens: min_tokens is met; "10 11" began
  EXPECT_EQ(row(step({&seq}, false), 0), (Row{{5, 2.0f}, {7, kBan}, {9, -1.5f}, {11, kBan}}));
}

TEST(LogitRulesStep, BatchesWithoutRulesCarryNoBias) {
  Sequence seq(0, {1, 2, 3}, SamplingParams{}, kBs);
  seq.block_table = {0};
  const StepInput s = step({&seq}, true);
  EXPECT_FALSE(s.sampling.has_bias());
  EXPECT_FALSE(s.needs_full_logits());
}

}  // namespace
}  // namespace minivllm
