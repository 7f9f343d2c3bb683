// PCRE2 glue: compile with UTF | UCP, JIT-compile, and match with a per-thread JIT stack and
// match data, so one Regex can be used by many threads at once.
#include "tokenizer/regex.h"

#include <algorithm>
#include <cstdint>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/check.h"

namespace minivllm {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Scratch space of one thread: reused by every match on that thread. Nested use (a stage's
// callback running the next stage) is fine because callers copy the ovector before the callback.
struct ThreadScratch {
  pcre2_match_data* match_data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadScratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~ThreadScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(match_data);
  }
};

ThreadScratch& scratch() {
  thread_local ThreadScratch s;
  return s;
}

// PCRE2's match limit (10 million by default) counts backtracking steps. The split regexes backtrack
// once per character of a whitespace run (`\s*[\r\n]+` eats the run, then gives it back), so a
// valid text with a long run (10 MB of spaces) would fail at the default. The limit grows with the
// text left to match: linear patterns never reach it; a catastrophic pattern still stops.
uint32_t match_limit(size_t remaining) {
  constexpr uint64_t kBase = 10'000'000, kPerByte = 8;
  return static_cast<uint32_t>(std::min<uint64_t>(kBase + kPerByte * remaining, UINT32_MAX));
}

}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  MINIVLLM_CHECK(code != nullptr) << "bad pre-tokenizer regex /" << pattern << "/ at offset " << offset
                                  << ": " << pcre2_message(error);
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool Regex::next_match(std::string_view text, size_t start, size_t& begin, size_t& end) const {
  ThreadScratch& s = scratch();
  pcre2_set_match_limit(s.context, match_limit(text.size() - start));
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), start, 0, s.match_data, s.context)
                      : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, s.match_data,
                                    s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  MINIVLLM_CHECK(rc >= 0) << "regex /" << pattern_ << "/ failed on a text of " << text.size()
                          << " bytes: " << pcre2_message(rc);
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.match_data);
  begin = ov[0];
  end = ov[1];
  return true;
}

size_t Regex::advance_one(std::string_view text, size_t pos) {
  if (pos >= text.size()) return text.size() + 1;  // ends the loop
  ++pos;
  while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!plain) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace minivllm
