// Argument checks shared by the CPU ops: every op names the tensor at fault and its shape.
#pragma once

#include <cstdint>

#include "common/check.h"
#include "common/tensor.h"

namespace minivllm::cpu {

inline void check_tensor(const Tensor& t, DType dtype, const char* op, const char* what) {
  MINIVLLM_CHECK(t.defined() && !t.empty()) << op << ": " << what << " is undefined";
  MINIVLLM_CHECK(t.device() == DeviceKind::kCpu) << op << ": " << what << " " << t.describe() << " is not on the host";
  MINIVLLM_CHECK(t.dtype() == dtype) << op << ": " << what << " " << t.describe() << " must be " << dtype_name(dtype);
}

// Rows of a tensor seen as a matrix with `cols` columns (its last dimension).
inline int64_t rows_with_cols(const Tensor& t, int64_t cols, const char* op, const char* what) {
  MINIVLLM_CHECK(t.size(-1) == cols) << op << ": " << what << " " << t.describe() << " must have " << cols
                                     << " columns";
  return cols == 0 ? 0 : t.numel() / cols;
}

}  // namespace minivllm::cpu
