// Small per-row kernels shared by several CPU ops (norms, rope). Written as plain loops with
// `omp simd` so -O3 -mavx2 -mfma vectorises them.
#pragma once

#include <cmath>
#include <cstdint>

namespace minivllm::cpu {

// out = (x * rsqrt(mean(x^2) + eps)) * w; out may alias x.
inline void rms_norm_row(const float* x, const float* w, float eps, int64_t n, float* out) {
  float sum_sq = 0.0f;
#pragma omp simd reduction(+ : sum_sq)
  for (int64_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * inv) * w[i];
}

// GPT-NeoX half-split rotary embedding of one head in place: x1 = x[i], x2 = x[i + d/2].
inline void rope_row(float* x, const float* cos, const float* sin, int64_t half) {
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = x[i];
    const float x2 = x[i + half];
    x[i] = x1 * cos[i] - x2 * sin[i];
    x[i + half] = x2 * cos[i] + x1 * sin[i];
  }
}

}  // namespace minivllm::cpu
