// BlockManager: allocation, sharing by prefix, ref counts, the last-token rule, collisions, decode growth,
// blocks released out of a sliding window.
#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

#include "common/check.h"
#include "engine_steps.h"

namespace minivllm {
namespace {

constexpr int kBlockSize = 4;

std::vector<int32_t> iota_tokens(int n, int32_t start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

Sequence make_seq(int64_t id, std::vector<int32_t> tokens) {
  return Sequence(id, std::move(tokens), SamplingParams{}, kBlockSize);
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

uint64_t constant_hash(std::optional<uint64_t>, const std::vector<int32_t>&) { return 42; }

TEST(BlockManager, AllocateAndFreeReturnsBlocks) {
  BlockManager bm(10, kBlockSize);
  Sequence a = make_seq(0, iota_tokens(10));
  ASSERT_TRUE(bm.can_allocate(a));
  allocate_prefill(bm, a);
  bm.commit_hashes();
  EXPECT_EQ(a.block_table.size(), 3u);
  EXPECT_EQ(a.num_cached_tokens, 0);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  for (int32_t id : a.block_table) EXPECT_EQ(bm.ref_count(id), 1);
  bm.deallocate(a);
  EXPECT_TRUE(a.block_table.empty());
  EXPECT_EQ(bm.num_free_blocks(), 10);
  for (int32_t id = 0; id < 10; ++id) EXPECT_EQ(bm.ref_count(id), 0);
}

TEST(BlockManager, CommonPrefixSharesBlocksWithRefCounts) {
  BlockManager bm(10, kBlockSize);
  Sequence a = make_seq(0, iota_tokens(10));                                // blocks [0..3] [4..7] [8 9]
  Sequence b = make_seq(1, concat(iota_tokens(8), {100, 101, 102}));        // same two full blocks
  allocate_prefill(bm, a);
  bm.commit_hashes();
  allocate_prefill(bm, b);
  bm.commit_hashes();
  EXPECT_EQ(b.num_cached_tokens, 8);
  EXPECT_EQ(b.num_cached_blocks(), 2);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  EXPECT_NE(b.block_table[2], a.block_table[2]);
  EXPECT_EQ(bm.ref_count(a.block_table[0]), 2);
  EXPECT_EQ(bm.ref_count(a.block_table[1]), 2);
  EXPECT_EQ(bm.ref_count(a.block_table[2]), 1);
  EXPECT_EQ(bm.num_free_blocks(), 6);
  bm.deallocate(a);
  EXPECT_EQ(bm.ref_count(b.block_table[0]), 1);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  bm.deallocate(b);
  EXPECT_EQ(bm.num_free_blocks(), 10);
}

TEST(BlockManager, FreedBlocksStayCachedUntilReused) {
  BlockManager bm(2, kBlockSize);
  Sequence a = make_seq(0, iota_tokens(5));
  allocate_prefill(bm, a);
  bm.commit_hashes();
  const int32_t first = a.block_table[0];
  bm.deallocate(a);
  Sequence again = make_seq(1, iota_tokens(5));
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(again), 4);
  allocate_prefill(bm, again);
  bm.commit_hashes();
  EXPECT_EQ(again.num_cached_tokens, 4);
  EXPECT_EQ(again.block_table[0], first);
  bm.deallocate(again);
  // An unrelated sequence takes both blocks: the cached one is evicted.
  Sequence other = make_seq(2, iota_tokens(8, 500));
  allocate_prefill(bm, other);
  bm.commit_hashes();
  bm.deallocate(other);
  Sequence third = make_seq(3, iota_tokens(5));
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(third), 0);
}

// reset_prefix_cache refuses while a block is in use and otherwise forgets every cached block;
// the cache then fills again as before.
TEST(BlockManager, ResetPrefixCacheForgetsOnlyWhenIdle) {
  BlockManager bm(10, kBlockSize);
  Sequence a = make_seq(0, iota_tokens(10));
  allocate_prefill(bm, a);
  bm.commit_hashes();
  EXPECT_FALSE(bm.reset_prefix_cache()) << "a's blocks are in use";
  bm.deallocate(a);
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(make_seq(1, iota_tokens(10))), 8) << "refused: still cached";
  EXPECT_TRUE(bm.reset_prefix_cache());
  EXPECT_EQ(bm.num_free_blocks(), 10);
  Sequence b = make_seq(2, iota_tokens(10));
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(b), 0);
  allocate_prefill(bm, b);
  bm.commit_hashes();
  EXPECT_EQ(b.num_cached_tokens, 0);
  bm.deallocate(b);
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(make_seq(3, iota_tokens(10))), 8) << "cached again";
}

