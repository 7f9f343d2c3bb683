// POST /v1/embeddings, as OpenAI's: `input` a string, strings, token ids or lists of them (at most
// kMaxPrompts). Each input's embedding is its last token's final-normed hidden state (the engine's
// pooling: SamplingParams::pooling), L2-normalised, as vLLM serves decoder embedding models such as
// Qwen3-Embedding. `encoding_format` float or base64 (little-endian f32, as OpenAI's); `dimensions`
// only as the model's own width (no model here has Matryoshka representations); `user` is
// accepted and ignored (nothing is monitored here), `request_timeout` read as the generation
// endpoints read it; anything else is a 400 naming it.
#pragma once

#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "server/openai_request.h"

namespace minivllm::server {

struct EmbeddingRequest {
  std::string model;  // "" when the body has none
  std::vector<PromptInput> inputs;
  bool base64 = false;
};

// `hidden_size`: the model's width, the only `dimensions` taken.
EmbeddingRequest parse_embedding_request(const nlohmann::json& body, int64_t hidden_size);

// One pooling request per input through the AsyncEngine; the whole response written to `res`.
void serve_embeddings(const ServingContext& ctx, const EmbeddingRequest& req, AsyncEngine::Clock::time_point deadline,
                      httplib::Response& res);

// The L2-normalised vector (a zero vector stays zero), and its base64 form (little-endian f32).
std::vector<float> l2_normalised(std::vector<float> v);
std::string base64_f32(const std::vector<float>& v);

}  // namespace minivllm::server
