#include "common/dtype.h"

#include "common/check.h"
#include "common/fp8.h"

namespace minivllm {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kQ8_0: return 2 + 32;
    case DType::kQ4_0: return 2 + 16;
    case DType::kQ4_1: return 2 + 2 + 16;
    case DType::kF8E4M3: return 1;
    case DType::kQ5_0: return 2 + 4 + 16;
    case DType::kQ5_1: return 2 + 2 + 4 + 16;
    case DType::kIQ4_NL: return 2 + 16;
    case DType::kQ2_K: return 16 + 64 + 2 + 2;
    case DType::kQ3_K: return 32 + 64 + 12 + 2;
    case DType::kQ4_K: return 2 + 2 + 12 + 128;
    case DType::kQ5_K: return 2 + 2 + 12 + 32 + 128;
    case DType::kQ6_K: return 128 + 64 + 16 + 2;
    case DType::kIQ4_XS: return 2 + 2 + 4 + 128;
    case DType::kMXFP4: return 1 + 16;
  }
  return 0;
}

int64_t dtype_block(DType t) {
  switch (t) {
    case DType::kQ8_0: case DType::kQ4_0: case DType::kQ4_1:
    case DType::kQ5_0: case DType::kQ5_1: case DType::kIQ4_NL: case DType::kMXFP4:
      return 32;
    case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K:
    case DType::kIQ4_XS:
      return 256;
    default: return 1;
  }
}

size_t dtype_nbytes(DType t, int64_t n) {
  const int64_t block = dtype_block(t);
  MINIVLLM_CHECK(n >= 0 && n % block == 0) << n << " elements of " << dtype_name(t) << ": not a whole number of "
                                           << block << "-element blocks";
  return static_cast<size_t>(n / block) * dtype_size(t);
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ4_1: return "q4_1";
    case DType::kF8E4M3: return "fp8_e4m3";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
    case DType::kIQ4_NL: return "iq4_nl";
    case DType::kQ2_K: return "q2_k";
    case DType::kQ3_K: return "q3_k";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
    case DType::kIQ4_XS: return "iq4_xs";
    case DType::kMXFP4: return "mxfp4";
  }
  return "?";
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mant = bits & 0x7fffff;
  if (((bits >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(half);
}

namespace {
inline uint16_t load_u16(const unsigned char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
}  // namespace

void convert_to_f32(const void* src, DType from, float* dst, size_t n) {
  switch (from) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    // 16-bit loads through memcpy: a file's tensor data need not be 2-byte aligned (a safetensors
    // header of odd length puts it at an odd address), and a misaligned uint16_t read is UB.
    case DType::kBF16: {
      auto* s = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(s + 2 * i));
      return;
    }
    case DType::kF16: {
      auto* s = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(s + 2 * i));
      return;
    }
    case DType::kF8E4M3: {  // the raw values: the cache's scales are applied by its reader
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(s[i]);
      return;
    }
    default:
      MINIVLLM_FAIL() << "cannot convert " << dtype_name(from) << " to f32";
  }
}

void convert_from_f32(const float* src, DType to, void* dst, size_t n) {
  switch (to) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default:
      MINIVLLM_FAIL() << "cannot convert f32 to " << dtype_name(to);
  }
}

}  // namespace minivllm
