// Block formats (ggml-common.h), 32 elements a block:
//   Q8_0: f16 d, int8 q[32];             x[i] = q[i] * d
//   Q4_0: f16 d, uint8 qs[16];           x[j] = ((qs[j] & 15) - 8) * d, x[j+16] = ((qs[j] >> 4) - 8) * d
//   Q4_1: f16 d, f16 m, uint8 qs[16];    x[j] = (qs[j] & 15) * d + m,   x[j+16] = (qs[j] >> 4) * d + m
#include "loader/gguf_dequant.h"

#include <cstring>

#include "common/check.h"
#include "common/dtype.h"
#include "loader/parallel_convert.h"

namespace minivllm {
namespace {

constexpr int64_t kBlock = 32;

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

size_t block_bytes(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ8_0: return 2 + 32;
    case GgmlType::kQ4_0: return 2 + 16;
    case GgmlType::kQ4_1: return 2 + 2 + 16;
    default: return 0;
  }
}

void dequant_block(uint32_t type, const uint8_t* b, float* x) {
  const float d = f16_to_f32(load_u16(b));
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ8_0: {
      const auto* q = reinterpret_cast<const int8_t*>(b + 2);
      for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(q[i]) * d;
      return;
    }
    case GgmlType::kQ4_0: {
      const uint8_t* qs = b + 2;
      for (int j = 0; j < 16; ++j) {
        x[j] = static_cast<float>((qs[j] & 15) - 8) * d;
        x[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
      }
      return;
    }
    case GgmlType::kQ4_1: {
      const float m = f16_to_f32(load_u16(b + 2));
      const uint8_t* qs = b + 4;
      for (int j = 0; j < 16; ++j) {
        x[j] = static_cast<float>(qs[j] & 15) * d + m;
        x[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
      }
      return;
    }
    default: return;
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
#pragma omp parallel for schedule(static) if (blocks > 4096)
  for (int64_t i = 0; i < blocks; ++i) dequant_block(type, src + i * bb, dst + i * kBlock);
}

}  // namespace minivllm
