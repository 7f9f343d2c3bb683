#include "loader/gpt_oss_experts.h"

#include <cstring>
#include <optional>
#include <regex>
#include <utility>

#include "common/check.h"
#include "loader/gguf_dequant.h"
#include "loader/safetensors.h"
#include "loader/tensor_slice.h"

namespace minivllm {
namespace {

constexpr int64_t kMxfp4Block = 32;  // elements one E8M0 exponent scales

class GptOssExpertSource : public WeightSource {
 public:
  GptOssExpertSource(std::unique_ptr<WeightSource> base, const ModelConfig& c)
      : base_(std::move(base)), experts_(c.moe.num_experts), inter_(c.moe.moe_intermediate_size),
        hidden_(c.hidden_size) {}

  bool has(const std::string& name) const override {
    if (const auto p = parse(name)) return base_->has(p->stacked) || mxfp4(*p);
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
    const auto p = parse(name);
    if (!p) return base_->get_stored_slice(name, full_shape, dim, start, length);
    if (mxfp4(*p)) {  // the blocks as they are: whole ones a row, so a column slice takes whole blocks
      const Tensor t = make_mxfp4(*p);
      const std::string what = "tensor '" + name + "' in " + base_->describe();
      const SliceGeometry g = check_slice(what, t.shape(), full_shape, dim, start, length);
      MINIVLLM_CHECK(dim == 0 || (start % kMxfp4Block == 0 && length % kMxfp4Block == 0))
          << what << ": slice " << slice_string(dim, start, length) << " cuts its 32-element MXFP4 blocks";
      Tensor out = host_tensor(DType::kMXFP4, g.out_shape);
      copy_slice_chunks(g, DType::kMXFP4, static_cast<const uint8_t*>(t.data()), out.data());
      return out;
    }
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
    if (mxfp4(*p)) return DType::kMXFP4;
    const DType stacked = base_->stored_dtype(p->stacked);
    return stacked == DType::kBF16 || stacked == DType::kF16 ? stacked : DType::kF32;
  }
  // The per-expert names in place of the stacked tensors (and of the file's own views of them).
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const std::string& n : base_->names()) {
      static const std::regex kStacked(R"((.*\.mlp\.experts)\.(gate_up_proj|down_proj)(_bias|_blocks|_scales)?)");
      std::smatch m;
      if (!std::regex_match(n, m, kStacked)) {
        if (!parse(n)) out.push_back(n);
        continue;
      }
      if (m[3] == "_scales") continue;  // an MXFP4 weight is named once, for its blocks
      const bool down = m[2] == "down_proj";
      const std::string kind = m[3] == "_bias" ? ".bias" : ".weight";
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
  // gpt-oss as published (quant_method mxfp4): the weights are *_blocks and *_scales, not the stacked tensor.
  bool mxfp4(const Part& p) const { return !p.bias && !base_->has(p.stacked) && base_->has(p.stacked + "_blocks"); }

  // The expert's weight as ggml's MXFP4 blocks, [rows, cols] as make() gives it in f32. The
  // checkpoint holds P_blocks [E, R, cols / 32, 16] (R: gate_up's 2I rows interleaved, or down's H;
  // two codes a byte, value 2k in byte k's low nibble and 2k + 1 in its high one) and P_scales
  // [E, R, cols / 32] (E8M0 exponents); a ggml block is the exponent, then 16 bytes with value j in
  // byte j's low nibble and j + 16 in its high one. The codes (E2M1, sign in bit 3) and the exponent
  // mean the same in both.
  Tensor make_mxfp4(const Part& p) const {
    check_expert(p);
    const bool down = p.part == 2;
    const int64_t rows = down ? hidden_ : inter_, cols = down ? inter_ : hidden_;
    const int64_t stacked_rows = down ? hidden_ : 2 * inter_, nb = cols / kMxfp4Block;
    const std::string what = "tensor '" + p.stacked + "_blocks' in " + base_->describe();
    MINIVLLM_CHECK(cols % kMxfp4Block == 0) << what << ": " << cols << " columns are not whole 32-element blocks";
    const RawTensor blocks = base_->raw_tensor(p.stacked + "_blocks", "U8");
    const RawTensor scales = base_->raw_tensor(p.stacked + "_scales", "U8");
    MINIVLLM_CHECK(blocks.shape == (std::vector<int64_t>{experts_, stacked_rows, nb, 16}))
        << what << ": expected shape " << shape_string({experts_, stacked_rows, nb, 16}) << ", got "
        << shape_string(blocks.shape);
    MINIVLLM_CHECK(scales.shape == (std::vector<int64_t>{experts_, stacked_rows, nb}))
        << "tensor '" << p.stacked << "_scales' in " << base_->describe() << ": expected shape "
        << shape_string({experts_, stacked_rows, nb}) << ", got " << shape_string(scales.shape);
    Tensor out = host_tensor(DType::kMXFP4, {rows, cols});
    auto* dst = static_cast<uint8_t*>(out.data());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t from = p.expert * stacked_rows + (down ? r : 2 * r + p.part);
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* q = blocks.data + (from * nb + b) * 16;
        uint8_t* block = dst + (r * nb + b) * (1 + 16);
        block[0] = scales.data[from * nb + b];
        const auto code = [q](int v) { return (q[v / 2] >> (4 * (v & 1))) & 0x0F; };
        for (int j = 0; j < 16; ++j) block[1 + j] = static_cast<uint8_t>(code(j) | (code(j + 16) << 4));
      }
    }
    return out;
  }

  void check_expert(const Part& p) const {
    MINIVLLM_CHECK(p.expert >= 0 && p.expert < experts_)
        << "tensor '" << p.stacked << "' in " << base_->describe() << ": expert " << p.expert << " of " << experts_;
  }

  // The expert's [I, H] gate or up, [H, I] down, or their biases, from its slice of the stacked tensor.
  Tensor make(const Part& p) const {
    check_expert(p);
    if (mxfp4(p)) {
      const Tensor q = make_mxfp4(p);
      Tensor out = host_tensor(DType::kF32, q.shape());
      ggml_dequantize(static_cast<uint32_t>(GgmlType::kMXFP4), static_cast<const uint8_t*>(q.data()), out.ptr<float>(),
                      q.numel());
      return out;
    }
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
