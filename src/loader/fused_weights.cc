#include "loader/fused_weights.h"

#include <cstring>
#include <map>
#include <utility>

#include "common/check.h"
#include "loader/safetensors.h"
#include "loader/tensor_slice.h"

namespace minivllm {
namespace {

// Rows of a role's weight: q nq*hd, k and v nkv*hd, gate and up the MLP's width.
int64_t role_rows(WeightRole role, const ModelConfig& c) {
  switch (role) {
    case WeightRole::kQProj: return c.num_heads * c.head_dim;
    case WeightRole::kKProj:
    case WeightRole::kVProj: return c.num_kv_heads * c.head_dim;
    case WeightRole::kGateProj:
    case WeightRole::kUpProj: return c.intermediate_size;
    default: MINIVLLM_FAIL() << "weight role " << weight_role_name(role) << " cannot be part of a fused tensor";
  }
}

class FusedSplitSource : public WeightSource {
 public:
  FusedSplitSource(std::unique_ptr<WeightSource> base, const ModelConfig& c) : base_(std::move(base)) {
    for (const FusedWeight& f : *c.arch->hf_fused) {
      if (f.module == nullptr) continue;
      for (int64_t layer = 0; layer < c.num_layers; ++layer) {
        std::string fused(f.module);
        fused.replace(fused.find("{L}"), 3, std::to_string(layer));
        fused += ".weight";
        int64_t rows = 0;
        for (int i = 0; i < f.num_parts; ++i) rows += role_rows(f.parts[i], c);
        int64_t offset = 0;
        for (int i = 0; i < f.num_parts; ++i) {
          const int64_t n = role_rows(f.parts[i], c);
          parts_[weight_name(*c.arch, WeightFormat::kHuggingFace, f.parts[i], layer)] = Part{fused, rows, offset, n};
          offset += n;
        }
        fused_.emplace(fused, rows);
      }
    }
  }

  bool has(const std::string& name) const override {
    return parts_.count(name) ? base_->has(parts_.at(name).fused) : !fused_.count(name) && base_->has(name);
  }
  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const override {
    const Part* p = part(name);
    if (!p) return base_->get_f32(name, expected_shape);
    if (expected_shape.empty()) {  // the columns from the fused tensor
      const Tensor all = base_->get_f32(p->fused);
      MINIVLLM_CHECK(all.ndim() == 2 && all.size(0) == p->fused_rows)
          << "tensor '" << p->fused << "' in " << base_->describe() << ": expected " << p->fused_rows
          << " rows, got " << all.describe();
      return base_->get_f32_slice(p->fused, all.shape(), 0, p->offset, p->rows);
    }
    MINIVLLM_CHECK(expected_shape.size() == 2 && expected_shape[0] == p->rows)
        << "tensor '" << name << "' (rows " << p->offset << ".." << p->offset + p->rows << " of '" << p->fused
        << "' in " << base_->describe() << "): expected shape " << shape_string(expected_shape);
    return base_->get_f32_slice(p->fused, {p->fused_rows, expected_shape[1]}, 0, p->offset, p->rows);
  }
  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const override {
    return slice(name, full_shape, dim, start, length, /*stored=*/false);
  }
  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const override {
    return slice(name, full_shape, dim, start, length, /*stored=*/true);
  }
  DType stored_dtype(const std::string& name) const override {
    const Part* p = part(name);
    return base_->stored_dtype(p ? p->fused : name);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const std::string& n : base_->names()) {
      if (!fused_.count(n)) out.push_back(n);
    }
    for (const auto& kv : parts_) {
      if (base_->has(kv.second.fused)) out.push_back(kv.first);
    }
    return out;
  }
  std::string describe() const override { return base_->describe(); }

 private:
  struct Part {
    std::string fused;   // the checkpoint's tensor
    int64_t fused_rows;  // all its rows
    int64_t offset;      // this part's first row
    int64_t rows;
  };
  const Part* part(const std::string& name) const {
    auto it = parts_.find(name);
    return it == parts_.end() ? nullptr : &it->second;
  }
  // A row slice is a row range of the fused tensor; a column slice reads the part's rows of those
  // columns (a copy of the rows, then the columns).
  Tensor slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
               int64_t length, bool stored) const {
    const Part* p = part(name);
    auto read = [&](const std::string& n, const std::vector<int64_t>& shape, int d, int64_t s, int64_t len) {
      return stored ? base_->get_stored_slice(n, shape, d, s, len) : base_->get_f32_slice(n, shape, d, s, len);
    };
    if (!p) return read(name, full_shape, dim, start, length);
    MINIVLLM_CHECK(full_shape.size() == 2 && full_shape[0] == p->rows && dim >= 0 && dim < 2 && start >= 0 &&
                   length >= 0 && start + length <= full_shape[dim])
        << "tensor '" << name << "' (rows " << p->offset << ".." << p->offset + p->rows << " of '" << p->fused
        << "' in " << base_->describe() << "): bad slice " << slice_string(dim, start, length) << " of shape "
        << shape_string(full_shape);
    const std::vector<int64_t> fused_shape{p->fused_rows, full_shape[1]};
    if (dim == 0) return read(p->fused, fused_shape, 0, p->offset + start, length);
    const Tensor rows = read(p->fused, fused_shape, 0, p->offset, p->rows);
    Tensor out = host_tensor(rows.dtype(), {p->rows, length});
    const size_t row_bytes = dtype_nbytes(rows.dtype(), full_shape[1]);
    const size_t skip = dtype_nbytes(rows.dtype(), start), take = dtype_nbytes(rows.dtype(), length);
    for (int64_t r = 0; r < p->rows; ++r) {
      std::memcpy(static_cast<uint8_t*>(out.data()) + r * take,
                  static_cast<const uint8_t*>(rows.data()) + r * row_bytes + skip, take);
    }
    return out;
  }

  std::unique_ptr<WeightSource> base_;
  std::map<std::string, Part> parts_;     // a role's name -> where it lies
  std::map<std::string, int64_t> fused_;  // the fused tensors, by name, and their rows
};

}  // namespace

std::unique_ptr<WeightSource> split_fused_weights(std::unique_ptr<WeightSource> source, const ModelConfig& config) {
  if (config.arch == nullptr || config.arch->hf_fused == nullptr) return source;
  return std::make_unique<FusedSplitSource>(std::move(source), config);
}

}  // namespace minivllm
