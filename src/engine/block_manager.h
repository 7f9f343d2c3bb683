// BlockManager: the paged KV cache's bookkeeping (seeds: BlockManager). Blocks of block_size tokens
// with reference counts, a free list in least-recently-freed order, and a prefix cache by content:
// a full block is found again by its chained hash, and a hit is confirmed by comparing tokens.
// A step is a transaction: a block filled by a step is findable only once that step succeeded
// (commit_hashes); a failed step's blocks are never found (discard_hashes), nor is a block freed
// before its step ended.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"

namespace minivllm {

class BlockManager {
 public:
  // The hash of a full block given the previous block's hash (tests inject colliding ones).
  using BlockHasher = uint64_t (*)(std::optional<uint64_t> prefix, const std::vector<int32_t>& token_ids);

  BlockManager(int num_blocks, int block_size, BlockHasher hasher = nullptr);

  // Prefill: whether seq's blocks fit now (cached blocks in use by others cost nothing).
  bool can_allocate(const Sequence& seq) const;
  // Sets seq.block_table (every block of its tokens, up front: a prompt prefilled in chunks never
  // waits for blocks mid-prompt) and seq.num_cached_tokens (a multiple of block_size, always <
  // num_tokens). Hashes nothing: see hash_filled_blocks.
  void allocate(Sequence& seq);
  // Releases seq's blocks; their contents stay findable in the prefix cache until reused.
  void deallocate(Sequence& seq);
  // A model whose every layer slides over `window` keys (Mistral): releases seq's blocks that no
  // later query can see, once its tokens [0, end) are computed and hashed (after commit_hashes):
  // block b goes when its last key is before the window of position end ((b + 1) * block_size <=
  // end - window + 1) and block b + 1 is full, so that the next block's chain hash never needs
  // b's. The table entry becomes -1 (the attention kernels read no block before the window); the
  // contents stay findable in the prefix cache until reused, as deallocate's do.
  void release_out_of_window(Sequence& seq, int window, int end);
  // The prompt tokens allocate(seq) would take from the prefix cache now.
  int num_cached_tokens_if_allocated(const Sequence& seq) const;

  // Decode: called once the sampled token is appended; the new token may need a fresh block.
  bool can_append(const Sequence& seq) const;
  // Adds a block when the last token starts one.
  void may_append(Sequence& seq);

  // A step computed seq's tokens [begin, end): every block that step fills is hashed, to be
  // registered by commit_hashes once it succeeded. Blocks only partly written by a prefill chunk
  // wait for the chunk that completes them.
  void hash_filled_blocks(const Sequence& seq, int begin, int end);

  // The step that wrote the blocks filled since the last commit succeeded: they become findable.
  void commit_hashes();
  // That step failed: those blocks are never registered.
  void discard_hashes() { pending_.clear(); }
  int num_pending_hashes() const { return static_cast<int>(pending_.size()); }

  // Forgets every cached block, so that the same prompts are prefilled again (benchmark
  // repetitions; vLLM's reset_prefix_cache). Only while no block is in use: a running sequence's
  // next full block chains from its last one's hash. Returns false, changing nothing, otherwise.
  bool reset_prefix_cache();

  int num_free_blocks() const { return static_cast<int>(free_list_.size()); }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  int ref_count(int32_t block_id) const;

 private:
  struct Block {
    int ref_count = 0;
    std::optional<uint64_t> hash;  // set once full
    std::vector<int32_t> token_ids;
    std::list<int32_t>::iterator free_pos;  // valid while ref_count == 0
  };

  // The cached block ids matching seq's leading full blocks, stopping at the first miss and never
  // covering the block that holds the last token (its logits must be computed).
  std::vector<int32_t> match_prefix(const Sequence& seq) const;
  // Takes a specific free block (a cache hit on a free block, or the free list's head).
  void take_free_block(int32_t block_id);
  // Takes the least recently freed block for new contents, forgetting what it cached.
  int32_t take_fresh_block();
  void release_block(int32_t block_id);
  // Hashes a full block for registration at the next commit; returns its hash (the next block's prefix).
  uint64_t hash_full_block(int32_t block_id, std::optional<uint64_t> prefix, std::vector<int32_t> token_ids);
  bool needs_new_block(const Sequence& seq) const;
  // The chain hash of a block that is committed or pending in this step.
  std::optional<uint64_t> known_hash(int32_t block_id) const;

  int block_size_;
  BlockHasher hasher_;
  std::vector<Block> blocks_;
  std::list<int32_t> free_list_;  // front: next to reuse
  std::unordered_map<uint64_t, int32_t> hash_to_block_id_;
  struct PendingHash {
    int32_t block_id;
    uint64_t hash;
    std::vector<int32_t> token_ids;
  };
  std::vector<PendingHash> pending_;  // full blocks whose KV the current step writes
};

}  // namespace minivllm
