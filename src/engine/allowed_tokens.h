// vLLM's allowed_token_ids as a TokenConstraint: the same bitmask every step, so that the sampler
// takes only those tokens through the structured outputs' mask path (a dense ban of the rest of the
// vocabulary would be a sparse bias of ~150,000 entries a row).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/token_constraint.h"

namespace minivllm {

// ids: each in [0, vocab_size) (the engine checks them first), at least one.
std::unique_ptr<TokenConstraint> make_allowed_tokens(const std::vector<int64_t>& ids, int64_t vocab_size);

}  // namespace minivllm
