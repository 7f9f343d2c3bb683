#include "common/quant_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"

namespace minivllm {
namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

void dequant_block(DType type, const uint8_t* b, float* x) {
  const float d = f16_to_f32(load_u16(b));
  switch (type) {
    case DType::kQ8_0: {
      const auto* q = reinterpret_cast<const int8_t*>(b + 2);
      for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(q[i]) * d;
      return;
    }
    case DType::kQ4_0: {
      const uint8_t* qs = b + 2;
      for (int j = 0; j < 16; ++j) {
        x[j] = static_cast<float>((qs[j] & 15) - 8) * d;
        x[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
      }
      return;
    }
    case DType::kQ4_1: {
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

void quant_block(DType type, const float* x, uint8_t* b) {
  float lo = x[0], hi = x[0], amax = 0;
  for (int i = 0; i < 32; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  switch (type) {
    case DType::kQ8_0: {
      const uint16_t dh = f32_to_f16(amax / 127.0f);
      const float d = f16_to_f32(dh), inv = d > 0 ? 1.0f / d : 0.0f;
      store_u16(b, dh);
      for (int i = 0; i < 32; ++i) {
        b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::lround(x[i] * inv), -127L, 127L)));
      }
      return;
    }
    case DType::kQ4_0: {
      const uint16_t dh = f32_to_f16(amax / 7.0f);
      const float d = f16_to_f32(dh), inv = d > 0 ? 1.0f / d : 0.0f;
      store_u16(b, dh);
      for (int j = 0; j < 16; ++j) {
        const long a = std::clamp(std::lround(x[j] * inv) + 8, 0L, 15L);
        const long c = std::clamp(std::lround(x[j + 16] * inv) + 8, 0L, 15L);
        b[2 + j] = static_cast<uint8_t>(a | (c << 4));
      }
      return;
    }
    case DType::kQ4_1: {
      const uint16_t dh = f32_to_f16((hi - lo) / 15.0f), mh = f32_to_f16(lo);
      const float d = f16_to_f32(dh), m = f16_to_f32(mh), inv = d > 0 ? 1.0f / d : 0.0f;
      store_u16(b, dh);
      store_u16(b + 2, mh);
      for (int j = 0; j < 16; ++j) {
        const long a = std::clamp(std::lround((x[j] - m) * inv), 0L, 15L);
        const long c = std::clamp(std::lround((x[j + 16] - m) * inv), 0L, 15L);
        b[4 + j] = static_cast<uint8_t>(a | (c << 4));
      }
      return;
    }
    default: return;
  }
}

}  // namespace

void dequantize_to_f32(DType dtype, const void* src, float* dst, int64_t n) {
  if (!dtype_is_quantized(dtype)) {
    convert_to_f32(src, dtype, dst, static_cast<size_t>(n));
    return;
  }
  const int64_t block = dtype_block(dtype);
  MINIVLLM_CHECK(n % block == 0) << "dequantize " << n << " elements of " << dtype_name(dtype)
                                 << ": not a whole number of " << block << "-element blocks";
  const auto* b = static_cast<const uint8_t*>(src);
  const size_t bb = dtype_size(dtype);
  if (has_block_codes(dtype)) {
    BlockCodes codes;
    for (int64_t i = 0; i < n / block; ++i) {
      decode_block(dtype, b + i * bb, &codes);
      float* x = dst + i * block;
      for (int e = 0; e < codes.n; ++e) x[e] = codes.d[e / codes.sub] * codes.q[e] + codes.c[e / codes.sub];
    }
    return;
  }
  for (int64_t i = 0; i < n / kQuantBlock; ++i) dequant_block(dtype, b + i * bb, dst + i * kQuantBlock);
}

bool widens_to_q8_0(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ5_0 || dtype == DType::kIQ4_NL;
}

void widen_to_q8_0(DType dtype, const void* src, void* dst, int64_t n) {
  MINIVLLM_CHECK(widens_to_q8_0(dtype) && n % kQuantBlock == 0)
      << "widen " << n << " elements of " << dtype_name(dtype) << " to q8_0";
  const auto* b = static_cast<const uint8_t*>(src);
  auto* o = static_cast<uint8_t*>(dst);
  const size_t bb = dtype_size(dtype), ob = dtype_size(DType::kQ8_0);
  for (int64_t i = 0; i < n / kQuantBlock; ++i, b += bb, o += ob) {
    o[0] = b[0];  // every one of these formats opens with its f16 d
    o[1] = b[1];
    auto* q = reinterpret_cast<int8_t*>(o + 2);
    if (dtype == DType::kQ8_0) {
      std::memcpy(q, b + 2, kQuantBlock);
    } else if (dtype == DType::kQ4_0) {
      for (int j = 0; j < 16; ++j) {
        q[j] = static_cast<int8_t>((b[2 + j] & 15) - 8);
        q[j + 16] = static_cast<int8_t>((b[2 + j] >> 4) - 8);
      }
    } else {  // Q5_0, IQ4_NL: d and the integer codes (c is 0)
      BlockCodes codes;
      decode_block(dtype, b, &codes);
      for (int j = 0; j < kQuantBlock; ++j) q[j] = static_cast<int8_t>(codes.q[j]);
    }
  }
}

void quantize_from_f32(DType dtype, const float* src, void* dst, int64_t n) {
  MINIVLLM_CHECK((dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1) && n % kQuantBlock == 0)
      << "quantize " << n << " elements to " << dtype_name(dtype);
  auto* b = static_cast<uint8_t*>(dst);
  const size_t bb = dtype_size(dtype);
  for (int64_t i = 0; i < n / kQuantBlock; ++i) quant_block(dtype, src + i * kQuantBlock, b + i * bb);
}

}  // namespace minivllm
