// A compiled PCRE2 pattern (UTF + UCP, JIT when available) that reports every match of a text.
// HF tokenizers use Oniguruma; PCRE2 with UCP gives the same \p{L}, \p{N}, \s classes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace minivllm {

class Regex {
 public:
  // Throws minivllm::Error naming the pattern and PCRE2's message when it does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) for each non-overlapping match, left to right. `text` must be
  // valid UTF-8 (it is not re-checked). An empty match advances by one character.
  template <typename F>
  void for_each_match(std::string_view text, F&& on_match) const {
    size_t start = 0, begin = 0, end = 0;
    while (start <= text.size() && next_match(text, start, begin, end)) {
      on_match(begin, end);
      start = end > begin ? end : advance_one(text, end);
    }
  }

  const std::string& pattern() const { return pattern_; }

 private:
  bool next_match(std::string_view text, size_t start, size_t& begin, size_t& end) const;
  static size_t advance_one(std::string_view text, size_t pos);

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so users need no PCRE2 headers
  bool jit_ = false;
};

// `literal` escaped so that it matches itself.
std::string regex_escape(std::string_view literal);

}  // namespace minivllm
