// Small readers the tool-call syntaxes share: where a JSON object or array written by the model
// ends (it may be followed by more text, or not finished yet), and one call read out of
// {"name": ..., "arguments" | "parameters": {...}}.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {

// One past the '}' or ']' that closes the object or array opening at s[begin] (strings and their
// escapes skipped), or npos when it is not closed within s. s[begin] must be '{' or '['.
size_t json_value_end(std::string_view s, size_t begin);

inline constexpr int kMaxJsonDepth = 64;

// The JSON value s when it parses, keeping the model's key order; nested at most kMaxJsonDepth.
std::optional<nlohmann::ordered_json> parse_json_text(std::string_view s);

// A call from {"name": "f", <args_key>: {...}}: the name a non-empty string, the arguments an
// object (or a string holding one, as some models write), absent meaning {}. nullopt otherwise.
std::optional<ParsedToolCall> call_from_json(const nlohmann::ordered_json& j);

// One call from the text of its object: call_from_json's reading, with `arguments` the model's own
// text of its arguments object less the whitespace between tokens (compact_json), so that a stream
// sending that text piece by piece as it is written (ToolCallStream) adds up to it. Arguments
// written as a JSON string holding the object are that object, dumped.
std::optional<ParsedToolCall> call_from_text(std::string_view text);

// What a call object still being written says so far (obj from its '{'), at its top level: its
// name once the string is whole, and where the value of "arguments" / "parameters" opens when it
// is an object (npos until then).
struct CallPrefix {
  std::optional<std::string> name;
  size_t arguments_begin = std::string_view::npos;
  size_t parameters_begin = std::string_view::npos;
};
CallPrefix read_call_prefix(std::string_view obj);

// JSON text (whole or a prefix) without the whitespace between its tokens; strings untouched. The
// compact text of a prefix is a prefix of the whole's.
std::string compact_json(std::string_view s);

// The calls of a JSON array of call objects opening at s[begin] ('['). Not `final`: the elements
// complete so far (nullopt when there are none yet, or one is not a call); `final`: every element,
// and only space after the array, else nullopt.
std::optional<std::vector<ParsedToolCall>> read_call_array(std::string_view s, size_t begin, bool final);

// Where the array opening at s[begin] ('[') has its element `index` (0-based), or npos when the
// array (as far as it goes) does not reach it. Elements before it must be objects or arrays.
size_t json_array_element(std::string_view s, size_t begin, size_t index);

// The calls of the blocks open ... close in `region`, each block's text read by `read` (nullopt:
// not a call), as ToolCallSyntax::parse_calls gives them: not `final`, the closed blocks read so
// far, up to the first that does not read (nullopt when none); `final`, every block (the last may
// be left open when the reply ended), or nullopt when one does not read or there are none.
std::optional<std::vector<ParsedToolCall>> read_tagged_blocks(
    std::string_view region, std::string_view open, std::string_view close, bool final,
    const std::function<std::optional<ParsedToolCall>(std::string_view)>& read);

// Whether s holds `prefix` at offset `at`.
inline bool holds_at(std::string_view s, size_t at, std::string_view prefix) {
  return s.substr(std::min(at, s.size()), prefix.size()) == prefix;
}

// The offset of the first character of s at or after `from` that is not JSON whitespace.
size_t skip_space(std::string_view s, size_t from = 0);

}  // namespace minivllm::server
