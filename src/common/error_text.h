// Error text for users, shared by the CLI and the server: an Error's message without the
// "file:line: check failed: cond: " prefixes that MINIVLLM_CHECK writes for developers (clients
// should not see source paths), and short excerpts of whatever input a message quotes.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace minivllm {

// Every "file:line: check failed: cond: " is removed, the nested ones too: an Error that wraps
// another's what() ("malformed tokenizer file F: <inner>") would otherwise still show the inner
// source path.
inline std::string message_for_users(std::string what) {
  const std::string marker = "check failed: ";
  for (size_t at; (at = what.find(marker)) != std::string::npos;) {
    // The failed condition follows the marker and ends at the next ": ".
    const size_t colon = what.find(": ", at + marker.size());
    if (colon == std::string::npos) break;
    // "file:line: " ends just before the marker; source paths hold no spaces.
    const size_t space = at >= 2 ? what.rfind(' ', at - 2) : std::string::npos;
    const size_t start = space == std::string::npos ? 0 : space + 1;
    what.erase(start, colon + 2 - start);
  }
  return what;
}

inline constexpr size_t kMaxExcerptChars = 80;

// At most `max_chars` bytes of `text` (cut at a character boundary, "..." marking the cut).
std::string text_excerpt(std::string_view text, size_t max_chars = kMaxExcerptChars);

// A JSON parser error for users: nlohmann's messages quote the token they stopped in ("last read:
// '...'", "number overflow parsing '...'"), which can be the whole input; this keeps the message,
// shortens the quote, and drops the "[json.exception.parse_error.101] " prefix.
std::string json_error_excerpt(const nlohmann::json::exception& e);

}  // namespace minivllm
