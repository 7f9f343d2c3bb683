// Online FP8 quantization (loader/online_fp8.h) on the committed tiny checkpoints: which weights
// it rounds and how, its slices, and its refusal of checkpoints that are already quantized.
#include <gtest/gtest.h>

#include <vector>

#include "common/config_key.h"
#include "common/fp8.h"
#include "common/fp8_weight.h"
#include "loader/model_config.h"
#include "loader/online_fp8.h"
#include "loader/quantized_weights.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using testing::expect_error_naming;

std::string golden(const std::string& name) { return std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/" + name; }

// Each row through common/fp8.h's quantizer and back: what online quantization must serve.
std::vector<float> rounded_rows(const Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  std::vector<uint8_t> codes(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    float scale = 0;
    quantize_e4m3_row(t.ptr<float>() + r * cols, cols, codes.data(), &scale);
    dequantize_e4m3_row(codes.data(), cols, scale, out.data() + r * cols);
  }
  return out;
}

TEST(OnlineFp8, RoundsLinearWeightsPerRowAndNothingElse) {
  const ModelConfig cfg = load_hf_model_config(golden("qwen3-tiny"));
  const auto raw = open_safetensors_dir(golden("qwen3-tiny"));
  EXPECT_EQ(quantize_weights_online("none", cfg, *raw), nullptr);
  const auto q = quantize_weights_online("fp8", cfg, *raw);
  ASSERT_NE(q, nullptr);
  const std::string down = "model.layers.1.mlp.down_proj.weight";  // [64, 128]: split by columns under TP
  const std::vector<int64_t> shape = {64, 128};
  const Tensor full = q->get_f32(down, shape);
  const Tensor stored = raw->get_f32(down, shape);
  const std::vector<float> expected = rounded_rows(stored);
  ASSERT_EQ(full.numel(), static_cast<int64_t>(expected.size()));
  int changed = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(full.ptr<float>()[i], expected[i]) << i;
    changed += full.ptr<float>()[i] != stored.ptr<float>()[i];
  }
  EXPECT_GT(changed, 0) << "bf16 weights passed through unrounded";
  EXPECT_EQ(q->stored_dtype(down), DType::kF8E4M3);
  // A column slice (row-parallel rank 1) is the full rows' rounding, cut: scales over whole rows,
  // as values and as codes with per-row scales.
  const Tensor cols = q->get_f32_slice(down, shape, 1, 64, 64);
  const Tensor codes = q->get_stored_slice(down, shape, 1, 64, 64);
  ASSERT_EQ(codes.dtype(), DType::kF8E4M3);
  const Tensor decoded = dequantize_fp8_weight(codes);
  for (int64_t r = 0; r < 64; ++r) {
    for (int64_t c = 0; c < 64; ++c) {
      ASSERT_EQ(cols.ptr<float>()[r * 64 + c], expected[r * 128 + 64 + c]);
      ASSERT_EQ(decoded.ptr<float>()[r * 64 + c], expected[r * 128 + 64 + c]);
    }
  }
  // A row slice (column-parallel) rounds its own whole rows.
  const std::string qproj = "model.layers.0.self_attn.q_proj.weight";
  const Tensor rows = q->get_f32_slice(qproj, {128, 64}, 0, 64, 64);
  const std::vector<float> qexp = rounded_rows(raw->get_f32(qproj, {128, 64}));
  for (int64_t i = 0; i < 64 * 64; ++i) ASSERT_EQ(rows.ptr<float>()[i], qexp[64 * 64 + i]);
  // Embeddings, norms and the LM head are not quantized: served as stored.
  for (const std::string& name : {std::string("model.embed_tokens.weight"), std::string("lm_head.weight"),
                                  std::string("model.layers.0.input_layernorm.weight")}) {
    EXPECT_EQ(q->stored_dtype(name), raw->stored_dtype(name)) << name;
  }
  const Tensor e = q->get_f32("model.embed_tokens.weight", {512, 64});
  const Tensor er = raw->get_f32("model.embed_tokens.weight", {512, 64});
  for (int64_t i = 0; i < e.numel(); ++i) ASSERT_EQ(e.ptr<float>()[i], er.ptr<float>()[i]);
}

TEST(OnlineFp8, RefusesAnAlreadyQuantizedCheckpointNamingBoth) {
  const std::string dir = golden("qwen3-tiny-fp8-block");
  const ModelConfig cfg = load_hf_model_config(dir);
  const auto w = dequantize_weights(open_safetensors_dir(dir), cfg.quantization);
  try {
    check_online_quantization("fp8", cfg, *w);
    ADD_FAILURE() << "fp8 on an FP8 checkpoint was accepted";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "quantization");
    const std::string msg = e.what();
    for (const std::string& part : {std::string("fp8"), dir + "/config.json", std::string("already quantized"),
                                    std::string("quant_method \"fp8\"")}) {
      EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;
    }
  }
  EXPECT_NO_THROW(check_online_quantization("none", cfg, *w));
}

// A GGUF-like source whose linear weights are ggml blocks: only stored_dtype is asked.
class BlockQuantizedSource : public WeightSource {
 public:
  bool has(const std::string&) const override { return true; }
  Tensor get_f32(const std::string&, const std::vector<int64_t>&) const override { return {}; }
  Tensor get_f32_slice(const std::string&, const std::vector<int64_t>&, int, int64_t, int64_t) const override {
    return {};
  }
  DType stored_dtype(const std::string& name) const override {
    return name.find("_proj") != std::string::npos ? DType::kQ4_1 : DType::kF32;
  }
  std::vector<std::string> names() const override { return {}; }
  std::string describe() const override { return "model.Q4_1.gguf"; }
};

TEST(OnlineFp8, RefusesGgufBlockTypesNamingTheTensor) {
  const ModelConfig cfg = load_hf_model_config(golden("llama3-tiny"));
  const BlockQuantizedSource q4;
  expect_error_naming([&] { check_online_quantization("fp8", cfg, q4); },
                      {"quantization", "model.Q4_1.gguf", "already quantized", "_proj.weight' is q4_1"});
}

TEST(OnlineFp8, UnknownValueNamesTheKey) {
  const ModelConfig cfg = load_hf_model_config(golden("qwen3-tiny"));
  const auto raw = open_safetensors_dir(golden("qwen3-tiny"));
  expect_error_naming([&] { check_online_quantization("int8", cfg, *raw); }, {"quantization", "int8"});
}

}  // namespace
}  // namespace minivllm
