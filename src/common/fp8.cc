#include "common/fp8.h"

#include <cmath>
#include <cstring>

namespace minivllm {

float e4m3_to_f32(uint8_t code) {
  const int exp = (code >> 3) & 0xf, mant = code & 7;
  const float sign = (code & 0x80) != 0 ? -1.0f : 1.0f;
  if (exp == 0xf && mant == 7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant * 2^-9
  return sign * std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
}

uint8_t f32_to_e4m3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  if (std::isnan(f)) return sign | 0x7f;
  const float a = std::fabs(f);
  if (a >= kE4M3Max) return sign | 0x7e;  // 448; anything larger would round past it
  // nearbyint rounds half to even in the default rounding mode; the scalings are exact.
  if (a < 0x1p-6f) {  // subnormal range: steps of 2^-9 (a result of 8 is the smallest normal, 0x08)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;                      // a = (2m) * 2^exp, 2m in [1, 2)
  int mant = static_cast<int>(std::nearbyint((2.0f * m - 1.0f) * 8.0f));
  if (mant == 8) {  // rounded up to the next binade
    mant = 0;
    ++exp;
  }
  const int code = ((exp + 7) << 3) | mant;
  return sign | static_cast<uint8_t>(code > 0x7e ? 0x7e : code);
}

void quantize_e4m3_row(const float* x, int64_t n, uint8_t* out, float* scale) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float mul = e4m3_quant_multiplier(amax);
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_e4m3(x[i] * mul);
  *scale = e4m3_row_scale(amax);
}

void dequantize_e4m3_row(const uint8_t* q, int64_t n, float scale, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(q[i]) * scale;
}

float kv_rotation_norm(int64_t n) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(kv_rotation_block(n))));
}

void kv_rotate_row(float* x, int64_t n) {
  const int64_t p = kv_rotation_block(n);
  const float norm = kv_rotation_norm(n);
  for (int64_t base = 0; base < n; base += p) {
    float* r = x + base;
    for (int64_t bit = 1; bit < p; bit <<= 1) {
      for (int64_t i = 0; i < p; ++i) {
        if ((i & bit) != 0) continue;
        const float a = r[i], b = r[i | bit];
        r[i] = a + b;
        r[i | bit] = a - b;
      }
    }
    for (int64_t i = 0; i < p; ++i) r[i] *= norm;
  }
}

}  // namespace minivllm
