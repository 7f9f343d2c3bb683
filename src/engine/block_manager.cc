// BlockManager: allocation, release and prefix-cache lookup of KV blocks (nano-vllm semantics).
#include "engine/block_manager.h"

#include "common/check.h"
#include "engine/block_hash.h"

namespace minivllm {

BlockManager::BlockManager(int num_blocks, int block_size, BlockHasher hasher)
    : block_size_(block_size), hasher_(hasher ? hasher : &hash_block_tokens), blocks_(num_blocks > 0 ? num_blocks : 0) {
  MINIVLLM_CHECK_GE(num_blocks, 1) << "the KV cache needs at least one block";
  MINIVLLM_CHECK_GE(block_size, 1) << "block_size must be >= 1";
  for (int32_t id = 0; id < num_blocks; ++id) blocks_[id].free_pos = free_list_.insert(free_list_.end(), id);
}

int BlockManager::ref_count(int32_t block_id) const {
  MINIVLLM_CHECK(block_id >= 0 && block_id < num_blocks()) << "block id " << block_id << " out of range [0, "
                                                          << num_blocks() << ")";
  return blocks_[block_id].ref_count;
}

std::vector<int32_t> BlockManager::match_prefix(const Sequence& seq) const {
  std::vector<int32_t> hits;
  // Positions whose prompt logprobs are still owed must be computed (their blocks are still hashed
  // for later requests when written).
  if (seq.needs_prompt_logprobs()) return hits;
  std::optional<uint64_t> prefix;
  // Block i is eligible only when it ends before the last token.
  for (int i = 0; (i + 1) * block_size_ < seq.num_tokens(); ++i) {
    std::vector<int32_t> tokens = seq.block(i);
    const uint64_t h = hasher_(prefix, tokens);
    auto it = hash_to_block_id_.find(h);
    if (it == hash_to_block_id_.end()) break;
    const Block& block = blocks_[it->second];
    if (!block.hash || *block.hash != h || block.token_ids != tokens) break;  // a collision is a miss
    hits.push_back(it->second);
    prefix = h;
  }
  return hits;
}

int BlockManager::num_cached_tokens_if_allocated(const Sequence& seq) const {
  return static_cast<int>(match_prefix(seq).size()) * block_size_;
}

bool BlockManager::can_allocate(const Sequence& seq) const {
  // Hits on blocks other sequences hold need no free block; every other block does.
  int shared = 0;
  for (int32_t id : match_prefix(seq)) shared += blocks_[id].ref_count > 0 ? 1 : 0;
  return num_free_blocks() >= seq.num_blocks() - shared;
}

void BlockManager::take_free_block(int32_t block_id) {
  Block& block = blocks_[block_id];
  MINIVLLM_CHECK_EQ(block.ref_count, 0) << "block " << block_id << " is not free";
  free_list_.erase(block.free_pos);
  block.ref_count = 1;
}

int32_t BlockManager::take_fresh_block() {
  MINIVLLM_CHECK(!free_list_.empty()) << "no free KV block (" << num_blocks() << " in all)";
  const int32_t id = free_list_.front();
  take_free_block(id);
  Block& block = blocks_[id];
  if (block.hash) {
    auto it = hash_to_block_id_.find(*block.hash);
    if (it != hash_to_block_id_.end() && it->second == id) hash_to_block_id_.erase(it);
  }
  block.hash.reset();
  block.token_ids.clear();
  return id;
}

void BlockManager::release_block(int32_t block_id) {
  Block& block = blocks_[block_id];
  MINIVLLM_CHECK_GT(block.ref_count, 0) << "block " << block_id << " released twice";
  if (--block.ref_count > 0) return;
  block.free_pos = free_list_.insert(free_list_.end(), block_id);
  // Freed before its step ended (preempted or finished): its KV may never be written.
  std::erase_if(pending_, [block_id](const PendingHash& p) { return p.block_id == block_id; });
}

uint64_t BlockManager::hash_full_block(int32_t block_id, std::optional<uint64_t> prefix,
                                       std::vector<int32_t> token_ids) {
  const uint64_t h = hasher_(prefix, token_ids);
  pending_.push_back({block_id, h, std::move(token_ids)});
  return h;
}

void BlockManager::commit_hashes() {
  for (PendingHash& p : pending_) {
    Block& block = blocks_[p.block_id];
    if (block.ref_count == 0) continue;
    block.hash = p.hash;
    block.token_ids = std::move(p.token_ids);
    hash_to_block_id_[p.hash] = p.block_id;  // the newest copy wins; an older equal block stays valid
  }
  pending_.clear();
}

bool BlockManager::reset_prefix_cache() {
  for (const Block& block : blocks_) {
    if (block.ref_count > 0) return false;
  }
  for (Block& block : blocks_) {
    block.hash.reset();
    block.token_ids.clear();
  }
  hash_to_block_id_.clear();
  pending_.clear();  // a dropped step's blocks, all free now
  return true;
}

void BlockManager::allocate(Sequence& seq) {
  MINIVLLM_CHECK(seq.block_table.empty()) << "sequence " << seq.seq_id() << " already has blocks";
  MINIVLLM_CHECK(can_allocate(seq)) << "sequence " << seq.seq_id() << " needs " << seq.num_blocks()
                                    << " blocks, " << num_free_blocks() << " free";
  const std::vector<int32_t> hits = match_prefix(seq);
  for (int32_t id : hits) {
    Block& block = blocks_[id];
    if (block.ref_count == 0) {
      take_free_block(id);
    } else {
      ++block.ref_count;
    }
    seq.block_table.push_back(id);
  }
  for (int i = static_cast<int>(hits.size()); i < seq.num_blocks(); ++i) seq.block_table.push_back(take_fresh_block());
  seq.num_cached_tokens = static_cast<int>(hits.size()) * block_size_;
}

void BlockManager::deallocate(Sequence& seq) {
  // Back to front: a prefix's tail is reused (evicted) before its head, which more requests share.
  // Entries of -1 were released out of the window already.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    if (*it >= 0) release_block(*it);
  }
  seq.block_table.clear();
  seq.num_cached_tokens = 0;
}

