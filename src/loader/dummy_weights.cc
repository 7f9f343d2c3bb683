// The dummy WeightSource: the names a model of the config asks for (from its registry row), and
// values hashed from (seed, name, element index), made in parallel.
#include "loader/dummy_weights.h"

#include <cmath>
#include <map>
#include <regex>

#include "common/check.h"
#include "common/fp8.h"
#include "common/hashed_uniform.h"
#include "loader/quantized_weights.h"
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
  // > 0: stored as e4m3 codes of value / fp8_scale (a projection of an FP8 checkpoint's config).
  float fp8_scale = 0.0f;
  bool constant = false;  // every element is `center` (a quantization scale)
};

// The activations' static scale of a dummy checkpoint whose config declares them: inputs of
// magnitude up to 16 keep their precision (RMS-normed inputs with weights near 1 stay below it).
constexpr float kDummyInputAmax = 16.0f;

// Whether `module` ("model.layers.0.mlp.gate") is in the config's list of unquantized modules: an
// exact name, a name's last parts ("lm_head"), or "re:" and a regex over the whole name.
bool ignored(const std::vector<std::string>& ignore, const std::string& module) {
  for (const std::string& e : ignore) {
    if (e.rfind("re:", 0) == 0) {
      if (std::regex_match(module, std::regex(e.substr(3)))) return true;
    } else if (module == e || (module.size() > e.size() && module.ends_with("." + e))) {
      return true;
    }
  }
  return false;
}

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
      const std::string name = weight_name(*c.arch, WeightFormat::kHuggingFace, role, layer, kind);
      specs_[name] = spec;
      const bool linear = role == WeightRole::kQProj || role == WeightRole::kKProj || role == WeightRole::kVProj ||
                          role == WeightRole::kOProj || role == WeightRole::kGateProj ||
                          role == WeightRole::kUpProj || role == WeightRole::kDownProj ||
                          role == WeightRole::kSharedExpertGateProj || role == WeightRole::kSharedExpertUpProj ||
                          role == WeightRole::kSharedExpertDownProj;
      if (linear && std::string(kind) == "weight") linear_.push_back(name);
    };
    using R = WeightRole;
    const TensorSpec lm_head{{v, h}, 0.0f, uniform_std(1.0 / std::sqrt(h))};
    add(R::kEmbedTokens, -1, c.tie_word_embeddings ? lm_head : TensorSpec{{v, h}, 0.0f, uniform_std(1.0)});
    if (!c.tie_word_embeddings) add(R::kLmHead, -1, lm_head);
    add(R::kFinalNorm, -1, norm_h);
    const bool input_norms = c.traits().input_norms, full_qk = c.traits().qk_norm_full_width;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      if (input_norms) add(R::kAttnInputNorm, l, norm_h);
      add(R::kQProj, l, proj(q, h));
      add(R::kKProj, l, proj(kv, h));
      add(R::kVProj, l, proj(kv, h));
      if (c.attention_bias) {
        add(R::kQProj, l, bias(q), "bias");
        add(R::kKProj, l, bias(kv), "bias");
        add(R::kVProj, l, bias(kv), "bias");
      }
      if (c.qk_norm) {
        add(R::kQNorm, l, full_qk ? TensorSpec{{q}, norm_hd.center, norm_hd.half_width} : norm_hd);
        add(R::kKNorm, l, full_qk ? TensorSpec{{kv}, norm_hd.center, norm_hd.half_width} : norm_hd);
      }
      add(R::kOProj, l, proj(h, q));
      if (c.o_proj_bias) add(R::kOProj, l, bias(h), "bias");
      if (c.traits().attention_sinks) add(R::kAttnSinks, l, TensorSpec{{c.num_heads}, 0.0f, 1.0f}, "sinks");
      if (input_norms) add(R::kFfnInputNorm, l, norm_h);
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
      if (c.traits().gpt_oss_experts) add(R::kMoeRouter, l, bias(c.moe.num_experts), "bias");
      if (c.moe.biased_routing) {  // the router's score bias: [E] beside GLM-4.5's router, [1, E] in ERNIE's statics
        const std::vector<int64_t> shape =
            c.moe.sigmoid_scores ? std::vector<int64_t>{c.moe.num_experts} : std::vector<int64_t>{1, c.moe.num_experts};
        add(R::kMoeScoreBias, l, TensorSpec{shape, 0.0f, uniform_std(c.moe.sigmoid_scores ? 0.1 : 0.01)},
            "e_score_correction_bias");
      }
      for (int64_t e = 0; e < c.moe.num_experts; ++e) {
        for (const auto& [role, spec] : {std::pair{R::kExpertGateProj, proj(e_inter, h)},
                                         std::pair{R::kExpertUpProj, proj(e_inter, h)},
                                         std::pair{R::kExpertDownProj, proj(h, e_inter)}}) {
          const std::string name = expert_weight_name(*c.arch, role, l, e);
          specs_[name] = spec;
          linear_.push_back(name);
          if (c.traits().gpt_oss_experts) {  // each expert's biases
            specs_[module_name(*c.arch, WeightFormat::kHuggingFace, role, l, e) + ".bias"] = bias(spec.shape[0]);
          }
        }
      }
      if (const int64_t s_inter = c.moe.shared_expert_intermediate_size; s_inter > 0) {  // Qwen2-MoE, GLM-4.5
        add(R::kSharedExpertGateProj, l, proj(s_inter, h));
        add(R::kSharedExpertUpProj, l, proj(s_inter, h));
        add(R::kSharedExpertDownProj, l, proj(h, s_inter));
        if (!weight_name(*c.arch, WeightFormat::kHuggingFace, R::kSharedExpertGate, l).empty()) {  // Qwen2-MoE's
          add(R::kSharedExpertGate, l, proj(1, h));  // a logit of std ~1: the gate neither shut nor open
        }
      }
    }
    if (c.quantization.quantized()) quantize_linears(c.quantization);
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
    if (s.constant) {
      std::fill(out.ptr<float>(), out.ptr<float>() + out.numel(), s.center);
      return out;
    }
    const HashedUniform h = recipe(name, s);
    convert_slice_chunks(g, out.ptr<float>(), [&](int64_t first, int64_t count, float* dst) {
#pragma omp parallel for schedule(static) if (count >= (1 << 16))
      for (int64_t i = 0; i < count; ++i) {
        const uint64_t index = static_cast<uint64_t>(first + i);
        dst[i] = s.fp8_scale > 0.0f ? e4m3_to_f32(hashed_e4m3_code(h, s.fp8_scale, index)) * s.fp8_scale
                                    : hashed_uniform_value(h, index);
      }
    });
    return out;
  }

  // An FP8 projection is stored as its codes (the quantized-checkpoint wrapper pairs them with the
  // scale tensors); everything else as f32.
  DType stored_dtype(const std::string& name) const override {
    return spec(name).fp8_scale > 0.0f ? DType::kF8E4M3 : DType::kF32;
  }

  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const override {
    const TensorSpec& s = spec(name);
    if (s.fp8_scale <= 0.0f) return get_f32_slice(name, full_shape, dim, start, length);
    const SliceGeometry g =
        check_slice("tensor '" + name + "' in " + describe(), s.shape, full_shape, dim, start, length);
    Tensor out = host_tensor(DType::kF8E4M3, g.out_shape);
    const HashedUniform h = recipe(name, s);
    uint8_t* codes = static_cast<uint8_t*>(out.data());
    const int64_t n = g.chunk_elems();
#pragma omp parallel for collapse(2) schedule(static) if (g.outer * n >= (1 << 16))
    for (int64_t o = 0; o < g.outer; ++o) {
      for (int64_t i = 0; i < n; ++i) {
        codes[o * n + i] = hashed_e4m3_code(h, s.fp8_scale, static_cast<uint64_t>(g.chunk_begin(o) + i));
      }
    }
    return out;
  }

  // Quantized and constant tensors have no recipe of values: a backend reads a quantized one's
  // codes through get_stored_slice, or makes them in place from hashed_fp8.
  std::optional<HashedUniform> hashed_uniform(const std::string& name) const override {
    const TensorSpec& s = spec(name);
    if (s.fp8_scale > 0.0f || s.constant) return std::nullopt;
    return recipe(name, s);
  }

  std::optional<HashedFp8> hashed_fp8(const std::string& name) const override {
    const TensorSpec& s = spec(name);
    if (s.fp8_scale <= 0.0f) return std::nullopt;
    return HashedFp8{recipe(name, s), s.fp8_scale, block_rows_, block_cols_};
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

  // The config declares an FP8 checkpoint (quantization_config): each projection not in its ignore
  // list becomes e4m3 codes with one scale for all its blocks, the largest value's (half_width /
  // 448: no code saturates), and the scale tensors (and static input scales) the format names.
  void quantize_linears(const WeightQuantization& q) {
    block_rows_ = q.block_rows;
    block_cols_ = q.block_cols;
    for (const std::string& name : linear_) {
      const std::string base = name.substr(0, name.size() - std::string("weight").size());
      if (ignored(q.ignore, base.substr(0, base.size() - 1))) continue;
      TensorSpec& s = specs_.at(name);
      s.fp8_scale = s.half_width / kE4M3Max;
      const int64_t rows = s.shape[0], cols = s.shape[1];
      const int64_t br = q.block_rows > 0 ? q.block_rows : rows, bc = q.block_cols > 0 ? q.block_cols : cols;
      specs_[base + q.scale_suffix] =
          TensorSpec{{(rows + br - 1) / br, (cols + bc - 1) / bc}, s.fp8_scale, 0.0f, 0.0f, true};
      if (q.static_input_scale) specs_[base + "input_scale"] = TensorSpec{{1}, kDummyInputAmax / kE4M3Max, 0.0f, 0.0f, true};
    }
  }

  const TensorSpec& spec(const std::string& name) const {
    auto it = specs_.find(name);
    MINIVLLM_CHECK(it != specs_.end()) << "tensor '" << name << "' not found in " << describe();
    return it->second;
  }

  uint64_t seed_;
  std::string config_source_;
  std::map<std::string, TensorSpec> specs_;
  std::vector<std::string> linear_;  // the projections, which an FP8 checkpoint stores as codes
  int64_t block_rows_ = 0, block_cols_ = 0;  // their scale blocks (WeightQuantization's)
};

}  // namespace

std::unique_ptr<WeightSource> make_dummy_weight_source(const ModelConfig& config, uint64_t seed) {
  auto dummy = std::make_unique<DummyWeightSource>(config, seed);
  // An FP8 checkpoint's config: served as its checkpoint would be (codes and scales, dequantized
  // for the backends that compute in other dtypes).
  if (config.quantization.quantized()) return dequantize_weights(std::move(dummy), config.quantization);
  return dummy;
}

}  // namespace minivllm
