// Python `str` semantics over UTF-8 std::string for the chat-template interpreter: code-point
// indexing and slicing, whitespace stripping, split, case helpers, repr and JSON string escaping.
// Templates are written against Python strings, so lengths and slices count code points, not bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minivllm::jinja {

std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
int64_t utf8_length(std::string_view s);

bool py_isspace(char32_t c);

// str.strip / lstrip / rstrip; `chars` absent strips whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep=None, maxsplit=-1) and str.rsplit.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::string py_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
// ASCII case mapping (non-ASCII code points pass through unchanged).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
// Jinja's `title` filter: capitalise after spaces and any of -({[<.
std::string jinja_title(std::string_view s);

// Python repr() of a str: quotes chosen as Python does, control characters escaped.
std::string py_repr_string(std::string_view s);
// json.dumps(s, ensure_ascii=False) of a str, quotes included.
std::string json_quote(std::string_view s);
// repr() of a float: shortest round-trip digits, Python's choice of fixed or exponent form.
std::string py_float_repr(double d);

}  // namespace minivllm::jinja
