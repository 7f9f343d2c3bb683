// POST /v1/embeddings, as OpenAI's (its body: embedding_request.h). Each input's embedding is its
// last token's final-normed hidden state (the engine's pooling: SamplingParams::pooling),
// L2-normalised, as vLLM serves decoder embedding models such as Qwen3-Embedding; base64 is
// little-endian f32, as OpenAI's. No model here has Matryoshka representations, so `dimensions` is
// only the model's width; `request_timeout` is read as the generation endpoints read it.
#pragma once

#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/embedding_request.h"
#include "server/generation.h"

namespace minivllm::server {

// One pooling request per input through the AsyncEngine; the whole response written to `res`. As a
// whole generation: a shutdown answers 503, and a client that hung up (ClientWatch, looked at past
// kKeepAliveInterval) gets nothing (499) and its requests are aborted.
void serve_embeddings(const ServingContext& ctx, const EmbeddingRequest& req, AsyncEngine::Clock::time_point deadline,
                      ClientWatch& client, httplib::Response& res);

// The L2-normalised vector (a zero vector stays zero), and its base64 form (little-endian f32).
std::vector<float> l2_normalised(std::vector<float> v);
std::string base64_f32(const std::vector<float>& v);

}  // namespace minivllm::server
