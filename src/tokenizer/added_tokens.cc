// Byte trie over the added tokens' contents; a table of possible first bytes lets the scan skip
// ordinary text quickly.
#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

namespace minivllm {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedTokenSpec>& tokens) {
  nodes_.emplace_back();
  for (const AddedTokenSpec& t : tokens) {
    if (t.content.empty()) continue;
    int32_t node = 0;
    for (unsigned char c : t.content) {
      int32_t next = child(node, c);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& ch = nodes_[node].children;
        ch.insert(std::upper_bound(ch.begin(), ch.end(), std::make_pair(c, int32_t{-1})), {c, next});
      }
      node = next;
    }
    nodes_[node].token_id = t.id;
    first_byte_[static_cast<unsigned char>(t.content[0])] = true;
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char c) const {
  for (const auto& [byte, next] : nodes_[node].children) {
    if (byte == c) return next;
  }
  return -1;
}

AddedTokenMatcher::Match AddedTokenMatcher::find(std::string_view text, size_t from) const {
  if (empty()) return {};
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) continue;
    Match best;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      if (nodes_[node].token_id >= 0) best = {i, j + 1 - i, nodes_[node].token_id};
    }
    if (best.id >= 0) return best;
  }
  return {};
}

}  // namespace minivllm
