// The prefix-cache key of one full KV block: a 64-bit hash chaining the previous block's key with
// this block's token ids, so equal keys mean (almost surely) equal prefixes up to and including it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace minivllm {

// prefix: the previous block's hash, or nullopt for the first block of a sequence.
uint64_t hash_block_tokens(std::optional<uint64_t> prefix, const std::vector<int32_t>& token_ids);

}  // namespace minivllm
