// The BPE merge loop of byte-level tokenizers: repeatedly merge the adjacent pair of lowest rank,
// the leftmost on ties (the order of HF tokenizers' Word::merge_all and of tiktoken).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace minivllm {

// (left id, right id) -> (rank, merged id), in a flat open-addressing table: the merge loop does
// one lookup per adjacent pair, so this is the hot path of encoding.
class PairRankMap {
 public:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  void reserve(size_t n);
  // Keeps the lower rank when a pair is inserted twice.
  void insert(int32_t left, int32_t right, Merge m);
  const Merge* find(int32_t left, int32_t right) const {
    if (keys_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ULL;
  static uint64_t pack(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  size_t slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ULL) >> shift_; }
  void grow();

  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
  size_t size_ = 0, mask_ = 0;
  int shift_ = 64;
};

// Merges `symbols` (token ids, one per byte to start with) in place.
void bpe_merge(const PairRankMap& pairs, std::vector<int32_t>& symbols);

// The two strategies bpe_merge chooses between by length; exposed so tests can compare them.
void bpe_merge_quadratic(const PairRankMap& pairs, std::vector<int32_t>& symbols);
void bpe_merge_heap(const PairRankMap& pairs, std::vector<int32_t>& symbols);

}  // namespace minivllm
