// Host-side bulk conversion to fp32, spread over the cores with OpenMP for large tensors
// (an embedding table of 150k x 1024 bf16 values is worth it; a norm weight is not).
#pragma once

#include <cstddef>

#include "common/dtype.h"

namespace minivllm {

void convert_to_f32_parallel(const void* src, DType from, float* dst, size_t n);

}  // namespace minivllm
