// Dummy weights (loader/dummy_weights.h): the names of a config's model, seeded values that do not
// depend on how a tensor is sliced (each tensor-parallel rank makes only its shard), and the scales
// that keep a forward pass finite.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
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

}  // namespace
}  // namespace minivllm
