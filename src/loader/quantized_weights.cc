// The dequantizing WeightSource of a quantized checkpoint (see quantized_weights.h).
#include "loader/quantized_weights.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "common/check.h"
#include "common/fp8_weight.h"
#include "loader/safetensors.h"
#include "loader/tensor_slice.h"

namespace minivllm {
namespace {

constexpr std::string_view kWeight = ".weight";

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// "X." + suffix -> "X.weight".
std::string weight_of(const std::string& scale, std::string_view suffix) {
  return scale.substr(0, scale.size() - suffix.size()) + "weight";
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class DequantizingSource : public WeightSource {
 public:
  DequantizingSource(std::unique_ptr<WeightSource> stored, WeightQuantization q)
      : stored_(std::move(stored)), q_(std::move(q)) {
    index_tensors();
  }

  bool has(const std::string& name) const override { return scales_.count(name) == 0 && stored_->has(name); }

  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const override {
    check_not_scale(name);
    if (!is_fp8(name)) return stored_->get_f32(name, expected_shape);
    MINIVLLM_CHECK(expected_shape.size() == 2) << "tensor '" << name << "' in " << describe()
                                               << " is an F8_E4M3 weight: it is read with its [rows, cols] shape";
    return get_f32_slice(name, expected_shape, 0, 0, expected_shape[0]);
  }

  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const override {
    check_not_scale(name);
    if (!is_fp8(name)) return stored_->get_f32_slice(name, full_shape, dim, start, length);
    return dequantize(name, full_shape, dim, start, length);
  }

  // A quantized weight is stored as kF8E4M3: a backend that keeps FP8 weights asks for its codes
  // and scales (get_stored_slice), any other for its values (get_f32_slice).
  DType stored_dtype(const std::string& name) const override {
    check_not_scale(name);
    return is_fp8(name) ? DType::kF8E4M3 : stored_->stored_dtype(name);
  }

  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const override {
    check_not_scale(name);
    if (!is_fp8(name)) return stored_->get_stored_slice(name, full_shape, dim, start, length);
    return codes_and_scales(name, full_shape, dim, start, length);
  }

  // Dummy weights of an FP8 config: its unquantized tensors keep their recipe (made in place on
  // the device); a quantized one is read as codes and scales.
  std::optional<HashedUniform> hashed_uniform(const std::string& name) const override {
    check_not_scale(name);
    return is_fp8(name) ? std::nullopt : stored_->hashed_uniform(name);
  }

  std::optional<HashedFp8> hashed_fp8(const std::string& name) const override {
    check_not_scale(name);
    return is_fp8(name) ? stored_->hashed_fp8(name) : std::nullopt;
  }

  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (std::string& n : stored_->names()) {
      if (scales_.count(n) == 0) out.push_back(std::move(n));
    }
    return out;
  }

  std::string describe() const override { return stored_->describe(); }

 private:
  bool is_fp8(const std::string& name) const { return scale_of_.count(name) > 0; }

  void check_not_scale(const std::string& name) const {
    MINIVLLM_CHECK(scales_.count(name) == 0)
        << "tensor '" << name << "' in " << describe() << " is a quantization scale, not a model weight";
  }

  // Pairs every F8_E4M3 weight with its scale, and every scale with its weight.
  void index_tensors() {
    const std::string suffix = "." + q_.scale_suffix;
    for (const std::string& name : stored_->names()) {
      if (is_quantization_scale(name)) {
        scales_.insert(name);
        continue;
      }
      if (stored_->stored_dtype(name) != DType::kF8E4M3) continue;
      MINIVLLM_CHECK(ends_with(name, kWeight))
          << "tensor '" << name << "' in " << describe() << " is F8_E4M3 but not a module's weight ('X.weight')";
      const std::string base = name.substr(0, name.size() - kWeight.size());
      const std::string scale = base + suffix;
      MINIVLLM_CHECK(stored_->has(scale)) << "F8_E4M3 weight '" << name << "' in " << describe() << " has no scale '"
                                          << scale << "' (quantization_config: " << q_.describe() << ")";
      MINIVLLM_CHECK(!q_.static_input_scale || stored_->has(base + ".input_scale"))
          << "F8_E4M3 weight '" << name << "' in " << describe() << " has no '" << base
          << ".input_scale', which static activations need (quantization_config: " << q_.describe() << ")";
      scale_of_[name] = scale;
    }
    for (const std::string& s : scales_) {
      const std::string own = ends_with(s, ".input_scale") ? std::string(".input_scale") : suffix;
      const bool owned = ends_with(s, own) && is_fp8(weight_of(s, std::string_view(own).substr(1)));
      MINIVLLM_CHECK(owned) << "tensor '" << s << "' in " << describe()
                            << " is a quantization scale of no F8_E4M3 weight (quantization_config: " << q_.describe()
                            << "; the scale of X.weight is X" << suffix << ")";
    }
  }

  // The weight's scales as fp32, checked against the grid of blocks its shape and the config give.
  Tensor read_scales(const std::string& name, const std::vector<int64_t>& shape, int64_t grid_rows,
                     int64_t grid_cols) const {
    const std::string& scale_name = scale_of_.at(name);
    Tensor s = stored_->get_f32(scale_name);
    const bool fits =
        s.numel() == grid_rows * grid_cols && (s.ndim() != 2 || (s.size(0) == grid_rows && s.size(1) == grid_cols));
    MINIVLLM_CHECK(fits) << "scale '" << scale_name << "' in " << describe() << " has shape " << shape_string(s.shape())
                         << " but weight '" << name << "' of shape " << shape_string(shape) << " needs [" << grid_rows
                         << ", " << grid_cols << "] (quantization_config: " << q_.describe() << ")";
    return s;
  }

  // A slice may not cut a block of the dimension it splits (block 0: one scale spans the dimension).
  void check_block_boundaries(const std::string& name, const std::vector<int64_t>& shape, int dim, int64_t start,
                              int64_t length) const {
    const int64_t block = dim == 0 ? q_.block_rows : q_.block_cols;
    if (block <= 1 || dim < 0 || dim > 1 || start < 0 || length < 1) return;  // check_slice reports bad slices
    const int64_t end = start + length, size = shape[static_cast<size_t>(dim)];
    MINIVLLM_CHECK(start % block == 0 && (end % block == 0 || end == size))
        << "tensor '" << name << "' in " << describe() << " of shape " << shape_string(shape) << ": the slice "
        << slice_string(dim, start, length) << " cuts its FP8 blocks of " << q_.block_rows << "x" << q_.block_cols
        << " (" << (dim == 0 ? "rows" : "columns") << " in blocks of " << block
        << "): tensor parallelism must split block-scaled weights on block boundaries, so each rank's share "
           "must be whole blocks (a smaller world_size may be)";
  }

  // The slice's codes with the part of the scale grid its blocks own (the slice starts on a block
  // boundary, or the dimension is one block), as a host FP8 weight (common/fp8_weight.h).
  Tensor codes_and_scales(const std::string& name, const std::vector<int64_t>& shape, int dim, int64_t start,
                          int64_t length) const {
    MINIVLLM_CHECK(shape.size() == 2) << "tensor '" << name << "' in " << describe() << ": an F8_E4M3 weight is 2-D, "
                                      << "asked for shape " << shape_string(shape);
    check_block_boundaries(name, shape, dim, start, length);
    Tensor codes = stored_->get_stored_slice(name, shape, dim, start, length);
    MINIVLLM_CHECK(codes.dtype() == DType::kF8E4M3 && codes.ndim() == 2)
        << "tensor '" << name << "' in " << describe() << ": expected F8_E4M3 codes, got " << codes.describe();
    const int64_t rows = shape[0], cols = shape[1];
    const int64_t block_r = q_.block_rows > 0 ? q_.block_rows : rows;
    const int64_t block_c = q_.block_cols > 0 ? q_.block_cols : cols;
    const int64_t grid_c = ceil_div(cols, block_c);
    const Tensor scales = read_scales(name, shape, ceil_div(rows, block_r), grid_c);
    const int64_t r0 = dim == 0 ? start : 0, c0 = dim == 1 ? start : 0;
    const int64_t g_r0 = r0 / block_r, g_c0 = c0 / block_c;
    const int64_t g_rows = ceil_div(r0 + codes.size(0), block_r) - g_r0;
    const int64_t g_cols = ceil_div(c0 + codes.size(1), block_c) - g_c0;
    Tensor grid = host_tensor(DType::kF32, {g_rows, g_cols});
    for (int64_t i = 0; i < g_rows; ++i) {
      for (int64_t j = 0; j < g_cols; ++j) {
        grid.ptr<float>()[i * g_cols + j] = scales.ptr<float>()[(g_r0 + i) * grid_c + g_c0 + j];
      }
    }
    return make_fp8_weight(codes, grid, block_r, block_c);
  }

  Tensor dequantize(const std::string& name, const std::vector<int64_t>& shape, int dim, int64_t start,
                    int64_t length) const {
    const Tensor w = codes_and_scales(name, shape, dim, start, length);
    const int64_t rows = w.size(0), cols = w.size(1);
    Tensor out = host_tensor(DType::kF32, {rows, cols});
    constexpr int64_t kRowsPerTask = 64;  // a large checkpoint decodes billions of codes: in parallel
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t{1} << 16))
    for (int64_t r = 0; r < rows; r += kRowsPerTask) {
      dequantize_fp8_rows(w, r, std::min(rows, r + kRowsPerTask), out.ptr<float>() + r * cols);
    }
    return out;
  }

  std::unique_ptr<WeightSource> stored_;
  WeightQuantization q_;
  std::map<std::string, std::string> scale_of_;  // F8_E4M3 weight -> its scale tensor
  std::set<std::string> scales_;                 // every scale tensor, hidden from the model
};

}  // namespace

bool is_quantization_scale(const std::string& name) {
  return ends_with(name, ".weight_scale") || ends_with(name, ".weight_scale_inv") || ends_with(name, ".input_scale");
}

std::unique_ptr<WeightSource> dequantize_weights(std::unique_ptr<WeightSource> stored, const WeightQuantization& q) {
  MINIVLLM_CHECK(q.quantized()) << "dequantize_weights: " << stored->describe() << " has no quantization_config";
  return std::make_unique<DequantizingSource>(std::move(stored), q);
}

}  // namespace minivllm
