// ggml tensor types: names, sizes, and dequantization to fp32 of the ones minivllm reads
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 in 32-element blocks; Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_XS in 256-element super-blocks), blocks along the fastest dimension.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace minivllm {

enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10, kQ3_K = 11,
  kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ4_NL = 20, kIQ4_XS = 23, kBF16 = 30, kMXFP4 = 39
};
// The supported types, for error messages.
inline constexpr const char* kGgmlSupportedTypes =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, MXFP4";

const char* ggml_type_name(uint32_t type);  // "Q2_K", ... ; "unknown" past the table
bool ggml_type_supported(uint32_t type);
// Bytes of n elements of a supported type; n must be a multiple of the block size (checked by callers).
size_t ggml_type_nbytes(uint32_t type, int64_t n);
int64_t ggml_block_size(uint32_t type);  // 32 or 256 for the quantized types, 1 otherwise
// The DType that stores a supported type unchanged (F32 -> kF32, Q4_1 -> kQ4_1, ...).
DType ggml_type_dtype(uint32_t type);
// Dequantizes n elements (parallel over blocks for large n).
void ggml_dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n);

}  // namespace minivllm
