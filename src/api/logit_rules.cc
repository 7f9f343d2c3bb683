#include "api/logit_rules.h"

#include <algorithm>
#include <string>

#include "common/config_key.h"

namespace minivllm {

SamplingParams resolve_logit_rules(const SamplingParams& params, const Tokenizer* tokenizer, int64_t vocab,
                                   const std::vector<int64_t>& eos_token_ids) {
  SamplingParams p = params;
  for (const auto& [id, bias] : p.logit_bias) {
    if (id >= vocab) {
      throw ConfigKeyError("", "logit_bias", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                                 std::to_string(vocab) + ")");
    }
  }
  for (int64_t id : p.allowed_token_ids) {
    if (id >= vocab) {
      throw ConfigKeyError("", "allowed_token_ids", "token id " + std::to_string(id) +
                                                        " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  p.bad_words_token_ids.clear();
  if (!p.bad_words.empty() && tokenizer == nullptr) {
    throw ConfigKeyError("", "bad_words", "needs a tokenizer, and the model has none");
  }
  for (const std::string& word : p.bad_words) {
    for (const std::string& form : {word, " " + word}) {
      std::vector<int32_t> ids = tokenizer->encode(form, /*add_special_tokens=*/false);
      if (ids.empty()) continue;
      if (std::find(p.bad_words_token_ids.begin(), p.bad_words_token_ids.end(), ids) == p.bad_words_token_ids.end()) {
        p.bad_words_token_ids.push_back(std::move(ids));
      }
    }
  }
  p.min_tokens_banned_ids.clear();
  if (p.min_tokens > 0) {
    std::vector<int64_t> ids = p.stop_token_ids;
    if (!p.ignore_eos) ids.insert(ids.end(), eos_token_ids.begin(), eos_token_ids.end());
    for (int64_t id : ids) {
      // A stop id past the vocabulary can never be sampled: nothing to hold back.
      if (id < 0 || id >= vocab) continue;
      const auto v = static_cast<int32_t>(id);
      if (std::find(p.min_tokens_banned_ids.begin(), p.min_tokens_banned_ids.end(), v) == p.min_tokens_banned_ids.end()) {
        p.min_tokens_banned_ids.push_back(v);
      }
    }
  }
  return p;
}

}  // namespace minivllm
