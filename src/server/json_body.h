// The JSON body of a request, parsed so that no body can hurt the server: nesting deeper than
// kMaxBodyDepth is refused while parsing (nothing deep is ever built, so nothing later walks it
// recursively: the chat template, dump()), and every failure is a 400 that says where.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace minivllm::server {

// OpenAI bodies nest a handful of levels (messages -> content parts); chat_template_kwargs may add
// a few. Kept well under the chat template's own limit on variable depth.
inline constexpr int kMaxBodyDepth = 64;

// Throws ApiError 400: "the request body is not valid JSON: ... at byte N", "... nested more than
// 64 levels deep", "the request body must be a JSON object".
nlohmann::json parse_json_body(std::string_view body, int max_depth = kMaxBodyDepth);

}  // namespace minivllm::server
