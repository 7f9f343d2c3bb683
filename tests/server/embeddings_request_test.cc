// /v1/embeddings' request parsing and response pieces (src/server/embeddings.h): the input forms,
// encoding_format, dimensions only as the model's width, unknown fields refused by name; the L2
// normalisation and OpenAI's base64 of little-endian f32.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/embeddings.h"

namespace minivllm::server {
namespace {

using nlohmann::json;

std::string param_of(const json& body) {
  try {
    parse_embedding_request(body, 64);
  } catch (const ApiError& e) {
    return e.param();
  }
  return "(accepted)";
}

TEST(EmbeddingRequest, InputsAndOptions) {
  EmbeddingRequest r = parse_embedding_request({{"input", "hello"}, {"model", "m"}}, 64);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_TRUE(r.inputs[0].is_text);
  EXPECT_EQ(r.model, "m");
  EXPECT_FALSE(r.base64);
  r = parse_embedding_request({{"input", {{1, 2, 3}, {4}}}, {"encoding_format", "base64"}, {"dimensions", 64},
                               {"user", "u"}},
                              64);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1].token_ids, std::vector<int32_t>{4});
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(param_of({{"input", "x"}, {"dimensions", 32}}), "dimensions");
  EXPECT_EQ(param_of({{"input", "x"}, {"encoding_format", "int8"}}), "encoding_format");
  EXPECT_EQ(param_of({{"input", ""}}), "input");
  EXPECT_EQ(param_of(json::object()), "input");
  EXPECT_EQ(param_of({{"input", "x"}, {"normalize", false}}), "normalize");
  EXPECT_EQ(param_of({{"input", "x"}, {"request_timeout", 5}}), "(accepted)");
}

TEST(EmbeddingResponse, NormalisedAndBase64) {
  const std::vector<float> v = l2_normalised({3.0f, 4.0f});
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  EXPECT_EQ(l2_normalised({0.0f, 0.0f}), (std::vector<float>{0.0f, 0.0f}));
  // 1.0f is 00 00 80 3F little-endian; 2.0f 00 00 00 40.
  EXPECT_EQ(base64_f32({1.0f}), "AACAPw==");
  EXPECT_EQ(base64_f32({1.0f, 2.0f}), "AACAPwAAAEA=");
  EXPECT_EQ(base64_f32({}), "");
}

}  // namespace
}  // namespace minivllm::server
