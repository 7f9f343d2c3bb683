// The dummy WeightSource: the names a model of the config asks for (from its registry row), and
// values hashed from (seed, name, element index), made in parallel.
#include "loader/dummy_weights.h"

#include <cmath>
#include <map>

#include "common/check.h"
#include "common/hashed_uniform.h"
#include "loader/safetensors.h"
#include "loader/tensor_slice.h"

namespace minivllm {
namespace {

uint64_t name_hash(const std::string& name) {  // FNV-1a
  uint64_t h = 0xCBF29CE484222325ull;
  for (const unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

struct TensorSpec {
  std::vector<int64_t> shape;
  float center = 0.0f;  // values uniform in [center - half_width, center + half_width]
  float half_width = 0.0f;
};

class DummyWeightSource : public WeightSource {
 public:
  DummyWeightSource(const ModelConfig& c, uint64_t seed) : seed_(seed), config_source_(c.source) {
    const int64_t h = c.hidden_size, hd = c.head_dim, inter = c.intermediate_size, v = c.vocab_size;
    const int64_t q = c.num_heads * hd, kv = c.num_kv_heads * hd;
    // std s as a uniform's half width: sqrt(3) s.
    auto uniform_std = [](double s) { return static_cast<float>(std::sqrt(3.0) * s); };
    const bool one_plus = c.traits().norm == NormForm::kRmsOnePlusWeight;
    const TensorSpec norm_h{{h}, one_plus ? 0.0f : 1.0f, 0.5f};
    const TensorSpec norm_hd{{hd}, one_plus ? 0.0f : 1.0f, 0.5f};
    auto proj = [&](int64_t out, int64_t in) { return TensorSpec{{out, in}, 0.0f, uniform_std(1.0 / std::sqrt(in))}; };
    auto bias = [&](int64_t n) { return TensorSpec{{n}, 0.0f, uniform_std(0.1)}; };
    auto add = [&](WeightRole role, int64_t layer, const TensorSpec& spec, const char* kind = "weight") {
      specs_[weight_name(*c.arch, WeightFormat::kHuggingFace, role, layer, kind)] = spec;
    };
    using R = WeightRole;
    const TensorSpec lm_head{{v, h}, 0.0f, uniform_std(1.0 / std::sqrt(h))};
    add(R::kEmbedTokens, -1, c.tie_word_embeddings ? lm_head : TensorSpec{{v, h}, 0.0f, uniform_std(1.0)});
    if (!c.tie_word_embeddings) add(R::kLmHead, -1, lm_head);
    add(R::kFinalNorm, -1, norm_h);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      add(R::kAttnInputNorm, l, norm_h);
      add(R::kQProj, l, proj(q, h));
      add(R::kKProj, l, proj(kv, h));
      add(R::kVProj, l, proj(kv, h));
      if (c.attention_bias) {
        add(R::kQProj, l, bias(q), "bias");
        add(R::kKProj, l, bias(kv), "bias");
        add(R::kVProj, l, bias(kv), "bias");
      }
      if (c.qk_norm) {
        add(R::kQNorm, l, norm_hd);
        add(R::kKNorm, l, norm_hd);
      }
      add(R::kOProj, l, proj(h, q));
      add(R::kFfnInputNorm, l, norm_h);
      if (c.traits().post_norms) {
        add(R::kAttnOutputNorm, l, norm_h);
        add(R::kFfnOutputNorm, l, norm_h);
      }
      if (!c.moe.is_sparse_layer(l)) {
        add(R::kGateProj, l, proj(inter, h));
        add(R::kUpProj, l, proj(inter, h));
        add(R::kDownProj, l, proj(h, inter));
        continue;
      }
      // A sparse layer: the router (logits of std ~1, so the routing is neither uniform nor
      // one-hot) and every expert, each a gated MLP of moe_intermediate_size.
      const int64_t e_inter = c.moe.moe_intermediate_size;
      add(R::kMoeRouter, l, proj(c.moe.num_experts, h));
      for (int64_t e = 0; e < c.moe.num_experts; ++e) {
        specs_[expert_weight_name(*c.arch, R::kExpertGateProj, l, e)] = proj(e_inter, h);
        specs_[expert_weight_name(*c.arch, R::kExpertUpProj, l, e)] = proj(e_inter, h);
        specs_[expert_weight_name(*c.arch, R::kExpertDownProj, l, e)] = proj(h, e_inter);
      }
    }
  }

  bool has(const std::string& name) const override { return specs_.count(name) > 0; }

  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const override {
    const TensorSpec& s = spec(name);
    MINIVLLM_CHECK(expected_shape.empty() || expected_shape == s.shape)
        << describe() << ": tensor '" << name << "' has shape " << shape_string(s.shape) << ", expected "
        << shape_string(expected_shape);
    return get_f32_slice(name, s.shape, 0, 0, s.shape[0]);  // the whole tensor: all of dim 0
  }

  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const override {
    const TensorSpec& s = spec(name);
    const SliceGeometry g =
        check_slice("tensor '" + name + "' in " + describe(), s.shape, full_shape, dim, start, length);
    Tensor out = host_tensor(DType::kF32, g.out_shape);
    const HashedUniform h = recipe(name, s);
    convert_slice_chunks(g, out.ptr<float>(), [&](int64_t first, int64_t count, float* dst) {
#pragma omp parallel for schedule(static) if (count >= (1 << 16))
      for (int64_t i = 0; i < count; ++i) dst[i] = hashed_uniform_value(h, static_cast<uint64_t>(first + i));
    });
    return out;
  }

  std::optional<HashedUniform> hashed_uniform(const std::string& name) const override {
    return recipe(name, spec(name));
  }

  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, spec] : specs_) out.push_back(name);
    return out;
  }

  std::string describe() const override {
    return "dummy weights (seed " + std::to_string(seed_) + ") for " + config_source_;
  }

 private:
  HashedUniform recipe(const std::string& name, const TensorSpec& s) const {
    return HashedUniform{mix64(seed_ ^ name_hash(name)), s.center - s.half_width, 2.0f * s.half_width / 16777216.0f};
  }

  const TensorSpec& spec(const std::string& name) const {
    auto it = specs_.find(name);
    MINIVLLM_CHECK(it != specs_.end()) << "tensor '" << name << "' not found in " << describe();
    return it->second;
  }

  uint64_t seed_;
  std::string config_source_;
  std::map<std::string, TensorSpec> specs_;
};

}  // namespace

std::unique_ptr<WeightSource> make_dummy_weight_source(const ModelConfig& config, uint64_t seed) {
  return std::make_unique<DummyWeightSource>(config, seed);
}

}  // namespace minivllm
