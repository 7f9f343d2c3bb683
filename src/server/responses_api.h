// POST /v1/responses, OpenAI's Responses API, served as a chat completion: the request body is
// translated into /v1/chat/completions' (input items and instructions into messages, text.format
// into response_format, the flat function tools into chat's), which the chat path parses, checks and
// runs; its chat.completion is translated back into a response object (the reply, its reasoning and
// its tool calls as output items). Pure JSON in and out, so it is unit-tested and fuzzed alone.
//
// A stream (stream: true) is the chat path's, its events rewritten as it goes (server/responses_stream.h).
// previous_response_id continues a stored response (server/response_store.h: the handler finds its
// conversation, conversation_after makes the next one; store: false keeps a response out); its input
// items are listed by GET /v1/responses/{id}/input_items (server/response_input_items.h).
// An input item_reference names an item of a kept response (its input or its output: the handler resolves
// it through the store with resolve_item_references before the rest runs).
// What the server cannot do is refused with a 400 naming the field: conversations, background
// responses, other tool types than functions, image and file inputs, reasoning
// effort, and fields this file does not know. user, metadata, service_tier, safety_identifier and
// prompt_cache_key change nothing about the tokens and are accepted, as the chat endpoint accepts its
// bookkeeping fields.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace minivllm::server {

// `body` with each input item {"type": "item_reference", "id": ...} replaced by the item `find_item`
// returns for that id (a kept response's input or output item, its id kept). An id that names no kept
// item is a 404, one that is not a string a 400, each naming input[i].id.
nlohmann::json resolve_item_references(
    nlohmann::json body, const std::function<std::optional<nlohmann::json>(const std::string&)>& find_item);

// The /v1/chat/completions body that serves `body`; throws ApiError 400 naming the Responses field.
// `previous`: the conversation of the response that body's previous_response_id names (chat
// messages, after the instructions and before the input).
nlohmann::json responses_to_chat_body(const nlohmann::json& body,
                                      const nlohmann::json& previous = nlohmann::json::array());

// The conversation to store under `response`'s id: `previous`, body's input, then the response's
// output items as they would come back as input (chat's assistant turns; reasoning left out).
nlohmann::json conversation_after(const nlohmann::json& previous, const nlohmann::json& body,
                                  const nlohmann::json& response);

// The body's tools as chat's, in the client's key order (null when none); `body_text` parsed and
// translated by responses_to_chat_body already.
nlohmann::ordered_json responses_tools_in_order(std::string_view body_text);

// The response object for the chat path's `completion` (one choice) of the request `body`.
nlohmann::json chat_completion_to_response(const nlohmann::json& completion, const nlohmann::json& body);

}  // namespace minivllm::server
