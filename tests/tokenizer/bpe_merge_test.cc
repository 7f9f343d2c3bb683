// The two BPE merge strategies (linear scan for short words, heap for long ones) must agree with
// each other and with the textbook loop, on random merge tables and words of any length.
#include <gtest/gtest.h>

#include <climits>
#include <random>

#include "golden_data.h"
#include "tokenizer/bpe_merge.h"

namespace minivllm {
namespace {

struct Table {
  PairRankMap map;
  std::vector<std::tuple<int32_t, int32_t, int32_t>> merges;  // rank order: (left, right, merged)
};

Table random_table(std::mt19937& rng, int alphabet, int n_merges) {
  Table t;
  int32_t next_id = alphabet;
  for (int rank = 0; rank < n_merges; ++rank) {
    std::uniform_int_distribution<int32_t> pick(0, next_id - 1);
    const int32_t l = pick(rng), r = pick(rng);
    if (t.map.find(l, r)) continue;
    t.map.insert(l, r, {rank, next_id});
    t.merges.emplace_back(l, r, next_id++);
  }
  return t;
}

// Textbook BPE: apply the best-ranked merge anywhere, leftmost first, until none applies.
std::vector<int32_t> reference_merge(const Table& t, std::vector<int32_t> s) {
  for (;;) {
    int best_rank = INT_MAX;
    size_t best_pos = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      for (size_t rank = 0; rank < t.merges.size() && static_cast<int>(rank) < best_rank; ++rank) {
        if (std::get<0>(t.merges[rank]) == s[i] && std::get<1>(t.merges[rank]) == s[i + 1]) {
          best_rank = static_cast<int>(rank);
          best_pos = i;
        }
      }
    }
    if (best_rank == INT_MAX) return s;
    s[best_pos] = std::get<2>(t.merges[best_rank]);
    s.erase(s.begin() + best_pos + 1);
  }
}

TEST(BpeMerge, StrategiesAgreeWithTextbookLoop) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 40; ++trial) {
    const int alphabet = 2 + trial % 5;
    const Table t = random_table(rng, alphabet, 30);
    for (int len : {0, 1, 2, 3, 7, 31, 129, 300}) {
      std::vector<int32_t> word(len);
      std::uniform_int_distribution<int32_t> sym(0, alphabet - 1);
      for (auto& s : word) s = sym(rng);
      const std::vector<int32_t> expected = reference_merge(t, word);
      std::vector<int32_t> quadratic = word, heap = word;
      bpe_merge_quadratic(t.map, quadratic);
      bpe_merge_heap(t.map, heap);
      EXPECT_EQ(quadratic, expected) << "trial " << trial << " len " << len;
      EXPECT_EQ(heap, expected) << "trial " << trial << " len " << len;
    }
  }
}

TEST(BpeMerge, LongWordsThroughTheRealTokenizers) {
  // A 2000-letter word (the heap path) splits into the same tokens as its first 64 letters
  // repeated, since every 'a'-run is merged the same way: Qwen's golden for 66 a's starts with
  // eight-letter tokens (69440), Llama's with 70540.
  const std::string long_word(2000, 'a');
  for (int32_t id : test::qwen3().encode(long_word, false)) EXPECT_EQ(id, 69440);
  for (int32_t id : test::llama().encode(long_word, false)) EXPECT_EQ(id, 70540);
  EXPECT_EQ(test::qwen3().decode(test::qwen3().encode(long_word, false)), long_word);
}

}  // namespace
}  // namespace minivllm
