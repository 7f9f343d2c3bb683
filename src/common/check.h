// Checks that say what failed: MINIVLLM_CHECK(cond) << "context"; throws minivllm::Error with
// file, line, the failed condition and the streamed message. MINIVLLM_CHECK_EQ & co print both values.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace minivllm {

// The one exception type of the engine. Caught at the boundaries (CLI, server, per request).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
// Collects the message and throws from its destructor (the CHECK macros' statement ends first).
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    stream_ << file << ":" << line << ": check failed: " << cond << ": ";
  }
  [[noreturn]] ~CheckFailure() noexcept(false) { throw Error(stream_.str()); }
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};
}  // namespace detail

// Builds an Error message from streamed parts: throw make_error() << "x";  is not allowed, so use
// MINIVLLM_FAIL() << "message"; which always throws.
}  // namespace minivllm

#define MINIVLLM_CHECK(cond) \
  if (cond) {                \
  } else                     \
    ::minivllm::detail::CheckFailure(__FILE__, __LINE__, #cond)

#define MINIVLLM_FAIL() ::minivllm::detail::CheckFailure(__FILE__, __LINE__, "error")

#define MINIVLLM_CHECK_OP(a, b, op)                                      \
  if ((a)op(b)) {                                                        \
  } else                                                                 \
    ::minivllm::detail::CheckFailure(__FILE__, __LINE__, #a " " #op " " #b) \
        << "(" << (a) << " vs " << (b) << ") "

#define MINIVLLM_CHECK_EQ(a, b) MINIVLLM_CHECK_OP(a, b, ==)
#define MINIVLLM_CHECK_NE(a, b) MINIVLLM_CHECK_OP(a, b, !=)
#define MINIVLLM_CHECK_LT(a, b) MINIVLLM_CHECK_OP(a, b, <)
#define MINIVLLM_CHECK_LE(a, b) MINIVLLM_CHECK_OP(a, b, <=)
#define MINIVLLM_CHECK_GT(a, b) MINIVLLM_CHECK_OP(a, b, >)
#define MINIVLLM_CHECK_GE(a, b) MINIVLLM_CHECK_OP(a, b, >=)
