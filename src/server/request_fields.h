// Which top-level fields an OpenAI request body may carry, so that none is silently dropped: every
// field is read (honoured), accepted and ignored (a short list of bookkeeping fields common
// clients always send), or refused with a 400 naming it: a field the server cannot honour, with
// why, and an unknown one (OpenAI's own API answers an unknown parameter with a 400 too).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace minivllm::server {

enum class Endpoint { kCompletions, kChat, kTokenize, kDetokenize };  // the last two: vLLM's, no sampling keys

// Throws ApiError 400 naming the first field of `body` that is neither read by this endpoint's
// parser nor on the ignored list. A null value counts as absent (clients send null for "not set").
void check_request_fields(const nlohmann::json& body, Endpoint endpoint);

// One of the OpenAI bookkeeping fields accepted and ignored (user, metadata, store, service_tier):
// none changes the tokens generated.
bool is_ignored_bookkeeping_field(std::string_view name);

}  // namespace minivllm::server
