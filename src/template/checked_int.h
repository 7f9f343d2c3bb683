// Python integer arithmetic on int64: where Python would grow a big int these throw TypeError
// ("integer overflow in ..."), and floor division / modulo round toward negative infinity.
#pragma once

#include <cstdint>
#include <string>

#include "template/value.h"

namespace minivllm::jinja {

[[noreturn]] inline void integer_overflow(const char* op) {
  throw TypeError(std::string("integer overflow in ") + op + " (integers are 64-bit here)");
}

inline int64_t checked_add(int64_t a, int64_t b, const char* op = "+") {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) integer_overflow(op);
  return r;
}

inline int64_t checked_sub(int64_t a, int64_t b, const char* op = "-") {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) integer_overflow(op);
  return r;
}

inline int64_t checked_mul(int64_t a, int64_t b, const char* op = "*") {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) integer_overflow(op);
  return r;
}

inline int64_t checked_neg(int64_t a, const char* op = "unary -") { return checked_sub(0, a, op); }

// base ** exp for exp >= 0, by squaring (at most 63 squarings whatever exp is).
inline int64_t checked_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = checked_mul(result, base, "**");
    exp >>= 1;
    if (exp > 0) base = checked_mul(base, base, "**");
  }
  return result;
}

// Python's x // y and x % y (y != 0): the quotient is floored, the remainder has y's sign.
inline int64_t floor_div(int64_t x, int64_t y) {
  if (y == -1) return checked_neg(x, "//");  // INT64_MIN // -1 overflows (and traps in hardware)
  int64_t q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}

inline int64_t floor_mod(int64_t x, int64_t y) {
  if (y == -1) return 0;  // INT64_MIN % -1 traps in hardware
  int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

// int(d) for a finite double; throws when it does not fit.
inline int64_t checked_float_to_int(double d, const char* op) {
  // +-2^63 are exact doubles; every double in [-2^63, 2^63) truncates into range (NaN fails too).
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) integer_overflow(op);
  return static_cast<int64_t>(d);
}

}  // namespace minivllm::jinja
