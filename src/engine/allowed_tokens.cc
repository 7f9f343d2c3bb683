#include "engine/allowed_tokens.h"

#include <algorithm>

#include "common/check.h"

namespace minivllm {
namespace {

class AllowedTokens : public TokenConstraint {
 public:
  AllowedTokens(const std::vector<int64_t>& ids, int64_t vocab_size)
      : words_(static_cast<size_t>((vocab_size + 31) / 32), 0) {
    MINIVLLM_CHECK(!ids.empty()) << "allowed_token_ids: no token allowed";
    for (int64_t id : ids) {
      MINIVLLM_CHECK(id >= 0 && id < vocab_size) << "allowed_token_ids: " << id << " is outside [0, " << vocab_size << ")";
      words_[static_cast<size_t>(id / 32)] |= static_cast<int32_t>(1u << (id % 32));
    }
  }
  int bitmask_words() const override { return static_cast<int>(words_.size()); }
  void fill_bitmask(int32_t* words) override { std::copy(words_.begin(), words_.end(), words); }
  // Sampled under the mask, every token is one of them; one that is not ends the sequence, as a
  // grammar's refusal does.
  bool accept(int32_t token) override {
    return token >= 0 && static_cast<size_t>(token / 32) < words_.size() &&
           (static_cast<uint32_t>(words_[static_cast<size_t>(token / 32)]) >> (token % 32) & 1u) != 0;
  }
  void rollback(int) override {}
  bool is_terminated() const override { return false; }

 private:
  std::vector<int32_t> words_;
};

}  // namespace

std::unique_ptr<TokenConstraint> make_allowed_tokens(const std::vector<int64_t>& ids, int64_t vocab_size) {
  return std::make_unique<AllowedTokens>(ids, vocab_size);
}

}  // namespace minivllm
