// Host reference of the penalties and of logprobs (logits_processing.h).
#include "sampling/logits_processing.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace minivllm {

void apply_penalties_row(float* logits, int64_t vocab, const int32_t* counts, float presence, float frequency,
                         float repetition) {
  for (int64_t v = 0; v < vocab; ++v) {
    const int32_t c = counts[v];
    if (c == 0) continue;
    float l = logits[v];
    if (repetition != 1.0f) l = l > 0.0f ? l / repetition : l * repetition;
    const int32_t generated = c / kGeneratedCountStep;
    // One fused multiply-add, so that every backend rounds the same way (bit-identical results).
    if (generated > 0) l -= std::fma(frequency, static_cast<float>(generated), presence);
    logits[v] = l;
  }
}

void apply_bias_row(float* logits, const int32_t* ids, const float* values, int n) {
  for (int i = 0; i < n; ++i) logits[ids[i]] += values[i];
}

void apply_bitmask_row(float* logits, int64_t vocab, const int32_t* words) {
  for (int64_t v = 0; v < vocab; ++v) {
    if (((static_cast<uint32_t>(words[v / 32]) >> (v % 32)) & 1u) == 0) logits[v] = -INFINITY;
  }
}

void logprobs_row(const float* logits, int64_t vocab, int32_t token, int k, float* chosen, int32_t* top_ids,
                  float* top_logprobs) {
  float mx = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, logits[v]);
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v] - mx));
  const float log_z = mx + static_cast<float>(std::log(sum));
  *chosen = logits[token] - log_z;
  if (k <= 0) return;
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v) ids[v] = static_cast<int32_t>(v);
  const int kk = static_cast<int>(std::min<int64_t>(k, vocab));
  std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(), [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int i = 0; i < kk; ++i) {
    top_ids[i] = ids[i];
    top_logprobs[i] = logits[ids[i]] - log_z;
  }
}

}  // namespace minivllm
