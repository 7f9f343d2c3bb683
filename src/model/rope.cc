#include "model/rope.h"

#include <cmath>
#include <numbers>

#include "common/check.h"

namespace minivllm {

std::vector<double> rope_inv_freq(const ModelConfig& cfg) {
  const int64_t half = cfg.head_dim / 2;
  std::vector<double> inv(half);
  for (int64_t i = 0; i < half; ++i) {
    inv[i] = 1.0 / std::pow(cfg.rope_theta, static_cast<double>(2 * i) / static_cast<double>(cfg.head_dim));
  }
  const RopeScaling& s = cfg.rope_scaling;
  if (s.type.empty() || s.type == "default") return inv;
  MINIVLLM_CHECK(s.type == "llama3") << "unsupported rope_scaling type '" << s.type << "'";
  // Llama 3: long wavelengths are slowed by `factor`, short ones kept, the band between blended
  // (transformers' _compute_llama3_parameters).
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f = f / s.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv;
}

Tensor rope_cos_sin_table(const ModelConfig& cfg, int64_t max_positions) {
  const std::vector<double> inv = rope_inv_freq(cfg);
  const int64_t d = cfg.head_dim, half = d / 2;
  Tensor t = host_tensor(DType::kF32, {max_positions, d});
  float* p = t.ptr<float>();
  for (int64_t pos = 0; pos < max_positions; ++pos) {
    for (int64_t i = 0; i < half; ++i) {
      // torch computes the angle in fp32: pos * inv_freq with inv_freq already rounded to fp32.
      const float angle = static_cast<float>(pos) * static_cast<float>(inv[i]);
      p[pos * d + i] = std::cos(angle);
      p[pos * d + half + i] = std::sin(angle);
    }
  }
  return t;
}

}  // namespace minivllm
