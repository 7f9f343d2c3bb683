#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/check.h"

namespace minivllm {

bool rope_uses_long_factors(const RopeScaling& s, int64_t max_model_length) {
  return s.type == "longrope" && max_model_length > s.original_max_position_embeddings;
}

std::vector<double> rope_inv_freq(const ModelConfig& cfg, int64_t max_model_length) {
  // Exponents over the rotary dims, not head_dim: transformers' dim = head_dim * partial_rotary_factor.
  const int64_t dim = cfg.rope_dim(), half = dim / 2;
  std::vector<double> inv(half);
  for (int64_t i = 0; i < half; ++i) {
    inv[i] = 1.0 / std::pow(cfg.rope_theta, static_cast<double>(2 * i) / static_cast<double>(dim));
  }
  const RopeScaling& s = cfg.rope_scaling;
  if (s.type.empty() || s.type == "default") return inv;
  if (s.type == "freq_factors") {  // llama.cpp's rope_freqs: theta_i / factor_i
    MINIVLLM_CHECK_EQ(static_cast<int64_t>(s.freq_factors.size()), half) << "rope_freqs for " << dim << " rotary dims";
    for (int64_t i = 0; i < half; ++i) inv[i] /= s.freq_factors[i];
    return inv;
  }
  if (s.type == "longrope") {  // each frequency divided by its factor (transformers' ext_factors)
    const std::vector<double>& f = rope_uses_long_factors(s, max_model_length) ? s.long_factor : s.short_factor;
    MINIVLLM_CHECK_EQ(static_cast<int64_t>(f.size()), half) << "longrope factors for " << dim << " rotary dims";
    for (int64_t i = 0; i < half; ++i) inv[i] /= f[i];
    return inv;
  }
  if (s.type == "linear") {
    for (double& f : inv) f /= s.factor;
    return inv;
  }
  if (s.type == "yarn") {
    // The dims whose frequency turns `rotations` times over the pretrained context (transformers'
    // find_correction_dim): below the fast one the frequency is kept (extrapolated), past the slow
    // one divided by factor (interpolated), linear in between.
    const double base = cfg.rope_theta, orig = static_cast<double>(s.original_max_position_embeddings);
    const auto dim_of = [&](double rotations) {
      return static_cast<double>(dim) * std::log(orig / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
    };
    double low = dim_of(s.beta_fast), high = dim_of(s.beta_slow);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;  // as transformers: no division by zero
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double kept = 1.0 - ramp;  // the share of the original frequency
      inv[i] = inv[i] / s.factor * (1.0 - kept) + inv[i] * kept;
    }
    return inv;
  }
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
  const std::vector<double> inv = rope_inv_freq(cfg, max_positions);
  const int64_t d = cfg.rope_dim(), half = d / 2;
  // transformers multiplies the fp32 cos and sin by the attention factor (1 but for longrope and yarn).
  const std::string& type = cfg.rope_scaling.type;
  const float scale =
      type == "longrope" || type == "yarn" ? static_cast<float>(cfg.rope_scaling.attention_factor) : 1.0f;
  Tensor t = host_tensor(DType::kF32, {max_positions, d});
  float* p = t.ptr<float>();
  for (int64_t pos = 0; pos < max_positions; ++pos) {
    for (int64_t i = 0; i < half; ++i) {
      // torch computes the angle in fp32: pos * inv_freq with inv_freq already rounded to fp32.
      const float angle = static_cast<float>(pos) * static_cast<float>(inv[i]);
      p[pos * d + i] = std::cos(angle) * scale;
      p[pos * d + half + i] = std::sin(angle) * scale;
    }
  }
  return t;
}

}  // namespace minivllm
