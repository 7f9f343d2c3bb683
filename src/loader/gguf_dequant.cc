// The block formats and their decoding: common/quant_blocks.h.
#include "loader/gguf_dequant.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/dtype.h"
#include "common/quant_blocks.h"
#include "loader/parallel_convert.h"

namespace minivllm {
namespace {

// The DType holding a supported ggml type unchanged; kU8 for the unsupported ones.
DType dtype_of(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return DType::kF32;
    case GgmlType::kF16: return DType::kF16;
    case GgmlType::kBF16: return DType::kBF16;
    case GgmlType::kQ8_0: return DType::kQ8_0;
    case GgmlType::kQ4_0: return DType::kQ4_0;
    case GgmlType::kQ4_1: return DType::kQ4_1;
    case GgmlType::kQ5_0: return DType::kQ5_0;
    case GgmlType::kQ5_1: return DType::kQ5_1;
    case GgmlType::kIQ4_NL: return DType::kIQ4_NL;
    case GgmlType::kQ2_K: return DType::kQ2_K;
    case GgmlType::kQ3_K: return DType::kQ3_K;
    case GgmlType::kQ4_K: return DType::kQ4_K;
    case GgmlType::kQ5_K: return DType::kQ5_K;
    case GgmlType::kQ6_K: return DType::kQ6_K;
    case GgmlType::kIQ4_XS: return DType::kIQ4_XS;
    case GgmlType::kMXFP4: return DType::kMXFP4;
  }
  return DType::kU8;
}

}  // namespace

const char* ggml_type_name(uint32_t type) {
  static const char* const kNames[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",   "Q4_2(removed)", "Q4_3(removed)", "Q5_0",  "Q5_1",  "Q8_0",
      "Q8_1",    "Q2_K",   "Q3_K",    "Q4_K",   "Q5_K",          "Q6_K",          "Q8_K",  "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS", "IQ1_S",  "IQ4_NL",  "IQ3_S",  "IQ2_S",         "IQ4_XS",        "I8",    "I16",   "I32",
      "I64",     "F64",    "IQ1_M",   "BF16",   "Q4_0_4_4",      "Q4_0_4_8",      "Q4_0_8_8", "TQ1_0", "TQ2_0",
      "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  return type < sizeof(kNames) / sizeof(kNames[0]) ? kNames[type] : "unknown";
}

bool ggml_type_supported(uint32_t type) { return dtype_of(type) != DType::kU8; }

DType ggml_type_dtype(uint32_t type) {
  const DType dtype = dtype_of(type);
  MINIVLLM_CHECK(dtype != DType::kU8) << "ggml type " << ggml_type_name(type) << " (" << type
                                      << ") is not supported; supported: " << kGgmlSupportedTypes;
  return dtype;
}

int64_t ggml_block_size(uint32_t type) { return ggml_type_supported(type) ? dtype_block(dtype_of(type)) : 1; }

size_t ggml_type_nbytes(uint32_t type, int64_t n) {
  MINIVLLM_CHECK_GE(n, 0) << "byte size of a negative element count of type " << ggml_type_name(type);
  const DType dtype = ggml_type_dtype(type);
  const auto units = static_cast<size_t>(n / dtype_block(dtype));
  size_t bytes = 0;
  MINIVLLM_CHECK(!__builtin_mul_overflow(units, dtype_size(dtype), &bytes))
      << "byte size of " << n << " elements of type " << ggml_type_name(type) << " overflows";
  return bytes;
}

void ggml_dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: convert_to_f32_parallel(src, DType::kF32, dst, n); return;
    case GgmlType::kF16: convert_to_f32_parallel(src, DType::kF16, dst, n); return;
    case GgmlType::kBF16: convert_to_f32_parallel(src, DType::kBF16, dst, n); return;
    default: break;
  }
  const DType dtype = ggml_type_dtype(type);
  const int64_t block = dtype_block(dtype);
  const size_t bb = dtype_size(dtype);
  MINIVLLM_CHECK_EQ(n % block, 0) << "element count not a multiple of the block size";
  const int64_t blocks = n / block;
  // Chunks of 8192 elements: 256 legacy blocks or 32 super-blocks.
  const int64_t per_chunk = 8192 / block;
#pragma omp parallel for schedule(static) if (blocks > 4096)
  for (int64_t i = 0; i < blocks; i += per_chunk) {
    dequantize_to_f32(dtype, src + i * bb, dst + i * block, std::min<int64_t>(per_chunk, blocks - i) * block);
  }
}

}  // namespace minivllm
