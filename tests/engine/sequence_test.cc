// Sequence bookkeeping and SamplingParams validation.
#include "engine/sequence.h"

#include <gtest/gtest.h>

#include "common/check.h"

namespace minivllm {
namespace {

TEST(Sequence, BlocksAndCompletion) {
  Sequence s(7, {1, 2, 3, 4, 5}, SamplingParams{}, 2);
  EXPECT_EQ(s.seq_id(), 7);
  EXPECT_EQ(s.num_tokens(), 5);
  EXPECT_EQ(s.num_blocks(), 3);
  EXPECT_EQ(s.last_block_num_tokens(), 1);
  EXPECT_EQ(s.block(1), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(s.block(2), (std::vector<int32_t>{5}));
  EXPECT_THROW(s.block(3), Error);
  s.append_token(9);
  EXPECT_EQ(s.last_token(), 9);
  EXPECT_EQ(s.num_prompt_tokens(), 5);
  EXPECT_EQ(s.num_completion_tokens(), 1);
  EXPECT_EQ(s.completion_token_ids(), (std::vector<int32_t>{9}));
  EXPECT_EQ(s.last_block_num_tokens(), 2);
  EXPECT_EQ(s.status, SequenceStatus::kWaiting);
}

TEST(Sequence, FinishReasonNames) {
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::kAbort), "abort");
  EXPECT_STREQ(finish_reason_name(FinishReason::kNone), "");
}

TEST(Sequence, SeededUniformsRepeatAndStayBelowOne) {
  SamplingParams p;
  p.seed = 1234;
  Sequence a(0, {1}, p, 16), b(1, {2, 3}, p, 16);
  p.seed = 1235;
  Sequence c(2, {1}, p, 16);
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const float ua = a.next_uniform();
    EXPECT_EQ(ua, b.next_uniform());
    differ += ua != c.next_uniform();
    EXPECT_GE(ua, 0.0f);
    EXPECT_LT(ua, 1.0f);
  }
  EXPECT_GT(differ, 990);
}

std::string validation_error(const SamplingParams& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplingParams, ValidationNamesFieldAndValue) {
  EXPECT_EQ(validation_error(SamplingParams{}), "");
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_NE(validation_error(p).find("top_p must be in (0, 1], got 1.5"), std::string::npos) << validation_error(p);
  p = SamplingParams{};
  p.top_p = 0.0f;
  EXPECT_NE(validation_error(p).find("top_p"), std::string::npos);
  p = SamplingParams{};
  p.temperature = -0.5f;
  EXPECT_NE(validation_error(p).find("temperature must be finite and >= 0, got -0.5"), std::string::npos);
  p.temperature = std::numeric_limits<float>::infinity();
  EXPECT_NE(validation_error(p).find("temperature"), std::string::npos);
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(validation_error(p).find("temperature"), std::string::npos);
  p = SamplingParams{};
  p.min_p = 1.25f;
  EXPECT_NE(validation_error(p).find("min_p must be in [0, 1], got 1.25"), std::string::npos);
  p = SamplingParams{};
  p.top_k = -2;
  EXPECT_NE(validation_error(p).find("top_k must be -1 or 0 (off) or >= 1, got -2"), std::string::npos);
  p = SamplingParams{};
  p.max_tokens = 0;
  EXPECT_NE(validation_error(p).find("max_tokens must be >= 1, got 0"), std::string::npos);
  p = SamplingParams{};
  p.stop = {""};
  EXPECT_NE(validation_error(p).find("stop strings"), std::string::npos);
  p = SamplingParams{};
  p.top_k = 0;
  p.temperature = 0.0f;
  p.min_p = 1.0f;
  p.top_p = 1.0f;
  EXPECT_EQ(validation_error(p), "");
  p.top_k = -1;
  EXPECT_EQ(validation_error(p), "");
}

}  // namespace
}  // namespace minivllm
