// The body of POST /v1/embeddings, as OpenAI's: `input` a string, strings, token ids or lists of
// them (at most kMaxPrompts); `encoding_format` float or base64; `dimensions` only as the model's
// own width; `user` accepted and ignored (nothing is monitored here); `request_timeout` left to the
// handler; anything else a 400 naming it. Apart from the handler (embeddings.h), so that the request fuzzer reaches it without
// the HTTP library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace minivllm::server {

struct EmbeddingRequest {
  std::string model;  // "" when the body has none
  std::vector<PromptInput> inputs;
  bool base64 = false;
};

// `hidden_size`: the model's width, the only `dimensions` taken.
EmbeddingRequest parse_embedding_request(const nlohmann::json& body, int64_t hidden_size);

}  // namespace minivllm::server
