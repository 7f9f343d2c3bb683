// When a generation request must have ended: the body's "request_timeout" (seconds; an extra
// parameter as vLLM's, which OpenAI's clients send through extra_body), else the server's
// --request-timeout. Read apart from the OpenAI parameters (openai_request.h) because it is the
// server's policy, not a sampling or prompt parameter.
#pragma once

#include <nlohmann/json.hpp>

#include "api/async_engine.h"

namespace minivllm::server {

// `now` plus the request's timeout; AsyncEngine::kNoDeadline when neither the request nor the
// server (default_timeout_s <= 0) sets one. A request_timeout that is not a positive number of
// seconds is a 400 naming it.
AsyncEngine::Clock::time_point request_deadline(const nlohmann::json& body, double default_timeout_s,
                                                AsyncEngine::Clock::time_point now);

}  // namespace minivllm::server
