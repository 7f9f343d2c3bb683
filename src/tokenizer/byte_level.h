// GPT-2's byte-level alphabet: every byte maps to one printable code point, so byte-level BPE
// vocabularies (vocab.json, tokenizer.json, GGUF "gpt2") store raw bytes as visible text.
// The tokenizer works on raw bytes internally and converts vocabulary strings once at load time.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace minivllm::byte_level {

// The visible form of raw bytes (e.g. " hi" -> "Ġhi").
std::string encode(std::string_view raw);

// The raw bytes of a visible token, or nullopt when a character is outside the alphabet.
std::optional<std::string> decode(std::string_view visible);

}  // namespace minivllm::byte_level
