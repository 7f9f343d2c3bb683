// Finds added tokens (specials like <|im_start|>, and non-special ones like <think>) in raw text,
// leftmost-longest as HF tokenizers' AddedVocabulary does, with a byte trie.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_spec.h"

namespace minivllm {

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(const std::vector<AddedTokenSpec>& tokens);

  struct Match {
    size_t begin = 0, len = 0;
    int32_t id = -1;
  };
  // The leftmost (then longest) added token in text[from..]; id -1 when there is none.
  Match find(std::string_view text, size_t from) const;

  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // byte -> node, sorted
    int32_t token_id = -1;
  };
  int32_t child(int32_t node, unsigned char c) const;

  std::vector<Node> nodes_;  // nodes_[0] is the root
  bool first_byte_[256] = {};
};

}  // namespace minivllm
