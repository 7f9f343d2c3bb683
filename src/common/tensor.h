// Tensor: a dense, row-major view of memory on one device, with an optional shared owner.
// Backends allocate tensors; views (reshape, rows) share the owner. No strides: every tensor is
// contiguous, which is all the model needs and keeps every kernel simple.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace minivllm {

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct WeightScales;  // below: an FP8 weight's scale grid
struct WeightParts;   // below: a weight stacked from parts of different block types

class Tensor {
 public:
  static constexpr int kMaxDims = 4;

  Tensor() = default;
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, DeviceKind device = DeviceKind::kCpu,
         std::shared_ptr<void> owner = nullptr);
  Tensor(void* data, DType dtype, const std::vector<int64_t>& shape, DeviceKind device = DeviceKind::kCpu,
         std::shared_ptr<void> owner = nullptr);

  void* data() const { return data_; }
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  DeviceKind device() const { return device_; }
  int ndim() const { return ndim_; }
  int64_t size(int dim) const;  // negative dims count from the end
  std::vector<int64_t> shape() const { return {shape_.begin(), shape_.begin() + ndim_}; }
  int64_t numel() const;
  size_t nbytes() const { return dtype_nbytes(dtype_, numel()); }
  bool defined() const { return ndim_ > 0; }
  bool empty() const { return data_ == nullptr; }

  // Same memory, new shape with the same element count (one dim may be -1).
  Tensor view(std::initializer_list<int64_t> shape) const;
  // Rows [begin, end) along dim 0.
  Tensor rows(int64_t begin, int64_t end) const;
  // "bf16[7, 1024]" for messages.
  std::string describe() const;

  // An FP8 weight (kF8E4M3 [rows, cols]) carries its scale grid: value = code x scale (see
  // WeightScales). Null for every other tensor. Views (view, rows) drop it: a scaled weight is used
  // whole, and a view of its codes alone is only bytes.
  const std::shared_ptr<const WeightScales>& scales() const { return scales_; }
  Tensor with_scales(std::shared_ptr<const WeightScales> scales) const;
  // A weight whose row blocks keep different block types (WeightParts). Null otherwise; views drop it.
  const std::shared_ptr<const WeightParts>& parts() const { return parts_; }
  Tensor with_parts(std::shared_ptr<const WeightParts> parts) const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  DeviceKind device_ = DeviceKind::kCpu;
  int ndim_ = 0;
  std::array<int64_t, kMaxDims> shape_{};
  std::shared_ptr<void> owner_;
  std::shared_ptr<const WeightScales> scales_;
  std::shared_ptr<const WeightParts> parts_;
};

// The scales of an FP8 weight W [rows, cols]: W[r, c] = e4m3(code[r, c]) * grid[r / block_rows,
// c / block_cols], grid f32 [ceil(rows / block_rows), ceil(cols / block_cols)] on the weight's
// device. Qwen's and DeepSeek's checkpoints: 128 x 128 blocks; per-channel scales: block_rows 1 and
// block_cols = cols; a per-tensor scale: one block of the whole weight.
struct WeightScales {
  Tensor grid;
  int64_t block_rows = 1;
  int64_t block_cols = 1;
  // The weight's values in the backend's weight dtype, beside the codes, where a backend keeps them
  // (Backend::decoded_fp8_copy: its GEMMs take no block scales); undefined otherwise.
  Tensor decoded;
};

// W [rows, cols] = [P_0; P_1; ...] by rows, each part a weight of its own block type (llama-quantize's
// Q4_K_M stores a layer's q and k as Q4_K beside a Q6_K v, and the fused qkv weight stacks them).
// The stacked tensor has W's shape and P_0's dtype and data, so that it reads as a block-quantized
// weight; only a backend whose keeps_weight_parts() is true makes one, and its linear reads the parts.
struct WeightParts {
  std::vector<Tensor> parts;
};

// A tensor on the host that owns its memory (for loaders, tests and references).
Tensor host_tensor(DType dtype, const std::vector<int64_t>& shape);

// Elements of a shape: 0 when any dim is 0 (whatever the others, which a file may make huge), else
// their product. Throws, naming the shape, for a negative dim or a product past int64.
int64_t checked_numel(const std::vector<int64_t>& shape);

}  // namespace minivllm
