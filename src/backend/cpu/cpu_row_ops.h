// Small per-row kernels shared by several CPU ops (norms, rope). Written as plain loops with
// `omp simd` so -O3 -mavx2 -mfma vectorises them.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "common/activation.h"

namespace minivllm::cpu {

// out[i] = act(gate[i]) * up[i] for i in [i0, i1): the gated MLP's activation (act_mul, and the
// fused gate/up projection of cpu_linear.cc, each thread on its own columns).
inline void act_mul_range(const float* gate, const float* up, float* out, int64_t i0, int64_t i1, Activation act) {
  if (act == Activation::kGeluTanh) {  // 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), as PyTorch's "tanh"
    for (int64_t i = i0; i < i1; ++i) {
      const float g = gate[i];
      out[i] = 0.5f * g * (1.0f + std::tanh(0.7978845608028654f * (g + 0.044715f * g * g * g))) * up[i];
    }
  } else if (act == Activation::kSwigluOai) {  // transformers' GptOssExperts._apply_gate
    for (int64_t i = i0; i < i1; ++i) {
      const float g = std::min(gate[i], kSwigluOaiLimit);
      const float u = std::clamp(up[i], -kSwigluOaiLimit, kSwigluOaiLimit);
      out[i] = g / (1.0f + std::exp(-kSwigluOaiAlpha * g)) * (u + 1.0f);
    }
  } else {
    for (int64_t i = i0; i < i1; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  }
}

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

// exp(x) within ~1e-7 relative error for x in [-87, 88]; outside that range the result is
// garbage, so callers clamp first. x = n ln2 + r, exp(r) by the Cephes polynomial, 2^n through
// the exponent bits; written so that a loop of calls vectorises (glibc's expf does not without
// -ffast-math). Must not be compiled with -ffast-math: the rounding trick needs exact addition.
inline float exp_approx_unclamped(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  return y * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

// x[j] = exp(x[j] - shift) for x[j] <= shift + 88 (softmax: shift is the running max).
// Two loops on purpose: GCC does not vectorise the clamp and the exp fused in one.
inline void exp_shifted(float* x, int64_t n, float shift) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] = std::max(x[j] - shift, -87.0f);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] = exp_approx_unclamped(x[j]);
}

}  // namespace minivllm::cpu