TEST(BlockManager, LastTokenIsAlwaysComputed) {
  BlockManager bm(10, kBlockSize);
  Sequence a = make_seq(0, iota_tokens(8));  // exactly two full blocks
  allocate_prefill(bm, a);
  bm.commit_hashes();
  EXPECT_EQ(a.num_cached_tokens, 0);
  Sequence same = make_seq(1, iota_tokens(8));
  allocate_prefill(bm, same);
  bm.commit_hashes();
  EXPECT_EQ(same.num_cached_tokens, 4);  // not 8: the block with the last token is computed again
  EXPECT_LT(same.num_cached_tokens, same.num_tokens());
  EXPECT_EQ(same.block_table[0], a.block_table[0]);
  EXPECT_NE(same.block_table[1], a.block_table[1]);
  Sequence longer = make_seq(2, iota_tokens(9));
  allocate_prefill(bm, longer);
  bm.commit_hashes();
  EXPECT_EQ(longer.num_cached_tokens, 8);
  // A one-block prompt that matches is never cached at all.
  BlockManager small(4, kBlockSize);
  Sequence one = make_seq(3, iota_tokens(4));
  small.allocate(one);
  small.commit_hashes();
  Sequence one_again = make_seq(4, iota_tokens(4));
  small.allocate(one_again);
  small.commit_hashes();
  EXPECT_EQ(one_again.num_cached_tokens, 0);
}

TEST(BlockManager, HashMatchWithDifferentTokensIsAMiss) {
  BlockManager bm(10, kBlockSize, &constant_hash);  // every full block collides
  Sequence a = make_seq(0, {1, 2, 3, 4, 5});
  allocate_prefill(bm, a);
  bm.commit_hashes();
  Sequence b = make_seq(1, {9, 9, 9, 9, 5});
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(b), 0);
  allocate_prefill(bm, b);
  bm.commit_hashes();
  EXPECT_EQ(b.num_cached_tokens, 0);
  EXPECT_NE(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(bm.ref_count(a.block_table[0]), 1);
  // The same tokens under the same (colliding) hash are still a hit.
  Sequence c = make_seq(2, {9, 9, 9, 9, 7});
  allocate_prefill(bm, c);
  bm.commit_hashes();
  EXPECT_EQ(c.num_cached_tokens, 4);
  EXPECT_EQ(c.block_table[0], b.block_table[0]);
}

TEST(BlockManager, CanAllocateCountsSharedBlocksAsFree) {
  BlockManager bm(4, kBlockSize);
  Sequence a = make_seq(0, iota_tokens(9));  // 3 blocks, 1 free left
  allocate_prefill(bm, a);
  bm.commit_hashes();
  Sequence b = make_seq(1, concat(iota_tokens(8), {77}));  // 3 blocks, 2 shared
  EXPECT_TRUE(bm.can_allocate(b));
  allocate_prefill(bm, b);
  bm.commit_hashes();
  EXPECT_EQ(bm.num_free_blocks(), 0);
  Sequence c = make_seq(2, iota_tokens(5, 1000));
  EXPECT_FALSE(bm.can_allocate(c));
  EXPECT_THROW(allocate_prefill(bm, c), Error);
}

TEST(BlockManager, MayAppendAllocatesAndRegistersFullBlocks) {
  BlockManager bm(4, kBlockSize);
  Sequence s = make_seq(0, iota_tokens(4));
  allocate_prefill(bm, s);
  bm.commit_hashes();
  EXPECT_EQ(s.block_table.size(), 1u);
  for (int32_t t = 4; t < 8; ++t) {
    s.append_token(t);
    ASSERT_TRUE(bm.can_append(s));
    const int free_before = bm.num_free_blocks();
    append_decode(bm, s);
    bm.commit_hashes();
    EXPECT_EQ(bm.num_free_blocks(), free_before - (t == 4 ? 1 : 0)) << "token " << t;
    EXPECT_EQ(s.block_table.size(), 2u);
    if (t == 6) {  // block 1 not full yet: not in the cache
      EXPECT_EQ(bm.num_cached_tokens_if_allocated(make_seq(1, iota_tokens(9))), 4);
    }
  }
  // Block 1 became full on the last append: a new request finds both blocks.
  Sequence probe = make_seq(2, iota_tokens(9));
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(probe), 8);
}

