// The MINIVLLM_* tuning knobs read from the environment: 0 / 1 switches, whole numbers and words.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/check.h"

namespace minivllm {

// nullopt when the variable is unset or empty; any value other than 0 or 1 is an error naming it.
inline std::optional<bool> env_switch(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return std::nullopt;
  const std::string w = v;
  MINIVLLM_CHECK(w == "0" || w == "1") << name << "=" << w << " must be 0 or 1";
  return w == "1";
}

// nullopt when the variable is unset or empty; otherwise a whole number in [lo, hi] (decimal, no
// sign other than '-', nothing after it: atoi's silent 0 for "abc" or 12 for "12k" would tune the
// engine to a value nobody asked for), else an error naming the variable and the range.
inline std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  const bool starts_well = v[0] == '-' || (v[0] >= '0' && v[0] <= '9');  // strtoll skips spaces, takes '+'
  MINIVLLM_CHECK(starts_well && end != v && *end == '\0' && errno == 0 && n >= lo && n <= hi)
      << name << "=" << v << " must be a whole number from " << lo << " to " << hi;
  return static_cast<int64_t>(n);
}

namespace env_detail {
// The check env_choice and env_word share: `value` is one of `allowed`, else an error naming the
// variable and listing them.
template <typename T, typename Allowed>
void check_one_of(const char* name, const T& value, const Allowed& allowed) {
  std::ostringstream list;
  bool found = false;
  for (const auto& a : allowed) {
    found = found || value == a;
    list << (list.tellp() == 0 ? "" : ", ") << a;
  }
  MINIVLLM_CHECK(found) << name << "=" << value << " must be one of " << list.str();
}
}  // namespace env_detail

// The variable's text; nullopt when it is unset or empty.
inline std::optional<std::string> env_text(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return std::nullopt;
  return std::string(v);
}

// env_int for knobs that take a few values only (a tile of 4, 8 or 16 KB, ...): nullopt when unset
// or empty; otherwise one of `allowed` (ascending), else an error naming the variable and them.
inline std::optional<int64_t> env_choice(const char* name, const std::vector<int64_t>& allowed) {
  const std::optional<int64_t> n = env_int(name, allowed.front(), allowed.back());
  if (n) env_detail::check_one_of(name, *n, allowed);
  return n;
}

// Knobs that name one of a few modes (MINIVLLM_DECODE_WIDE=force, MINIVLLM_PREFILL_KERNEL=mma):
// nullopt when unset or empty; otherwise one of `allowed`, exactly, else an error naming the
// variable and listing them. A mistyped mode must not fall back silently to the default.
inline std::optional<std::string> env_word(const char* name, const std::vector<std::string>& allowed) {
  const std::optional<std::string> w = env_text(name);
  if (w) env_detail::check_one_of(name, *w, allowed);
  return w;
}

}  // namespace minivllm
