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

constexpr int64_t kBlock = 32;

size_t block_bytes(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ8_0: return 2 + 32;
    case GgmlType::kQ4_0: return 2 + 16;
    case GgmlType::kQ4_1: return 2 + 2 + 16;
    default: return 0;
  }
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

bool ggml_type_supported(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: case GgmlType::kF16: case GgmlType::kBF16:
    case GgmlType::kQ8_0: case GgmlType::kQ4_0: case GgmlType::kQ4_1:
      return true;
  }
  return false;
}

DType ggml_type_dtype(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return DType::kF32;
    case GgmlType::kF16: return DType::kF16;
    case GgmlType::kBF16: return DType::kBF16;
    case GgmlType::kQ8_0: return DType::kQ8_0;
    case GgmlType::kQ4_0: return DType::kQ4_0;
    case GgmlType::kQ4_1: return DType::kQ4_1;
  }
  MINIVLLM_FAIL() << "ggml type " << ggml_type_name(type) << " (" << type << ") has no minivllm dtype";
}

int64_t ggml_block_size(uint32_t type) { return block_bytes(type) ? kBlock : 1; }

size_t ggml_type_nbytes(uint32_t type, int64_t n) {
  MINIVLLM_CHECK_GE(n, 0) << "byte size of a negative element count of type " << ggml_type_name(type);
  size_t units = static_cast<size_t>(n), unit_bytes = 0;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: unit_bytes = 4; break;
    case GgmlType::kF16: case GgmlType::kBF16: unit_bytes = 2; break;
    default: units /= kBlock; unit_bytes = block_bytes(type); break;
  }
  size_t bytes = 0;
  MINIVLLM_CHECK(!__builtin_mul_overflow(units, unit_bytes, &bytes))
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
  const size_t bb = block_bytes(type);
  MINIVLLM_CHECK(bb > 0) << "cannot dequantize ggml type " << ggml_type_name(type) << " (" << type << ")";
  MINIVLLM_CHECK_EQ(n % kBlock, 0) << "element count not a multiple of the block size";
  const int64_t blocks = n / kBlock;
  const DType dtype = ggml_type_dtype(type);
#pragma omp parallel for schedule(static) if (blocks > 4096)
  for (int64_t i = 0; i < blocks; i += 256) {
    dequantize_to_f32(dtype, src + i * bb, dst + i * kBlock, std::min<int64_t>(256, blocks - i) * kBlock);
  }
}

}  // namespace minivllm
