// The penalties and logprobs reference (sampling/logits_processing.h), against the formulas
// written out by hand.
#include "sampling/logits_processing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace minivllm {
namespace {

TEST(Penalties, FollowOpenAIAndHF) {
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 3.0f, -1.0f};
  std::vector<int32_t> counts(5, 0);
  count_token(counts.data(), 0, true);   // prompt only
  count_token(counts.data(), 1, false);  // generated twice
  count_token(counts.data(), 1, false);
  count_token(counts.data(), 3, true);   // prompt and generated once
  count_token(counts.data(), 3, false);
  count_token(counts.data(), 3, true);   // a repeat in the prompt counts once
  EXPECT_EQ(counts, (std::vector<int32_t>{1, 4, 0, 3, 0}));
  apply_penalties_row(logits.data(), 5, counts.data(), /*presence=*/0.5f, /*frequency=*/0.25f, /*repetition=*/2.0f);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);                       // 2 / 2, no generated count
  EXPECT_FLOAT_EQ(logits[1], -2.0f * 2.0f - 0.5f - 0.5f);  // negative: x 2, then 0.25 x 2 + 0.5
  EXPECT_FLOAT_EQ(logits[2], 1.0f);                        // never seen
  EXPECT_FLOAT_EQ(logits[3], 1.5f - 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(logits[4], -1.0f);
}

TEST(Penalties, NeutralValuesLeaveTheRowBitForBit) {
  std::vector<float> logits = {0.1f, -7.3f, 1e-20f};
  const std::vector<float> before = logits;
  std::vector<int32_t> counts = {3, 2, 1};
  apply_penalties_row(logits.data(), 3, counts.data(), 0.0f, 0.0f, 1.0f);
  EXPECT_EQ(logits, before);
}

TEST(Logprobs, LogSoftmaxAndTopKWithTiesByLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -INFINITY};
  float chosen = 0;
  std::vector<int32_t> ids(4);
  std::vector<float> lps(4);
  logprobs_row(logits.data(), 5, 2, 4, &chosen, ids.data(), lps.data());
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(chosen, 2.0 - z, 1e-6);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 2, 0}));
  EXPECT_NEAR(lps[0], 3.0 - z, 1e-6);
  EXPECT_EQ(lps[0], lps[1]);
  EXPECT_NEAR(lps[3], 1.0 - z, 1e-6);
  logprobs_row(logits.data(), 5, 4, 0, &chosen, nullptr, nullptr);
  EXPECT_EQ(chosen, -INFINITY);
}

// logit_bias adds; a -inf entry bans whatever the logit was; the other tokens are left alone.
TEST(LogitBias, AddsEachEntryAndBansWithMinusInfinity) {
  std::vector<float> logits = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<int32_t> ids = {0, 2, 3};
  const std::vector<float> values = {-100.0f, -INFINITY, 2.5f};
  apply_bias_row(logits.data(), ids.data(), values.data(), 3);
  EXPECT_EQ(logits, (std::vector<float>{-99.0f, -2.0f, -INFINITY, 3.0f}));
}

}  // namespace
}  // namespace minivllm
