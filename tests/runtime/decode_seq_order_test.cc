#include "runtime/decode_seq_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace minivllm {
namespace {

TEST(DecodeSeqOrder, LongestFirstTiesInRowOrder) {
  const std::vector<int32_t> ctx = {5, 900, 1, 900, 37, 1, 1};  // rows 5, 6: the runner's padding
  std::vector<int32_t> order(ctx.size(), -1);
  longest_context_first(ctx.data(), static_cast<int>(ctx.size()), order.data());
  EXPECT_EQ(order, (std::vector<int32_t>{1, 3, 4, 0, 2, 5, 6}));
}

TEST(DecodeSeqOrder, PermutationOfRandomBatches) {
  std::mt19937 rng(7);
  for (int n : {1, 2, 3, 16, 255, 512}) {
    std::vector<int32_t> ctx(n);
    for (int32_t& c : ctx) c = 1 + static_cast<int32_t>(rng() % 64);  // many ties
    std::vector<int32_t> order(n);
    longest_context_first(ctx.data(), n, order.data());
    std::vector<int32_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "not a permutation at n = " << n;
    for (int i = 1; i < n; ++i) {
      const int32_t a = order[i - 1], b = order[i];
      ASSERT_TRUE(ctx[a] > ctx[b] || (ctx[a] == ctx[b] && a < b)) << "rows " << a << ", " << b << " at n = " << n;
    }
  }
}

}  // namespace
}  // namespace minivllm
