#include "common/tensor.h"

#include <cstdlib>
#include <sstream>

#include "common/check.h"

namespace minivllm {

Tensor::Tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, DeviceKind device,
               std::shared_ptr<void> owner)
    : Tensor(data, dtype, std::vector<int64_t>(shape), device, std::move(owner)) {}

Tensor::Tensor(void* data, DType dtype, const std::vector<int64_t>& shape, DeviceKind device,
               std::shared_ptr<void> owner)
    : data_(data), dtype_(dtype), device_(device), owner_(std::move(owner)) {
  MINIVLLM_CHECK(shape.size() >= 1 && shape.size() <= kMaxDims) << "tensor rank " << shape.size();
  ndim_ = static_cast<int>(shape.size());
  (void)checked_numel(shape);  // every later product of the dims (numel, nbytes, views) then fits
  for (int i = 0; i < ndim_; ++i) shape_[i] = shape[i];
}

int64_t Tensor::size(int dim) const {
  if (dim < 0) dim += ndim_;
  MINIVLLM_CHECK(dim >= 0 && dim < ndim_) << "dim " << dim << " of " << describe();
  return shape_[dim];
}

int64_t Tensor::numel() const {
  if (ndim_ == 0) return 0;
  for (int i = 0; i < ndim_; ++i) {
    if (shape_[i] == 0) return 0;  // before any product: the other dims may be huge
  }
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= shape_[i];
  return n;
}

Tensor Tensor::view(std::initializer_list<int64_t> shape) const {
  std::vector<int64_t> s(shape);
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      MINIVLLM_CHECK_EQ(infer, -1) << "two -1 dims in view of " << describe();
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    MINIVLLM_CHECK(known > 0 && numel() % known == 0) << "cannot view " << describe();
    s[infer] = numel() / known;
    known *= s[infer];
  }
  MINIVLLM_CHECK_EQ(known, numel()) << "view of " << describe();
  return Tensor(data_, dtype_, s, device_, owner_);
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  MINIVLLM_CHECK(ndim_ >= 1 && begin >= 0 && begin <= end && end <= shape_[0])
      << "rows [" << begin << ", " << end << ") of " << describe();
  int64_t row = ndim_ == 0 ? 0 : numel() / (shape_[0] == 0 ? 1 : shape_[0]);
  if (shape_[0] == 0) row = 0;
  std::vector<int64_t> s = shape();
  s[0] = end - begin;
  auto* base = static_cast<char*>(data_) + begin * static_cast<int64_t>(dtype_nbytes(dtype_, row));
  return Tensor(base, dtype_, s, device_, owner_);
}

Tensor Tensor::with_scales(std::shared_ptr<const WeightScales> scales) const {
  Tensor t = *this;
  t.scales_ = std::move(scales);
  return t;
}

Tensor Tensor::with_parts(std::shared_ptr<const WeightParts> parts) const {
  Tensor t = *this;
  t.parts_ = std::move(parts);
  return t;
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype_) << "[";
  for (int i = 0; i < ndim_; ++i) os << (i ? ", " : "") << shape_[i];
  os << "]" << (device_ == DeviceKind::kCuda ? "@cuda" : "");
  return os.str();
}

int64_t checked_numel(const std::vector<int64_t>& shape) {
  auto shape_text = [&] {
    std::ostringstream os;
    os << "[";
    for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
    os << "]";
    return os.str();
  };
  bool empty = false;
  for (int64_t d : shape) {
    MINIVLLM_CHECK_GE(d, 0) << "negative dimension in shape " << shape_text();
    empty = empty || d == 0;
  }
  if (empty) return 0;
  int64_t n = 1;
  for (int64_t d : shape) {
    MINIVLLM_CHECK(!__builtin_mul_overflow(n, d, &n)) << "shape " << shape_text() << " has more elements than an int64 counts";
  }
  return n;
}

Tensor host_tensor(DType dtype, const std::vector<int64_t>& shape) {
  const int64_t n = checked_numel(shape);
  size_t bytes = dtype_nbytes(dtype, n);
  std::shared_ptr<void> owner(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64), std::free);
  MINIVLLM_CHECK(owner != nullptr) << "out of host memory for " << bytes << " bytes";
  return Tensor(owner.get(), dtype, shape, DeviceKind::kCpu, owner);
}

}  // namespace minivllm
