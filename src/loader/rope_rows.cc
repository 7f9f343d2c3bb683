#include "loader/rope_rows.h"

#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "common/check.h"
#include "loader/architecture.h"
#include "loader/model_config.h"
#include "loader/tensor_slice.h"

namespace minivllm {

Tensor move_rope_rows(const Tensor& w, int64_t n_head, bool to_interleaved, int64_t rotary) {
  MINIVLLM_CHECK(w.ndim() >= 1) << "rope row permutation of " << w.describe();
  const int64_t rows = w.size(0);
  MINIVLLM_CHECK(n_head > 0 && rows % n_head == 0)
      << "rope row permutation: " << rows << " rows do not split into " << n_head << " heads";
  const int64_t d = rows / n_head, r = rotary > 0 ? rotary : d, half = r / 2;
  MINIVLLM_CHECK(r % 2 == 0 && r <= d) << "rope row permutation: " << r << " rotary rows of heads of " << d
                                       << " (must be even and at most the head's)";
  const int64_t cols = rows == 0 ? 0 : w.numel() / rows;
  Tensor out = host_tensor(w.dtype(), w.shape());
  const size_t row_bytes = dtype_nbytes(w.dtype(), cols);
  const auto* src = static_cast<const uint8_t*>(w.data());
  auto* dst = static_cast<uint8_t*>(out.data());
  std::memcpy(dst, src, row_bytes * static_cast<size_t>(rows));  // the rows past r of each head
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        const int64_t split_row = h * d + i * half + j, pair_row = h * d + 2 * j + i;
        const int64_t from = to_interleaved ? split_row : pair_row, to = to_interleaved ? pair_row : split_row;
        std::memcpy(dst + to * row_bytes, src + from * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

namespace {

class InterleavedRopeSource : public WeightSource {
 public:
  InterleavedRopeSource(std::unique_ptr<WeightSource> base, const ModelConfig& c)
      : base_(std::move(base)), rotary_(c.rope_dim()) {
    // The layers the checkpoint holds (as the GGUF loader's names do, whatever the config says).
    const auto name = [&](WeightRole role, int64_t layer, const char* kind) {
      return weight_name(*c.arch, WeightFormat::kHuggingFace, role, layer, kind);
    };
    for (int64_t layer = 0; base_->has(name(WeightRole::kQProj, layer, "weight")) ||
                            base_->has(name(WeightRole::kKProj, layer, "weight"));
         ++layer) {
      for (const char* kind : {"weight", "bias"}) {
        heads_[name(WeightRole::kQProj, layer, kind)] = c.num_heads;
        heads_[name(WeightRole::kKProj, layer, kind)] = c.num_kv_heads;
      }
    }
  }

  bool has(const std::string& name) const override { return base_->has(name); }
  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const override {
    const Tensor w = base_->get_f32(name, expected_shape);
    auto it = heads_.find(name);
    return it == heads_.end() ? w : move_rope_rows(w, it->second, false, rotary_);
  }
  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const override {
    return slice(name, full_shape, dim, start, length, /*stored=*/false);
  }
  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const override {
    return slice(name, full_shape, dim, start, length, /*stored=*/true);
  }
  DType stored_dtype(const std::string& name) const override { return base_->stored_dtype(name); }
  std::vector<std::string> names() const override { return base_->names(); }
  std::string describe() const override { return base_->describe(); }

 private:
  // A row slice must hold whole heads (the tensor-parallel shards do); a column slice holds every row.
  Tensor slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
               int64_t length, bool stored) const {
    auto it = heads_.find(name);
    // A head's rows, from the tensor's (a bias's too).
    const int64_t head = it == heads_.end() || full_shape.empty() ? 0 : full_shape[0] / it->second;
    MINIVLLM_CHECK(it == heads_.end() || dim != 0 || (head > 0 && start % head == 0 && length % head == 0))
        << "tensor '" << name << "' in " << base_->describe() << ": slice " << slice_string(dim, start, length)
        << ": its rows rotate adjacent pairs within each head, so a row slice must cover whole heads (multiples of "
        << head << ")";
    const Tensor w = stored ? base_->get_stored_slice(name, full_shape, dim, start, length)
                            : base_->get_f32_slice(name, full_shape, dim, start, length);
    if (it == heads_.end()) return w;
    return move_rope_rows(w, dim == 0 ? length / head : it->second, false, rotary_);
  }

  std::unique_ptr<WeightSource> base_;
  int64_t rotary_;  // each head's rows that rotate (0: all of them)
  std::map<std::string, int64_t> heads_;  // q/k weights and biases -> their heads
};

}  // namespace

std::unique_ptr<WeightSource> unpermute_interleaved_rope(std::unique_ptr<WeightSource> source, const ModelConfig& config) {
  return std::make_unique<InterleavedRopeSource>(std::move(source), config);
}

}  // namespace minivllm
