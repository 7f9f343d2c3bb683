// SentencePiece BPE as GGUF "llama" vocabularies describe it: start from UTF-8 characters, merge
// the adjacent pair whose concatenation is the highest-scoring piece (leftmost on ties), and spell
// characters that are not pieces with byte tokens <0xNN> (or unk).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/string_map.h"

namespace minivllm {

class SentencePieceModel {
 public:
  SentencePieceModel(const std::vector<std::string>& pieces, const std::vector<float>& scores,
                     int32_t unk_id);

  // Appends the ids of `text`, already escaped ("▁" for space).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // 0..255 when `piece` is a byte token "<0xNN>", else -1.
  static int byte_of_piece(std::string_view piece);

 private:
  void emit_symbol(std::string_view sym, std::vector<int32_t>& out) const;

  StringMap<int32_t> piece_to_id_;
  std::vector<float> scores_;
  int32_t byte_ids_[256];
  int32_t unk_id_;
};

}  // namespace minivllm
