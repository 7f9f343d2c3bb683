// Short words (nearly all) merge fastest with a linear scan over a small array; long ones (runs of
// CJK letters, long numbers-free identifiers) use a heap over a linked list, O(n log n).
#include "tokenizer/bpe_merge.h"

#include <climits>
#include <queue>

namespace minivllm {

void PairRankMap::reserve(size_t n) {
  while ((size_ + n) * 2 > keys_.size()) grow();
}

void PairRankMap::grow() {
  const size_t cap = keys_.empty() ? 1024 : keys_.size() * 2;
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<Merge> old_values = std::move(values_);
  keys_.assign(cap, kEmpty);
  values_.assign(cap, Merge{0, 0});
  mask_ = cap - 1;
  shift_ = 64 - __builtin_ctzll(cap);
  for (size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] == kEmpty) continue;
    size_t j = slot(old_keys[i]);
    while (keys_[j] != kEmpty) j = (j + 1) & mask_;
    keys_[j] = old_keys[i];
    values_[j] = old_values[i];
  }
}

void PairRankMap::insert(int32_t left, int32_t right, Merge m) {
  if ((size_ + 1) * 2 > keys_.size()) grow();
  const uint64_t key = pack(left, right);
  size_t i = slot(key);
  while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask_;
  if (keys_[i] == key) {
    if (m.rank < values_[i].rank) values_[i] = m;
    return;
  }
  keys_[i] = key;
  values_[i] = m;
  ++size_;
}

namespace {
constexpr size_t kHeapThreshold = 128;

int32_t rank_of(const PairRankMap& pairs, int32_t l, int32_t r) {
  const PairRankMap::Merge* m = pairs.find(l, r);
  return m ? m->rank : INT_MAX;
}
}  // namespace

void bpe_merge_quadratic(const PairRankMap& pairs, std::vector<int32_t>& s) {
  if (s.size() < 2) return;
  thread_local std::vector<int32_t> ranks;  // ranks[i]: the pair (s[i], s[i+1])
  ranks.resize(s.size() - 1);
  for (size_t i = 0; i + 1 < s.size(); ++i) ranks[i] = rank_of(pairs, s[i], s[i + 1]);
  while (!ranks.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < ranks.size(); ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT_MAX) break;
    s[best] = pairs.find(s[best], s[best + 1])->merged;
    s.erase(s.begin() + best + 1);
    ranks.erase(ranks.begin() + best);
    if (best > 0) ranks[best - 1] = rank_of(pairs, s[best - 1], s[best]);
    if (best < ranks.size()) ranks[best] = rank_of(pairs, s[best], s[best + 1]);
  }
}

void bpe_merge_heap(const PairRankMap& pairs, std::vector<int32_t>& s) {
  const int n = static_cast<int>(s.size());
  if (n < 2) return;
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank, pos, merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const PairRankMap::Merge* m = pairs.find(s[pos], s[next[pos]])) heap.push({m->rank, pos, m->merged});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    // Stale entries: a side was merged away, or the pair changed since it was pushed.
    if (!alive[c.pos] || next[c.pos] < 0) continue;
    const PairRankMap::Merge* m = pairs.find(s[c.pos], s[next[c.pos]]);
    if (!m || m->rank != c.rank || m->merged != c.merged) continue;
    const int right = next[c.pos];
    s[c.pos] = c.merged;
    alive[right] = false;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t out = 0;
  for (int i = 0; i >= 0; i = next[i]) s[out++] = s[i];
  s.resize(out);
}

void bpe_merge(const PairRankMap& pairs, std::vector<int32_t>& symbols) {
  if (symbols.size() <= kHeapThreshold) {
    bpe_merge_quadratic(pairs, symbols);
  } else {
    bpe_merge_heap(pairs, symbols);
  }
}

}  // namespace minivllm
