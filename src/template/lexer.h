// Splits a Jinja template into text, `{{ }}` and `{% %}` chunks, applying the whitespace rules of
// the Hugging Face chat-template environment (trim_blocks, lstrip_blocks, `-`/`+` modifiers) and
// tokenizing the inside of tags. Comments are dropped here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minivllm::jinja {

enum class TokenKind { kName, kString, kInt, kFloat, kOp, kEnd };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // name, operator, or the unescaped string literal
  int64_t int_value = 0;
  double float_value = 0;
  int line = 0;
};

enum class ChunkKind { kText, kOutput, kStatement };

struct Chunk {
  ChunkKind kind = ChunkKind::kText;
  std::string text;           // kText only
  std::vector<Token> tokens;  // kOutput / kStatement, terminated by a kEnd token
  int line = 0;
};

std::vector<Chunk> lex_template(std::string_view source);

}  // namespace minivllm::jinja
