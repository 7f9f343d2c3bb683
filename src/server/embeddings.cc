#include "server/embeddings.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "server/api_error.h"
#include "server/openai_response.h"

namespace minivllm::server {

using nlohmann::json;

std::vector<float> l2_normalised(std::vector<float> v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  if (sum == 0) return v;
  const double inv = 1.0 / std::sqrt(sum);
  for (float& x : v) x = static_cast<float>(x * inv);
  return v;
}

std::string base64_f32(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());  // little-endian hosts only (x86-64, aarch64)
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t b0 = static_cast<uint8_t>(bytes[i]);
    const uint32_t b1 = i + 1 < bytes.size() ? static_cast<uint8_t>(bytes[i + 1]) : 0;
    const uint32_t b2 = i + 2 < bytes.size() ? static_cast<uint8_t>(bytes[i + 2]) : 0;
    const uint32_t n = (b0 << 16) | (b1 << 8) | b2;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

void serve_embeddings(const ServingContext& ctx, const EmbeddingRequest& req, AsyncEngine::Clock::time_point deadline,
                      ClientWatch& client, httplib::Response& res) {
  if (!req.model.empty() && req.model != ctx.model_name) {
    throw ApiError(404, "The model `" + req.model + "` does not exist; this server serves `" + ctx.model_name + "`",
                   "model");
  }
  // Tokenize and check every input before submitting any, so a bad one costs the others nothing.
  std::vector<std::vector<int32_t>> ids;
  for (const PromptInput& p : req.inputs) ids.push_back(prompt_input_ids(ctx, p, "input"));
  const SamplingParams params = SamplingParams::embedding_request();
  int64_t prompt_tokens = 0;
  for (const std::vector<int32_t>& p : ids) prompt_tokens += static_cast<int64_t>(p.size());
  // Every input between the same two steps, so they are pooled together (all or none).
  std::vector<std::unique_ptr<RequestHandle>> handles;
  try {
    handles = ctx.engine.submit_tokens_batch(std::move(ids), std::vector<SamplingParams>(req.inputs.size(), params),
                                             deadline);
  } catch (const QueueFullError& e) {
    throw ApiError(503, public_message(e)).with_retry_after(kRetryAfterS);
  } catch (const std::exception& e) {
    if (ctx.stopping.load()) throw ApiError(503, "the server is shutting down");
    throw ApiError(400, public_message(e), "input");
  }
  // Each input's output as it ends. Returning early drops the handles, which aborts what is left.
  std::vector<std::optional<RequestOutput>> outputs(handles.size());
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < handles.size(); ++i) {
    while (!outputs[i]) {
      if (ctx.stopping.load()) throw ApiError(503, "the server is shutting down");
      if (std::chrono::steady_clock::now() - start >= kKeepAliveInterval && client.gone()) {
        res.status = 499;  // nginx's "client closed request": nobody reads it
        return;
      }
      for (StreamEvent& e : handles[i]->next(kPollInterval)) {
        if (e.final) outputs[i] = std::move(*e.final);
      }
    }
  }
  json data = json::array();
  for (size_t i = 0; i < handles.size(); ++i) {
    const RequestOutput& o = *outputs[i];
    if (o.finish_reason == "error") throw ApiError(500, "embedding failed: " + o.error);
    if (o.embedding.empty()) throw ApiError(500, "embedding failed: the request ended (" + o.finish_reason + ") unpooled");
    const std::vector<float> e = l2_normalised(o.embedding);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", req.base64 ? json(base64_f32(e)) : json(e)}});
  }
  json body = {{"object", "list"},
               {"data", std::move(data)},
               {"model", ctx.model_name},
               {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  res.status = 200;
  res.set_content(dump_body(body), "application/json");
}

}  // namespace minivllm::server
