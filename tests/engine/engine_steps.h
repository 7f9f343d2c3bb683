// What the Scheduler does around the BlockManager for a whole-prompt prefill step (every uncached
// token) and a decode step (the last token): the blocks those steps fill are hashed, to be
// registered at commit_hashes.
#pragma once

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace minivllm {

inline void allocate_prefill(BlockManager& bm, Sequence& seq) {
  bm.allocate(seq);
  seq.num_computed_tokens = seq.num_cached_tokens;
  seq.num_new_tokens = seq.num_tokens() - seq.num_cached_tokens;
  bm.hash_filled_blocks(seq, seq.num_computed_tokens, seq.num_computed_tokens + seq.num_new_tokens);
}

inline void append_decode(BlockManager& bm, Sequence& seq) {
  bm.may_append(seq);
  seq.num_computed_tokens = seq.num_tokens() - 1;
  seq.num_new_tokens = 1;
  bm.hash_filled_blocks(seq, seq.num_computed_tokens, seq.num_computed_tokens + seq.num_new_tokens);
}

}  // namespace minivllm
