// ggml tensor types: names, sizes, and dequantization to fp32 of the ones minivllm reads
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1). Blocks are 32 elements along the fastest dimension.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace minivllm {

enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kBF16 = 30 };

const char* ggml_type_name(uint32_t type);  // "Q2_K", ... ; "unknown" past the table
bool ggml_type_supported(uint32_t type);
// Bytes of n elements of a supported type; n must be a multiple of the block size (checked by callers).
size_t ggml_type_nbytes(uint32_t type, int64_t n);
int64_t ggml_block_size(uint32_t type);
// The DType that stores a supported type unchanged (F32 -> kF32, Q4_1 -> kQ4_1, ...).
DType ggml_type_dtype(uint32_t type);  // 32 for the quantized types, 1 otherwise
// Dequantizes n elements (parallel over blocks for large n).
void ggml_dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n);

}  // namespace minivllm
