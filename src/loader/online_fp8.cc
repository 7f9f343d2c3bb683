// The quantize-then-dequantize view of a checkpoint's linear weights (see online_fp8.h).
#include "loader/online_fp8.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "common/check.h"
#include "common/config_key.h"
#include "common/fp8.h"
#include "common/fp8_weight.h"
#include "loader/tensor_slice.h"

namespace minivllm {
namespace {

constexpr WeightRole kLinearRoles[] = {WeightRole::kQProj,   WeightRole::kKProj,    WeightRole::kVProj,
                                       WeightRole::kOProj,   WeightRole::kGateProj, WeightRole::kUpProj,
                                       WeightRole::kDownProj};

// Every layer's linear weights, by their Hugging Face names (what the model asks every source for).
std::set<std::string> linear_weights(const ModelConfig& cfg) {
  std::set<std::string> out;
  for (int64_t layer = 0; layer < cfg.num_layers; ++layer) {
    for (WeightRole role : kLinearRoles) {
      std::string name = weight_name(*cfg.arch, WeightFormat::kHuggingFace, role, layer);
      if (!name.empty()) out.insert(std::move(name));
    }
  }
  return out;
}

// quantize_fp8_rows (common/fp8_weight.h) in parallel: an 8B checkpoint has billions of values.
Tensor quantize_rows(const Tensor& x, int64_t col_begin, int64_t col_end) {
  const int64_t rows = x.size(0), out_cols = col_end - col_begin;
  Tensor codes = host_tensor(DType::kF8E4M3, {rows, out_cols});
  Tensor grid = host_tensor(DType::kF32, {rows, 1});
  constexpr int64_t kRowsPerTask = 64;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r += kRowsPerTask) {
    quantize_fp8_row_range(x, r, std::min(rows, r + kRowsPerTask), col_begin, col_end,
                           static_cast<uint8_t*>(codes.data()) + r * out_cols, grid.ptr<float>() + r);
  }
  return make_fp8_weight(codes, grid, 1, out_cols);
}

// Each row of the [rows, cols] fp32 tensor through e4m3 and back, with the row's own scale.
void round_rows_through_e4m3(Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  float* data = t.ptr<float>();
#pragma omp parallel
  {
    std::vector<uint8_t> codes(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      float scale = 0.0f;
      quantize_e4m3_row(data + r * cols, cols, codes.data(), &scale);
      dequantize_e4m3_row(codes.data(), cols, scale, data + r * cols);
    }
  }
}

class OnlineFp8Source : public WeightSource {
 public:
  OnlineFp8Source(const WeightSource& src, std::set<std::string> targets) : src_(src), targets_(std::move(targets)) {}

  bool has(const std::string& name) const override { return src_.has(name); }

  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const override {
    Tensor t = src_.get_f32(name, expected_shape);
    if (is_target(name)) round_2d(name, t);
    return t;
  }

  // A row slice holds whole rows, each with its own scale; a column slice needs each row's amax over
  // all its columns, so the whole tensor is rounded and then cut.
  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const override {
    if (!is_target(name)) return src_.get_f32_slice(name, full_shape, dim, start, length);
    if (dim == 0) {
      Tensor t = src_.get_f32_slice(name, full_shape, dim, start, length);
      round_2d(name, t);
      return t;
    }
    const SliceGeometry g =
        check_slice("tensor '" + name + "' in " + describe(), full_shape, full_shape, dim, start, length);
    const Tensor full = get_f32(name, full_shape);  // rounded
    Tensor out = host_tensor(DType::kF32, g.out_shape);
    for (int64_t o = 0; o < g.outer; ++o) {
      std::memcpy(out.ptr<float>() + o * g.chunk_elems(), full.ptr<float>() + g.chunk_begin(o),
                  static_cast<size_t>(g.chunk_elems()) * sizeof(float));
    }
    return out;
  }

  // A target is stored as kF8E4M3: a backend that keeps FP8 weights gets the codes and per-row
  // scales (get_stored_slice), any other the rounded values (get_f32_slice).
  DType stored_dtype(const std::string& name) const override {
    return is_target(name) ? DType::kF8E4M3 : src_.stored_dtype(name);
  }

  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const override {
    if (!is_target(name)) return src_.get_stored_slice(name, full_shape, dim, start, length);
    MINIVLLM_CHECK(full_shape.size() == 2) << "tensor '" << name << "' in " << describe()
                                           << ": online FP8 quantization takes 2-D linear weights";
    if (dim == 0) return quantize_rows(src_.get_f32_slice(name, full_shape, dim, start, length), 0, full_shape[1]);
    return quantize_rows(src_.get_f32(name, full_shape), start, start + length);  // whole rows, unrounded
  }

  // Dummy weights stay dummy: the loader makes them on the device and quantizes them there
  // (ShardContext::upload_rows, Backend::quantize_weight_fp8), since stored_dtype says kF8E4M3.
  std::optional<HashedUniform> hashed_uniform(const std::string& name) const override {
    return src_.hashed_uniform(name);
  }

  std::vector<std::string> names() const override { return src_.names(); }
  std::string describe() const override { return src_.describe(); }

 private:
  bool is_target(const std::string& name) const { return targets_.count(name) > 0; }

  void round_2d(const std::string& name, Tensor& t) const {
    MINIVLLM_CHECK(t.ndim() == 2) << "tensor '" << name << "' in " << describe()
                                  << ": online FP8 quantization takes 2-D linear weights, got " << t.describe();
    round_rows_through_e4m3(t);
  }

  const WeightSource& src_;
  std::set<std::string> targets_;
};

}  // namespace

void check_online_quantization(const std::string& quantization, const ModelConfig& cfg, const WeightSource& weights) {
  if (quantization == "none") return;
  if (quantization != "fp8") {
    throw ConfigKeyError("config key", std::string(kQuantizationKey), "must be none or fp8, got " + quantization);
  }
  const auto refuse = [](const std::string& checkpoint, const std::string& why) {
    throw ConfigKeyError("config key", std::string(kQuantizationKey),
                         "fp8 cannot be applied to " + checkpoint + ": the checkpoint is already quantized (" + why +
                             ")");
  };
  if (cfg.moe.any()) {  // its experts would stay unquantized: refused rather than half done
    throw ConfigKeyError("config key", std::string(kQuantizationKey),
                         "fp8 is not implemented for the experts of a mixture-of-experts model (" + cfg.source + ")");
  }
  if (cfg.quantization.quantized()) {
    refuse(cfg.source, "quantization_config quant_method \"" + cfg.quantization.method_name + "\"");
  }
  for (const std::string& name : linear_weights(cfg)) {
    if (!weights.has(name)) continue;  // the model's own error names a missing weight
    const DType stored = weights.stored_dtype(name);
    if (dtype_is_quantized(stored) || stored == DType::kF8E4M3) {
      refuse(weights.describe(), "tensor '" + name + "' is " + dtype_name(stored));
    }
  }
}

std::unique_ptr<WeightSource> quantize_weights_online(const std::string& quantization, const ModelConfig& cfg,
                                                      const WeightSource& weights) {
  check_online_quantization(quantization, cfg, weights);
  if (quantization == "none") return nullptr;
  return std::make_unique<OnlineFp8Source>(weights, linear_weights(cfg));
}

}  // namespace minivllm