void BlockManager::release_out_of_window(Sequence& seq, int window, int end) {
  if (window <= 0) return;
  MINIVLLM_CHECK(end >= 0 && end <= static_cast<int>(seq.block_table.size()) * block_size_)
      << "sequence " << seq.seq_id() << ": " << end << " tokens computed with " << seq.block_table.size()
      << " blocks";
  const int64_t first_visible = static_cast<int64_t>(end) - window + 1;  // of any later query
  for (int b = 0; b < static_cast<int>(seq.block_table.size()); ++b) {
    const int64_t past = static_cast<int64_t>(b + 1) * block_size_;
    if (past > first_visible || past + block_size_ > end) break;
    int32_t& id = seq.block_table[static_cast<size_t>(b)];
    if (id < 0) continue;
    release_block(id);
    id = -1;
  }
}

bool BlockManager::needs_new_block(const Sequence& seq) const {
  return seq.num_blocks() > static_cast<int>(seq.block_table.size());
}

bool BlockManager::can_append(const Sequence& seq) const {
  return !needs_new_block(seq) || num_free_blocks() >= 1;
}

void BlockManager::may_append(Sequence& seq) {
  MINIVLLM_CHECK(!seq.block_table.empty()) << "sequence " << seq.seq_id() << " has no blocks to append to";
  if (needs_new_block(seq)) {
    MINIVLLM_CHECK_EQ(seq.num_blocks(), static_cast<int>(seq.block_table.size()) + 1)
        << "sequence " << seq.seq_id() << " grew by more than one block";
    seq.block_table.push_back(take_fresh_block());
  }
}

std::optional<uint64_t> BlockManager::known_hash(int32_t block_id) const {
  if (blocks_[block_id].hash) return blocks_[block_id].hash;
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->block_id == block_id) return it->hash;
  }
  return std::nullopt;
}

void BlockManager::hash_filled_blocks(const Sequence& seq, int begin, int end) {
  MINIVLLM_CHECK(begin >= 0 && end <= seq.num_tokens() && end <= static_cast<int>(seq.block_table.size()) * block_size_)
      << "sequence " << seq.seq_id() << ": tokens [" << begin << ", " << end << ") of " << seq.num_tokens() << " with "
      << seq.block_table.size() << " blocks";
  // Block i is filled by this step when its last token, (i + 1) * block_size - 1, is in [begin, end).
  for (int i = begin / block_size_; (i + 1) * block_size_ <= end; ++i) {
    std::optional<uint64_t> prefix;
    if (i > 0) {
      prefix = known_hash(seq.block_table[i - 1]);
      // Without the previous key the chain would claim this block starts a sequence.
      MINIVLLM_CHECK(prefix.has_value()) << "sequence " << seq.seq_id() << ": block " << i - 1 << " full but unhashed";
    }
    hash_full_block(seq.block_table[i], prefix, seq.block(i));
  }
}

}  // namespace minivllm
