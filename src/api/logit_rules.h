// The request-time half of logit_bias, min_tokens and bad_words: what the engine checks and
// resolves once when it accepts a request (the step-time half, the sparse bias of each sampling
// row, is engine/step_input.cc's; the backends apply it).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace minivllm {

// `params` with bad_words_token_ids and min_tokens_banned_ids filled in. Throws a ConfigKeyError
// naming the key for a logit_bias, allowed or stop token id outside [0, vocab), and for bad_words without a
// tokenizer. As vLLM: each bad word is encoded as given and with one leading space (a word inside
// a sentence is usually its own space-prefixed token), without special tokens, and both are kept.
SamplingParams resolve_logit_rules(const SamplingParams& params, const Tokenizer* tokenizer, int64_t vocab,
                                   const std::vector<int64_t>& eos_token_ids);

}  // namespace minivllm
