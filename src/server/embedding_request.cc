#include "server/embedding_request.h"

#include "server/api_error.h"

namespace minivllm::server {

using nlohmann::json;

EmbeddingRequest parse_embedding_request(const json& body, int64_t hidden_size) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& [name, value] : body.items()) {
    if (value.is_null() || name == "input" || name == "model" || name == "encoding_format" || name == "dimensions" ||
        name == "user" || name == "request_timeout") {
      continue;
    }
    throw bad_param(name, "unknown parameter of /v1/embeddings (refused rather than ignored)");
  }
  EmbeddingRequest r;
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) throw bad_param("model", "must be a string");
    r.model = body["model"].get<std::string>();
  }
  r.inputs = read_prompts(body, "input");
  if (body.contains("encoding_format") && !body["encoding_format"].is_null()) {
    const json& f = body["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64")) throw bad_param("encoding_format", "must be float or base64");
    r.base64 = f == "base64";
  }
  if (body.contains("dimensions") && !body["dimensions"].is_null()) {
    const json& d = body["dimensions"];
    if (!d.is_number_integer() || d.get<int64_t>() != hidden_size) {
      throw bad_param("dimensions", "this model's embeddings have " + std::to_string(hidden_size) +
                                        " dimensions and no shorter (Matryoshka) form; omit dimensions or give " +
                                        std::to_string(hidden_size));
    }
  }
  return r;
}

}  // namespace minivllm::server
