// UTF-8 scanning shared by encode (validation), decode (lossy repair) and the streaming
// detokenizer (hold back an unfinished character). One step function keeps the three consistent.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace minivllm::utf8 {

enum class StepKind { kValid, kInvalid, kIncomplete };

// What the bytes at the start of `s` (non-empty) hold: a whole valid character (len = its size),
// an invalid sequence (len = the maximal subpart to replace by one U+FFFD, as Rust's
// from_utf8_lossy and Python's "replace" do), or the valid beginning of a character cut by the end
// of `s` (len = s.size()).
struct Step {
  StepKind kind;
  size_t len;
};
Step step(std::string_view s);

// Byte offset of the first invalid or truncated sequence, or npos when `s` is valid UTF-8.
size_t first_invalid(std::string_view s);

// Appends `s` to `out` with each invalid sequence replaced by U+FFFD. With `final_chunk` false a
// truncated character at the end is left unconsumed; returns how many bytes of `s` were consumed.
size_t append_lossy(std::string_view s, bool final_chunk, std::string& out);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Appends the UTF-8 encoding of code point `cp` (< 0x110000).
void append_code_point(char32_t cp, std::string& out);

}  // namespace minivllm::utf8
