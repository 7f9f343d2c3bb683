// Small readers the tool-call syntaxes share: where a JSON object or array written by the model
// ends (it may be followed by more text, or not finished yet), and one call read out of
// {"name": ..., "arguments" | "parameters": {...}}.
#pragma once

#include <cstddef>
#include <optional>
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

// The calls of a JSON array of call objects opening at s[begin] ('['). Not `final`: the elements
// complete so far (nullopt when there are none yet, or one is not a call); `final`: every element,
// and only space after the array, else nullopt.
std::optional<std::vector<ParsedToolCall>> read_call_array(std::string_view s, size_t begin, bool final);

// The offset of the first character of s at or after `from` that is not JSON whitespace.
size_t skip_space(std::string_view s, size_t from = 0);

}  // namespace minivllm::server
