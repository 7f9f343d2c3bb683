// The merge loop keeps symbols in a linked list and candidate pairs in a max-heap by score; a
// popped pair whose sides changed since it was pushed is stale and skipped (as llama.cpp does).
#include "tokenizer/spm_model.h"

#include <queue>

#include "common/utf8.h"

namespace minivllm {

int SentencePieceModel::byte_of_piece(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(p[3]), lo = hex(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

SentencePieceModel::SentencePieceModel(const std::vector<std::string>& pieces,
                                       const std::vector<float>& scores, int32_t unk_id)
    : scores_(scores), unk_id_(unk_id) {
  scores_.resize(pieces.size(), 0.0f);
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  piece_to_id_.reserve(pieces.size());
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].empty()) continue;
    piece_to_id_.emplace(pieces[id], static_cast<int32_t>(id));
    const int b = byte_of_piece(pieces[id]);
    if (b >= 0) byte_ids_[b] = static_cast<int32_t>(id);
  }
}

void SentencePieceModel::emit_symbol(std::string_view sym, std::vector<int32_t>& out) const {
  auto it = piece_to_id_.find(sym);
  if (it != piece_to_id_.end()) {
    out.push_back(it->second);
    return;
  }
  // Only single characters can be missing: merges only ever build pieces of the vocabulary.
  for (unsigned char c : sym) {
    if (byte_ids_[c] >= 0) {
      out.push_back(byte_ids_[c]);
    } else if (unk_id_ >= 0) {
      out.push_back(unk_id_);
      return;  // one unk for the whole character
    }
  }
}

void SentencePieceModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  struct Symbol {
    size_t begin, len;
    int prev, next;
  };
  std::vector<Symbol> sym;
  for (size_t i = 0; i < text.size();) {
    const size_t len = std::min(utf8::step(text.substr(i)).len, text.size() - i);
    sym.push_back({i, len, static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1});
    i += len;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Candidate {
    float score;
    int left;
    size_t len;  // of the concatenation when pushed, to detect stale entries
    bool operator<(const Candidate& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::priority_queue<Candidate> heap;
  auto push = [&](int left) {
    if (left < 0 || sym[left].next < 0) return;
    const Symbol& l = sym[left];
    const Symbol& r = sym[l.next];
    auto it = piece_to_id_.find(text.substr(l.begin, l.len + r.len));
    if (it != piece_to_id_.end()) heap.push({scores_[it->second], left, l.len + r.len});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = sym[c.left];
    if (l.len == 0 || l.next < 0 || l.len + sym[l.next].len != c.len) continue;
    Symbol& r = sym[l.next];
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (l.next >= 0) sym[l.next].prev = c.left;
    push(l.prev);
    push(c.left);
  }
  for (int i = 0; i >= 0; i = sym[i].next) emit_symbol(text.substr(sym[i].begin, sym[i].len), out);
}

}  // namespace minivllm
