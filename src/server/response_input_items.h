// GET /v1/responses/{id}/input_items (OpenAI's "list input items"): the items a stored response was
// asked with, as the Responses API lists them, and one page of them. Pure JSON in and out.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace minivllm::server {

// The input of a (valid) /v1/responses `body` as items: a string is one user message; a message's
// string content becomes one input_text part (output_text for the assistant's); every item that has
// no id gets one, "<prefix>_<suffix>_<index>" (msg, fc, fco, rs by type), `suffix` the response's.
nlohmann::json responses_input_items(const nlohmann::json& body, const std::string& suffix);

// One page of `items` (in input order) as OpenAI's list object {object: list, data, first_id,
// last_id, has_more}. `param(name)` reads the query: limit (1 to 100, default 20), order (desc, the
// default: the last item first; or asc), after / before (an item's id: the page starts after it, or
// ends before it, in that order). Anything else, include among it, is refused with a 400 naming it.
nlohmann::json input_items_page(const nlohmann::json& items,
                                const std::function<std::optional<std::string>(const std::string&)>& param,
                                const std::vector<std::string>& query_names);

}  // namespace minivllm::server
