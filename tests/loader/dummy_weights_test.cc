// Dummy weights (loader/dummy_weights.h): the names of a config's model, seeded values that do not
// depend on how a tensor is sliced (each tensor-parallel rank makes only its shard), and the scales
// that keep a forward pass finite.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "common/fp8.h"
#include "common/fp8_weight.h"
#include "loader/dummy_weights.h"
#include "loader/model_config.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using testing::expect_error_naming;

const std::string kGoldens = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens";

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.ptr<float>(), t.ptr<float>() + t.numel()); }

TEST(DummyWeights, NamesFollowTheConfig) {
  const ModelConfig qwen3 = load_hf_model_config(kGoldens + "/qwen3-tiny");  // tied, q/k norms
  const auto src = make_dummy_weight_source(qwen3, 0);
  EXPECT_TRUE(src->has("model.layers.1.self_attn.q_norm.weight"));
  EXPECT_FALSE(src->has("lm_head.weight"));  // tied: the embedding serves
  EXPECT_FALSE(src->has("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(src->has("model.layers.2.mlp.up_proj.weight"));  // two layers
  // 2 model-wide (embedding, final norm) + per layer (2 norms, q, k, v, o, q/k norms, gate, up,
  // down) x 2 layers.
  EXPECT_EQ(src->names().size(), 2u + 2u * 11u);
  const ModelConfig mistral = load_hf_model_config(kGoldens + "/mistral-tiny");  // untied
  const auto m = make_dummy_weight_source(mistral, 0);
  EXPECT_TRUE(m->has("lm_head.weight"));
  EXPECT_FALSE(m->has("model.layers.0.self_attn.q_norm.weight"));
  expect_error_naming([&] { m->get_f32("model.layers.0.mlp.up_proj.weight", {1, 2}); },
                      {"up_proj", "dummy weights (seed 0)", "expected [1, 2]"});
  expect_error_naming([&] { m->get_f32("model.layers.9.mlp.up_proj.weight"); }, {"layers.9", "not found"});
}

TEST(DummyWeights, SeededAndIndependentOfTheSlice) {
  const ModelConfig c = load_hf_model_config(kGoldens + "/mistral-tiny");
  const auto a = make_dummy_weight_source(c, 7), b = make_dummy_weight_source(c, 7), other = make_dummy_weight_source(c, 8);
  const std::string name = "model.layers.1.mlp.gate_proj.weight";  // [160, 64]
  const std::vector<int64_t> shape = {c.intermediate_size, c.hidden_size};
  const std::vector<float> whole = values(a->get_f32(name, shape));
  EXPECT_EQ(whole, values(b->get_f32(name, shape)));
  EXPECT_NE(whole, values(other->get_f32(name, shape)));
  EXPECT_NE(whole, values(a->get_f32("model.layers.0.mlp.gate_proj.weight", shape)));  // per tensor
  // Rank 1 of 2: rows [80, 160) and columns [32, 64) are the same values as in the whole tensor.
  const std::vector<float> rows = values(a->get_f32_slice(name, shape, 0, 80, 80));
  const std::vector<float> cols = values(a->get_f32_slice(name, shape, 1, 32, 32));
  for (int64_t r = 0; r < 80; ++r) {
    for (int64_t k = 0; k < 64; ++k) ASSERT_EQ(rows[r * 64 + k], whole[(80 + r) * 64 + k]);
  }
  for (int64_t r = 0; r < 160; ++r) {
    for (int64_t k = 0; k < 32; ++k) ASSERT_EQ(cols[r * 32 + k], whole[r * 64 + 32 + k]);
  }
}

// What a backend makes in place from the recipe (ShardContext's path for dummy weights) is what
// the host path reads, for a row shard, a column shard and a 1-D tensor.
TEST(DummyWeights, MadeInPlaceEqualsReadOnTheHost) {
  const ModelConfig c = load_hf_model_config(kGoldens + "/mistral-tiny");
  const auto src = make_dummy_weight_source(c, 5);
  auto backend = make_cpu_backend(1);
  const std::string name = "model.layers.0.mlp.up_proj.weight";  // [160, 64]
  const std::vector<int64_t> shape = {160, 64};
  ASSERT_TRUE(src->hashed_uniform(name).has_value());
  Tensor rows = backend->empty(DType::kF32, {80, 64}), cols = backend->empty(DType::kF32, {160, 32});
  backend->fill_hashed_uniform(rows, *src->hashed_uniform(name), 80 * 64, 64);  // rows [80, 160)
  backend->fill_hashed_uniform(cols, *src->hashed_uniform(name), 32, 64);       // columns [32, 64)
  EXPECT_EQ(values(rows), values(src->get_f32_slice(name, shape, 0, 80, 80)));
  EXPECT_EQ(values(cols), values(src->get_f32_slice(name, shape, 1, 32, 32)));
  Tensor norm = backend->empty(DType::kF32, {64});
  backend->fill_hashed_uniform(norm, *src->hashed_uniform("model.norm.weight"), 0, 1);
  EXPECT_EQ(values(norm), values(src->get_f32("model.norm.weight")));
}

// A projection is uniform with std 1/sqrt(fan_in), a norm weight in [0.5, 1.5].
TEST(DummyWeights, Scales) {
  const ModelConfig c = load_hf_model_config(kGoldens + "/mistral-tiny");
  const auto src = make_dummy_weight_source(c, 1);
  const std::vector<float> down = values(src->get_f32("model.layers.0.mlp.down_proj.weight"));  // fan_in 160
  double sum = 0, sq = 0;
  for (float v : down) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(down.size()), mean = sum / n, std = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std, 1.0 / std::sqrt(160.0), 0.005);
  for (float v : values(src->get_f32("model.norm.weight"))) {
    EXPECT_GE(v, 0.5f);
    EXPECT_LE(v, 1.5f);
  }
}

// A config that declares an FP8 checkpoint (quantization_config) gets one: each projection stored
// as e4m3 codes with the format's scale tensors (blocks of 32 x 32, per channel with lm_head
// ignored, per tensor with a static input scale), served dequantized like a real checkpoint. The
// values are the unquantized dummy's rounded through e4m3; everything else is unchanged; a
// tensor-parallel slice that cuts a block is refused.
TEST(DummyWeights, Fp8ConfigsGetFp8Weights) {
  for (const char* dir : {"qwen3-tiny-fp8-block", "qwen3-tiny-fp8-channel", "llama3-tiny-fp8-tensor"}) {
    SCOPED_TRACE(dir);
    const ModelConfig c = load_hf_model_config(kGoldens + "/" + dir);
    ASSERT_TRUE(c.quantization.quantized());
    ModelConfig plain = c;
    plain.quantization = WeightQuantization{};
    const auto fp8 = make_dummy_weight_source(c, 3), bf = make_dummy_weight_source(plain, 3);
    EXPECT_EQ(fp8->names(), bf->names());  // the scale tensors are not the model's
    const std::string name = "model.layers.1.mlp.down_proj.weight";
    const std::vector<int64_t> shape = {c.hidden_size, c.intermediate_size};
    EXPECT_EQ(fp8->stored_dtype(name), DType::kF8E4M3);
    EXPECT_FALSE(fp8->hashed_uniform(name).has_value());
    EXPECT_EQ(fp8->stored_dtype("model.embed_tokens.weight"), DType::kF32);
    EXPECT_TRUE(fp8->hashed_uniform("model.embed_tokens.weight").has_value());
    EXPECT_EQ(values(fp8->get_f32("model.norm.weight")), values(bf->get_f32("model.norm.weight")));
    const std::vector<float> q = values(fp8->get_f32(name, shape)), v = values(bf->get_f32(name, shape));
    // The dummy's half width sqrt(3) / sqrt(fan_in) over 448: the largest value is code 448.
    const float scale = static_cast<float>(std::sqrt(3.0) * (1.0 / std::sqrt(c.intermediate_size))) / kE4M3Max;
    int64_t moved = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      // e4m3 keeps 3 mantissa bits: a normal value moves by at most 1/16 of itself, a subnormal
      // (below 2^-6 x scale) by half its step of 2^-9 x scale.
      ASSERT_LE(std::fabs(q[i] - v[i]), std::fabs(v[i]) / 16.0f + scale * 0.002f) << i;
      ASSERT_EQ(q[i], e4m3_to_f32(f32_to_e4m3(q[i] / scale)) * scale) << i;  // on the code grid
      moved += q[i] != v[i];
    }
    EXPECT_GT(moved, static_cast<int64_t>(q.size()) / 2);
    // The stored codes and scales give the same values; a row shard is the whole tensor's rows.
    const Tensor w = fp8->get_stored_slice(name, shape, 0, 0, shape[0]);
    ASSERT_EQ(w.dtype(), DType::kF8E4M3);
    EXPECT_EQ(values(dequantize_fp8_weight(w)), q);
    const std::vector<float> rows = values(fp8->get_f32_slice(name, shape, 0, 32, 32));
    EXPECT_EQ(rows, std::vector<float>(q.begin() + 32 * shape[1], q.begin() + 64 * shape[1]));
  }
  const ModelConfig block = load_hf_model_config(kGoldens + "/qwen3-tiny-fp8-block");
  expect_error_naming(
      [&] {
        make_dummy_weight_source(block, 0)->get_stored_slice("model.layers.0.mlp.down_proj.weight",
                                                             {block.hidden_size, block.intermediate_size}, 0, 16, 16);
      },
      {"down_proj", "cuts its FP8 blocks of 32x32"});
}

}  // namespace
}  // namespace minivllm