// A model whose every layer slides (window 3, blocks of 4): after each step, the blocks wholly
// before the window of the next position go, but never the last full one (the next block's chain
// hash starts from it); their entries become -1, their contents stay findable.
TEST(BlockManager, ReleaseOutOfWindowKeepsTheChainAndTheCache) {
  constexpr int kWindow = 3;
  BlockManager bm(8, kBlockSize);
  Sequence s = make_seq(0, iota_tokens(10));  // blocks [0..3] [4..7] [8 9]
  allocate_prefill(bm, s);
  bm.commit_hashes();
  const std::vector<int32_t> table = s.block_table;
  // Position 10 sees keys 8..10: block 0 goes; block 1 is out of the window too, but it is the
  // last full block (block 2 will chain from its hash).
  bm.release_out_of_window(s, kWindow, 10);
  EXPECT_EQ(s.block_table, (std::vector<int32_t>{-1, table[1], table[2]}));
  EXPECT_EQ(bm.ref_count(table[0]), 0);
  EXPECT_EQ(bm.num_free_blocks(), 6);
  bm.release_out_of_window(s, 0, 10);  // no window: nothing more
  EXPECT_EQ(bm.num_free_blocks(), 6);
  for (int32_t t = 10; t < 16; ++t) {  // decode to 16 tokens
    s.append_token(100 + t);
    append_decode(bm, s);
    bm.commit_hashes();
    bm.release_out_of_window(s, kWindow, s.num_tokens());
    EXPECT_EQ(s.block_table[1] < 0, s.num_tokens() >= 12) << "block 1 goes once block 2 is full, token " << t;
    EXPECT_EQ(s.block_table[2] < 0, s.num_tokens() >= 16) << "block 2 goes once block 3 is full, token " << t;
  }
  EXPECT_EQ(s.block_table[3], 3);
  // The released blocks are still cached, chained: a prompt extending this one hits all four.
  std::vector<int32_t> prompt = s.token_ids();
  prompt.push_back(7);
  Sequence probe = make_seq(1, prompt);
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(probe), 16);
  allocate_prefill(bm, probe);
  bm.commit_hashes();
  EXPECT_EQ(std::vector<int32_t>(probe.block_table.begin(), probe.block_table.begin() + 3),
            std::vector<int32_t>(table.begin(), table.end()));
  EXPECT_EQ(bm.ref_count(table[0]), 1);
  EXPECT_EQ(bm.ref_count(3), 2);
  bm.deallocate(s);  // skips the -1 entries
  bm.deallocate(probe);
  EXPECT_EQ(bm.num_free_blocks(), 8);
}

TEST(BlockManager, CanAppendFalseWithoutFreeBlock) {
  BlockManager bm(2, kBlockSize);
  Sequence s = make_seq(0, iota_tokens(8));
  allocate_prefill(bm, s);
  bm.commit_hashes();
  s.append_token(8);
  EXPECT_FALSE(bm.can_append(s));
  Sequence t = make_seq(1, iota_tokens(3, 50));
  EXPECT_FALSE(bm.can_allocate(t));
  bm.deallocate(s);
  EXPECT_TRUE(bm.can_allocate(t));
}

TEST(BlockManager, BlockSizeOneWorks) {
  BlockManager bm(8, 1);
  Sequence s(0, {5, 6, 7}, SamplingParams{}, 1);
  allocate_prefill(bm, s);
  bm.commit_hashes();
  EXPECT_EQ(s.block_table.size(), 3u);
  s.append_token(8);
  append_decode(bm, s);
  bm.commit_hashes();
  EXPECT_EQ(s.block_table.size(), 4u);
  Sequence probe(1, {5, 6, 7, 8, 9}, SamplingParams{}, 1);
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(probe), 4);
}

// A step is a transaction: the blocks it fills are found only after it succeeded.
TEST(BlockManager, HashesRegisterOnlyWhenTheStepCommits) {
  BlockManager bm(10, kBlockSize);
  Sequence a = make_seq(0, iota_tokens(9));
  allocate_prefill(bm, a);
  EXPECT_EQ(bm.num_pending_hashes(), 2);
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(make_seq(1, iota_tokens(9))), 0);  // the step is running
  bm.discard_hashes();  // it failed
  bm.deallocate(a);
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(make_seq(1, iota_tokens(9))), 0);

  Sequence b = make_seq(2, iota_tokens(9));
  allocate_prefill(bm, b);
  bm.commit_hashes();  // it succeeded
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(make_seq(3, iota_tokens(9))), 8);

  // A block freed before its step ended (a preemption) is not registered by the commit.
  b.append_token(9);
  b.append_token(10);
  b.append_token(11);
  append_decode(bm, b);  // block 2 is full now: pending
  EXPECT_EQ(bm.num_pending_hashes(), 1);
  bm.deallocate(b);
  EXPECT_EQ(bm.num_pending_hashes(), 0);
  bm.commit_hashes();
  EXPECT_EQ(bm.num_cached_tokens_if_allocated(make_seq(4, iota_tokens(13))), 8);
}

}  // namespace
}  // namespace minivllm
