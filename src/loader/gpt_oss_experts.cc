#include "loader/gpt_oss_experts.h"

#include <cstring>
#include <optional>
#include <regex>
#include <utility>

#include "common/check.h"
#include "loader/safetensors.h"
#include "loader/tensor_slice.h"

namespace minivllm {
namespace {

class GptOssExpertSource : public WeightSource {
 public:
  GptOssExpertSource(std::unique_ptr<WeightSource> base, const ModelConfig& c)
      : base_(std::move(base)), experts_(c.moe.num_experts), inter_(c.moe.moe_intermediate_size),
        hidden_(c.hidden_size) {}

  bool has(const std::string& name) const override {
    if (const auto p = parse(name)) return base_->has(p->stacked);
    return base_->has(name);
  }
  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const override {
    const auto p = parse(name);
    if (!p) return base_->get_f32(name, expected_shape);
    Tensor t = make(*p);
    MINIVLLM_CHECK(expected_shape.empty() || expected_shape == t.shape())
        << "tensor '" << name << "' (expert " << p->expert << " of '" << p->stacked << "' in " << base_->describe()
        << "): expected shape " << shape_string(expected_shape) << ", got " << t.describe();
    return t;
  }
  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const override {
    const auto p = parse(name);
    if (!p) return base_->get_f32_slice(name, full_shape, dim, start, length);
    const Tensor t = make(*p);
    const SliceGeometry g =
        check_slice("tensor '" + name + "' in " + base_->describe(), t.shape(), full_shape, dim, start, length);
    Tensor out = host_tensor(DType::kF32, g.out_shape);
    const int64_t cols = t.ndim() == 2 ? t.size(1) : 1, rows = t.size(0);
    const float* src = t.ptr<float>();
    float* dst = out.ptr<float>();
    if (dim == 0) {
      std::memcpy(dst, src + start * cols, static_cast<size_t>(length * cols) * sizeof(float));
    } else {
      for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * length, src + r * cols + start, length * sizeof(float));
    }
    return out;
  }
  // A bf16 (or f16) checkpoint's experts stay in its dtype (a backend that keeps it holds half the bytes
  // of f32): the values went through f32 unchanged, so they convert back exactly.
  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const override {
    if (!parse(name)) return base_->get_stored_slice(name, full_shape, dim, start, length);
    const Tensor f32 = get_f32_slice(name, full_shape, dim, start, length);
    const DType dtype = stored_dtype(name);
    if (dtype == DType::kF32) return f32;
    Tensor out = host_tensor(dtype, f32.shape());
    convert_from_f32(f32.ptr<float>(), dtype, out.data(), static_cast<size_t>(f32.numel()));
    return out;
  }
  DType stored_dtype(const std::string& name) const override {
    const auto p = parse(name);
    if (!p) return base_->stored_dtype(name);
    const DType stacked = base_->stored_dtype(p->stacked);
    return stacked == DType::kBF16 || stacked == DType::kF16 ? stacked : DType::kF32;
  }
  // The per-expert names in place of the stacked tensors (and of the file's own views of them).
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const std::string& n : base_->names()) {
      static const std::regex kStacked(R"((.*\.mlp\.experts)\.(gate_up_proj|down_proj)(_bias)?)");
      std::smatch m;
      if (!std::regex_match(n, m, kStacked)) {
        if (!parse(n)) out.push_back(n);
        continue;
      }
      const bool down = m[2] == "down_proj";
      const std::string kind = m[3].matched ? ".bias" : ".weight";
      for (int64_t e = 0; e < experts_; ++e) {
        const std::string prefix = m[1].str() + "." + std::to_string(e) + ".";
        if (down) {
          out.push_back(prefix + "down_proj" + kind);
        } else {
          out.push_back(prefix + "gate_proj" + kind);
          out.push_back(prefix + "up_proj" + kind);
        }
      }
    }
    return out;
  }
  std::string describe() const override { return base_->describe(); }

 private:
  struct Part {
    std::string stacked;  // the checkpoint's tensor
    int64_t expert;
    int part;  // 0 gate, 1 up, 2 down
    bool bias;
  };
  std::optional<Part> parse(const std::string& name) const {
    static const std::regex kExpert(R"((.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.(weight|bias))");
    std::smatch m;
    if (!std::regex_match(name, m, kExpert)) return std::nullopt;
    const int part = m[3] == "gate" ? 0 : m[3] == "up" ? 1 : 2;
    const bool bias = m[4] == "bias";
    std::string stacked = m[1].str() + (part == 2 ? ".down_proj" : ".gate_up_proj") + (bias ? "_bias" : "");
    return Part{std::move(stacked), std::stoll(m[2].str()), part, bias};
  }
  // The expert's [I, H] gate or up, [H, I] down, or their biases, from its slice of the stacked tensor.
  Tensor make(const Part& p) const {
    MINIVLLM_CHECK(p.expert >= 0 && p.expert < experts_)
        << "tensor '" << p.stacked << "' in " << base_->describe() << ": expert " << p.expert << " of " << experts_;
    const int64_t h = hidden_, i = inter_;
    if (p.bias) {
      const std::vector<int64_t> shape = p.part == 2 ? std::vector<int64_t>{experts_, h}
                                                     : std::vector<int64_t>{experts_, 2 * i};
      const Tensor row = base_->get_f32_slice(p.stacked, shape, 0, p.expert, 1);
      const float* s = row.ptr<float>();
      if (p.part == 2) return row.view({h});
      Tensor out = host_tensor(DType::kF32, {i});
      for (int64_t r = 0; r < i; ++r) out.ptr<float>()[r] = s[2 * r + p.part];
      return out;
    }
    if (p.part == 2) {  // [I, H] stored: the [H, I] weight is its transpose
      const Tensor m = base_->get_f32_slice(p.stacked, {experts_, i, h}, 0, p.expert, 1);
      Tensor out = host_tensor(DType::kF32, {h, i});
      for (int64_t r = 0; r < i; ++r) {
        for (int64_t c = 0; c < h; ++c) out.ptr<float>()[c * i + r] = m.ptr<float>()[r * h + c];
      }
      return out;
    }
    const Tensor m = base_->get_f32_slice(p.stacked, {experts_, h, 2 * i}, 0, p.expert, 1);  // [1, H, 2I]
    Tensor out = host_tensor(DType::kF32, {i, h});
    for (int64_t c = 0; c < h; ++c) {
      for (int64_t r = 0; r < i; ++r) out.ptr<float>()[r * h + c] = m.ptr<float>()[c * 2 * i + 2 * r + p.part];
    }
    return out;
  }

  std::unique_ptr<WeightSource> base_;
  int64_t experts_, inter_, hidden_;
};

}  // namespace

std::unique_ptr<WeightSource> serve_gpt_oss_experts(std::unique_ptr<WeightSource> source, const ModelConfig& config) {
  if (config.arch == nullptr || !config.traits().gpt_oss_experts) return source;
  return std::make_unique<GptOssExpertSource>(std::move(source), config);
}

}  // namespace minivllm
