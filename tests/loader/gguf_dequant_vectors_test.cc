// The one decoding of every ggml block format minivllm reads (common/quant_blocks.h, through the
// loader's ggml_dequantize) against gguf-py's numpy dequantisation of the same random blocks
// (tests/goldens/gguf-dequant/vectors.json, tools/make_gguf_dequant_vectors.py): an independent
// implementation of each layout, element for element, to a few fp32 roundings (gguf-py groups some
// products differently).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/gguf_dequant.h"

namespace minivllm {
namespace {

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

TEST(GgufDequantVectors, EveryFormatMatchesGgufPy) {
  std::ifstream f(std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/gguf-dequant/vectors.json");
  ASSERT_TRUE(f.good());
  const nlohmann::json doc = nlohmann::json::parse(f);
  int checked = 0;
  for (const auto& t : doc.at("types")) {
    const std::string name = t.at("name");
    SCOPED_TRACE(name);
    const auto type = t.at("type").get<uint32_t>();
    ASSERT_TRUE(ggml_type_supported(type));
    EXPECT_EQ(std::string(ggml_type_name(type)), name);
    const std::vector<uint8_t> bytes = from_hex(t.at("bytes"));
    const auto want = t.at("values").get<std::vector<float>>();
    const auto n = static_cast<int64_t>(want.size());
    ASSERT_EQ(ggml_type_nbytes(type, n), bytes.size());
    std::vector<float> got(want.size());
    ggml_dequantize(type, bytes.data(), got.data(), n);
    const int64_t block = ggml_block_size(type);
    for (int64_t b = 0; b < n / block; ++b) {
      float amax = 0;
      for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::abs(want[b * block + i]));
      for (int64_t i = 0; i < block; ++i) {
        const size_t e = static_cast<size_t>(b * block + i);
        ASSERT_NEAR(got[e], want[e], 1e-6f * amax) << "element " << e;
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 13);
}

}  // namespace
}  // namespace minivllm
