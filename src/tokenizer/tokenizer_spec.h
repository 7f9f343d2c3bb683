// What every loader (tokenizer.json, vocab.json + merges.txt, tiktoken, GGUF) produces and the
// Tokenizer is built from: one plain description, so the file formats stay out of the encoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace minivllm {

enum class TokenizerModel {
  kByteLevelBpe,     // GPT-2 style: raw bytes, merges by rank (Qwen, Llama 3, SmolLM)
  kSentencePieceBpe  // SentencePiece BPE: characters, merges by score, "▁" for space, <0xNN> bytes
};

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One regex split of the pre-tokenizer; the stages apply in order, each to every piece so far.
struct PreTokenizerStage {
  std::string regex;  // PCRE2 syntax (UTF + UCP)
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel's: a piece not starting with ' ' gets one
};

// A token matched in the raw text before pre-tokenization (HF "added_tokens").
struct AddedTokenSpec {
  int32_t id = -1;
  std::string content;
  bool special = false;  // skipped by decode(skip_special_tokens = true)
};

// How far past the vocabulary and added-token count an id may lie (vocabulary ids, added-token
// ids): real files are dense or nearly so; ids beyond this are a broken file, refused rather than
// sizing the id tables by them.
inline constexpr size_t kTokenIdSlack = 65536;

struct TokenizerSpec {
  std::string source;  // file name(s), for error messages
  TokenizerModel model = TokenizerModel::kByteLevelBpe;
  // id -> token as the vocabulary file spells it ("Ġhi", "▁the", "<0x0A>"); "" marks an unused id.
  std::vector<std::string> vocab;
  // Byte-level BPE merges in rank order, as pairs of ids; the merged token must be in the vocab.
  std::vector<std::pair<int32_t, int32_t>> merges;
  // tiktoken: no merge list; any adjacent pair whose concatenation is a token merges, the lower
  // the concatenation's id the earlier.
  bool merges_from_ranks = false;
  // A pre-token that is itself a vocabulary token is emitted whole (HF ignore_merges, tiktoken).
  bool ignore_merges = false;
  std::vector<float> scores;  // SentencePiece: id -> score
  std::vector<PreTokenizerStage> pre_tokenizer;
  bool nfc = false;  // NFC-normalize text outside added tokens
  std::vector<AddedTokenSpec> added_tokens;
  // What encode(..., add_special_tokens = true) puts around the text (post-processor).
  std::vector<int32_t> prefix_ids, suffix_ids;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1;
  bool add_space_prefix = false;  // SentencePiece: a leading "▁" at the start of the text
};

}  // namespace minivllm
