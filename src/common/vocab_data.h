// A tokenizer vocabulary as GGUF metadata carries it (tokenizer.ggml.*). The GGUF loader fills
// it; the tokenizer builds from it. Kept here so neither layer depends on the other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace minivllm {

struct VocabData {
  std::string model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;    // tokenizer.ggml.pre, e.g. "smollm", "llama-bpe", "qwen2"; may be empty
  std::vector<std::string> tokens;
  std::vector<float> scores;         // SentencePiece scores; may be empty
  std::vector<int32_t> token_types;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;   // "a b" pairs for gpt2-style BPE
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  int64_t unknown_token_id = -1;
  int64_t padding_token_id = -1;
  bool add_bos_token = false;
  bool add_eos_token = false;
  bool add_space_prefix = false;
};

}  // namespace minivllm
