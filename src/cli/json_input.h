// JSON that comes from the user (stdin, --prompt-ids, --var, workload files), read so that no input
// can crash the program: nesting deeper than kMaxJsonDepth is refused before parsing (a deep value
// would overflow the stack of whatever walks it recursively later: dump(), the chat template), token
// ids must fit an int32 rather than being truncated, and error messages quote at most
// kMaxExcerptChars characters of the input, never a dump of a huge or deep value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error_text.h"

namespace minivllm::cli {

inline constexpr int kMaxJsonDepth = 256;  // as the chat template's limit on variables (template/limits.h)
// The excerpts of error messages (common/error_text.h), under the names the CLI has used.
using minivllm::kMaxExcerptChars;
using minivllm::text_excerpt;

// Parses `text`; throws minivllm::Error "<source> ..." naming the source, what was expected and,
// for a syntax error, where (with a short excerpt), or the depth limit.
nlohmann::ordered_json parse_json_input(std::string_view text, const std::string& source, const std::string& what);

// The byte offset at which `text` opens its (kMaxJsonDepth + 1)-th nested array or object, or
// nullopt when it stays within the limit. Brackets inside strings do not count.
std::optional<size_t> json_too_deep_at(std::string_view text, int max_depth = kMaxJsonDepth);

// Compact JSON of `j`, stopped once it reaches `max_chars` (so a huge or deep value costs nothing).
std::string json_excerpt(const nlohmann::json& j, size_t max_chars = kMaxExcerptChars);
std::string json_excerpt(const nlohmann::ordered_json& j, size_t max_chars = kMaxExcerptChars);

// The token id that `j` holds: an integer in int32 range; nullopt for anything else (a float, a
// string, 4294967297).
std::optional<int32_t> json_token_id(const nlohmann::json& j);
std::optional<int32_t> json_token_id(const nlohmann::ordered_json& j);

// Why `j` is not a token id, for messages: "4294967297 is outside the 32-bit token id range",
// "1.5 is not an integer", "\"x\" is not an integer".
std::string not_a_token_id(const nlohmann::json& j);
std::string not_a_token_id(const nlohmann::ordered_json& j);

}  // namespace minivllm::cli
