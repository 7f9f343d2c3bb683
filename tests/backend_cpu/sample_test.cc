// The sampling glue of the CPU backend: logits rows go to the host reference sampler.
#include <gtest/gtest.h>

#include "cpu_test_util.h"

namespace minivllm::cpu_test {
namespace {

TEST(CpuSampleTest, GreedyPicksArgmaxPerRow) {
  auto b = make_cpu_backend();
  const int64_t vocab = 1000;
  auto logits = random_floats(3 * vocab, 70, -5, 5);
  logits[0 * vocab + 17] = 9.0f;
  logits[1 * vocab + 999] = 9.5f;
  logits[2 * vocab + 0] = 8.0f;
  SamplingBatch batch;
  batch.temperature = {0, 0, 0};
  batch.top_k = {0, 0, 0};
  batch.top_p = {1, 1, 1};
  batch.min_p = {0, 0, 0};
  batch.uniform = {0.5f, 0.5f, 0.5f};
  int32_t tokens[3] = {-1, -1, -1};
  b->sample(upload(*b, logits, {3, vocab}), batch, tokens);
  EXPECT_EQ(tokens[0], 17);
  EXPECT_EQ(tokens[1], 999);
  EXPECT_EQ(tokens[2], 0);
  EXPECT_THROW(b->sample(upload(*b, logits, {3, vocab}).rows(0, 2), batch, tokens), Error);
}

}  // namespace
}  // namespace minivllm::cpu_test
