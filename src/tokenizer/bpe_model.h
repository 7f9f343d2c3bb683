// Byte-level BPE over raw bytes: the merge table keyed on pairs of ids, plus a cache of the result
// per pre-token (text repeats its words, so most pieces are cache hits).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_merge.h"
#include "tokenizer/string_map.h"

namespace minivllm {

class BpeModel {
 public:
  // token_bytes: id -> raw bytes of the model's own tokens ("" where the id is not one, e.g. an
  // added token). merges: pairs of ids in rank order. merges_from_ranks: tiktoken's rule instead.
  BpeModel(const std::vector<std::string>& token_bytes, const std::vector<std::pair<int32_t, int32_t>>& merges,
           bool merges_from_ranks, bool ignore_merges, const std::string& source);

  // Appends the ids of one pre-token.
  void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;

 private:
  void merge_word(std::string_view bytes, std::vector<int32_t>& symbols) const;

  PairRankMap pairs_;
  int32_t byte_ids_[256];
  StringMap<int32_t> bytes_to_id_;
  bool ignore_merges_;

  static constexpr size_t kCacheMaxEntries = 1 << 16;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace minivllm
