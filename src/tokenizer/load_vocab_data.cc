// GGUF vocabularies (VocabData): "gpt2" = byte-level BPE with merges and a split regex chosen by
// tokenizer.ggml.pre (as llama.cpp does), "llama" = SentencePiece BPE by scores.
#include "common/check.h"
#include "tokenizer/loaders.h"
#include "tokenizer/string_map.h"

namespace minivllm {
namespace {

enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// llama.cpp's pre-tokenizer choices for the families we serve; anything else gets GPT-2's regex.
std::vector<PreTokenizerStage> pre_tokenizer_for(const std::string& pre) {
  auto stage = [](const char* re) { return PreTokenizerStage{re, SplitBehavior::kIsolated, false, false}; };
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "smaug-bpe") return {stage(kLlama3SplitRegex)};
  if (pre == "qwen2" || pre == "stablelm2" || pre == "deepseek-r1-qwen") return {stage(kQwen2SplitRegex)};
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "codeshell") {
    return {stage(R"(\p{N})"), stage(kGpt2SplitRegex)};
  }
  return {stage(kGpt2SplitRegex)};
}

void add_token_types(const VocabData& v, TokenizerSpec& spec) {
  MINIVLLM_CHECK(v.token_types.empty() || v.token_types.size() == v.tokens.size())
      << "GGUF vocabulary: " << v.token_types.size() << " token types for " << v.tokens.size() << " tokens";
  for (size_t id = 0; id < v.token_types.size(); ++id) {
    const int t = v.token_types[id];
    // Matched in text as whole tokens (llama.cpp's special-token cache); only control and
    // unknown ones are skipped by decode(skip_special_tokens).
    if (t == kControl || t == kUnknown || t == kUserDefined) {
      spec.added_tokens.push_back({static_cast<int32_t>(id), v.tokens[id], t != kUserDefined});
    }
  }
}

int32_t checked_id(int64_t id, size_t n, const char* what) {
  if (id < 0) return -1;
  MINIVLLM_CHECK(static_cast<size_t>(id) < n) << "GGUF vocabulary: " << what << " " << id << " >= vocab size " << n;
  return static_cast<int32_t>(id);
}

}  // namespace

TokenizerSpec spec_from_vocab_data(const VocabData& v) {
  TokenizerSpec spec;
  spec.source = "GGUF vocabulary (" + v.model + ")";
  MINIVLLM_CHECK(!v.tokens.empty()) << spec.source << ": no tokens";
  spec.vocab = v.tokens;
  spec.bos_id = checked_id(v.bos_token_id, v.tokens.size(), "bos_token_id");
  spec.eos_id = checked_id(v.eos_token_id, v.tokens.size(), "eos_token_id");
  spec.unk_id = checked_id(v.unknown_token_id, v.tokens.size(), "unknown_token_id");
  if (v.add_bos_token && spec.bos_id >= 0) spec.prefix_ids = {spec.bos_id};
  if (v.add_eos_token && spec.eos_id >= 0) spec.suffix_ids = {spec.eos_id};
  add_token_types(v, spec);
  if (v.model == "gpt2") {
    spec.model = TokenizerModel::kByteLevelBpe;
    StringMap<int32_t> ids;
    for (size_t id = 0; id < v.tokens.size(); ++id) ids.emplace(v.tokens[id], static_cast<int32_t>(id));
    for (size_t i = 0; i < v.merges.size(); ++i) {
      const std::string& m = v.merges[i];
      const size_t space = m.find(' ');
      MINIVLLM_CHECK(space != std::string::npos) << spec.source << ": merge #" << i << " '" << m << "' is not two tokens";
      auto l = ids.find(std::string_view(m).substr(0, space));
      auto r = ids.find(std::string_view(m).substr(space + 1));
      MINIVLLM_CHECK(l != ids.end() && r != ids.end())
          << spec.source << ": merge #" << i << " '" << m << "' names a token not in the vocabulary";
      spec.merges.emplace_back(l->second, r->second);
    }
    spec.pre_tokenizer = pre_tokenizer_for(v.pre);
    spec.ignore_merges = v.pre == "llama-bpe" || v.pre == "llama3" || v.pre == "llama-v3";
    spec.nfc = v.pre == "qwen2";
  } else if (v.model == "llama") {
    spec.model = TokenizerModel::kSentencePieceBpe;
    spec.scores = v.scores;
    MINIVLLM_CHECK(spec.scores.size() == v.tokens.size())
        << spec.source << ": " << v.scores.size() << " scores for " << v.tokens.size() << " tokens";
    spec.add_space_prefix = v.add_space_prefix;
  } else {
    MINIVLLM_FAIL() << "unsupported GGUF tokenizer model '" << v.model << "' (gpt2 and llama are)";
  }
  return spec;
}

}  // namespace minivllm
