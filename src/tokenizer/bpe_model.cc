// Builds the merge table (from a merge list or, for tiktoken, from the ranks themselves) and
// encodes pre-tokens with a bounded cache.
#include "tokenizer/bpe_model.h"

#include "common/check.h"

namespace minivllm {

BpeModel::BpeModel(const std::vector<std::string>& token_bytes,
                   const std::vector<std::pair<int32_t, int32_t>>& merges, bool merges_from_ranks,
                   bool ignore_merges, const std::string& source)
    : ignore_merges_(ignore_merges) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  bytes_to_id_.reserve(token_bytes.size());
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    const std::string& b = token_bytes[id];
    if (b.empty()) continue;
    bytes_to_id_.emplace(b, static_cast<int32_t>(id));
    if (b.size() == 1) byte_ids_[static_cast<unsigned char>(b[0])] = static_cast<int32_t>(id);
  }
  const auto n = static_cast<int32_t>(token_bytes.size());
  if (merges_from_ranks) {
    // tiktoken merges any adjacent pair whose concatenation is a token, lowest rank first; a
    // token of n bytes can come from at most n-1 such pairs.
    pairs_.reserve(token_bytes.size() * 2);
    for (int32_t id = 0; id < n; ++id) {
      const std::string_view b = token_bytes[id];
      for (size_t cut = 1; cut < b.size(); ++cut) {
        auto l = bytes_to_id_.find(b.substr(0, cut));
        if (l == bytes_to_id_.end()) continue;
        auto r = bytes_to_id_.find(b.substr(cut));
        if (r == bytes_to_id_.end()) continue;
        pairs_.insert(l->second, r->second, {id, id});
      }
    }
  } else {
    pairs_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const auto [l, r] = merges[rank];
      MINIVLLM_CHECK(l >= 0 && l < n && r >= 0 && r < n && !token_bytes[l].empty() && !token_bytes[r].empty())
          << source << ": merge #" << rank << " names ids " << l << ", " << r << " outside the vocabulary";
      auto it = bytes_to_id_.find(token_bytes[l] + token_bytes[r]);
      MINIVLLM_CHECK(it != bytes_to_id_.end())
          << source << ": merge #" << rank << " makes a token that is not in the vocabulary";
      pairs_.insert(l, r, {static_cast<int32_t>(rank), it->second});
    }
  }
}

void BpeModel::merge_word(std::string_view bytes, std::vector<int32_t>& symbols) const {
  symbols.clear();
  for (unsigned char c : bytes) {
    // A byte with no token is dropped, as HF does for a BPE without unk_token.
    if (byte_ids_[c] >= 0) symbols.push_back(byte_ids_[c]);
  }
  bpe_merge(pairs_, symbols);
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.size() == 1) {
    if (byte_ids_[static_cast<unsigned char>(bytes[0])] >= 0) out.push_back(byte_ids_[static_cast<unsigned char>(bytes[0])]);
    return;
  }
  if (ignore_merges_) {
    auto it = bytes_to_id_.find(bytes);
    if (it != bytes_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = bytes.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(bytes);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<int32_t> symbols;
  merge_word(bytes, symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();  // crude, but bounded and rare
    cache_.emplace(std::string(bytes), symbols);
  }
}

}  // namespace minivllm
