// The tokenizer layer's public API: text <-> token ids, matching Hugging Face tokenizers exactly
// for byte-level BPE (Qwen2/3, Llama 3, GPT-2 style GGUF) and SentencePiece BPE GGUF vocabularies,
// plus streaming detokenization for printing generated text as it comes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/vocab_data.h"

namespace minivllm {

struct TokenizerSpec;

class Tokenizer {
 public:
  // tokenizer.json, else vocab.json + merges.txt (+ tokenizer_config.json), else
  // original/tokenizer.model (tiktoken). tokenizer_config.json beside them sets bos/eos.
  static std::unique_ptr<Tokenizer> from_dir(const std::string& dir);
  static std::unique_ptr<Tokenizer> from_tokenizer_json(const std::string& path);
  // Qwen2 conventions (its split regex, NFC) unless the config names a GPT-2 tokenizer class.
  static std::unique_ptr<Tokenizer> from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt,
                                                      const std::string& tokenizer_config_json /* may be "" */);
  // Llama 3 conventions: its split regex, 256 special tokens after the ranks, BOS added.
  static std::unique_ptr<Tokenizer> from_tiktoken(const std::string& path);
  static std::unique_ptr<Tokenizer> from_vocab_data(const VocabData& v);
  explicit Tokenizer(TokenizerSpec spec);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Added tokens written in the text are matched as tokens (HF default). add_special_tokens adds
  // what the post-processor adds (Llama 3: BOS; Qwen3: nothing). Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Invalid UTF-8 produced by the ids becomes U+FFFD, as in HF.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;  // largest id + 1
  std::optional<int32_t> token_to_id(std::string_view token) const;  // as the vocabulary spells it
  std::string id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  int32_t bos_token_id() const;  // -1 when none
  int32_t eos_token_id() const;  // -1 when none
  std::string bos_token() const;  // "" when none
  std::string eos_token() const;
  // The raw bytes `id` decodes to (may be a fragment of a UTF-8 character).
  std::string_view token_bytes(int32_t id) const;
  // Whether `id` has a piece. A model's vocabulary may be larger than its tokenizer's (Qwen3: 151,936
  // embedding rows, 151,669 tokens), and a model can sample those rows (dummy weights do).
  bool has_piece(int32_t id) const;

 private:
  friend class IncrementalDetokenizer;
  struct Impl;
  void check_id(int32_t id) const;
  bool strips_leading_space() const;
  std::unique_ptr<Impl> impl_;
};

// Streaming: feed ids one at a time, get text that is safe to print; never emits a broken UTF-8
// sequence, emits each character exactly once; flush() returns what is left at the end. The
// concatenation of everything returned equals Tokenizer::decode of all the ids.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens = false);
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_tokens_;
  bool started_ = false;  // some byte has been produced (SentencePiece drops a leading space)
  std::string pending_;   // bytes of an unfinished character
};

}  // namespace minivllm
