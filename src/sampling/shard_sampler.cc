#include "sampling/shard_sampler.h"

#include <cmath>
#include <limits>

namespace minivllm {

ShardStats shard_stats_row(const float* logits, int64_t n, int64_t vocab_start, float temperature) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  ShardStats s{-kInf, static_cast<float>(vocab_start), 0.0f, 0.0f};
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    const float l = logits[i];
    if (std::isnan(l) || l == kInf) {
      if (s.bad == 0.0f) s.bad = static_cast<float>(i + 1);
      continue;
    }
    if (l > s.max_logit) {  // strict: the lowest id wins ties
      s.max_logit = l;
      best = i;
    }
  }
  if (best >= 0) s.argmax = static_cast<float>(vocab_start + best);
  if (temperature > 0.0f && s.max_logit > -kInf) {
    const double inv_t = 1.0 / static_cast<double>(temperature), m = s.max_logit;
    double mass = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float l = logits[i];
      if (l > -kInf && l < kInf) mass += std::exp((static_cast<double>(l) - m) * inv_t);
    }
    s.mass = static_cast<float>(mass);
  }
  return s;
}

ShardChoice shard_choose(const ShardStats* stats, int world, float temperature, float uniform) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  int top = 0;
  for (int r = 1; r < world; ++r) {
    if (stats[r].max_logit > stats[top].max_logit) top = r;  // strict: lower ranks hold lower ids
  }
  if (temperature == 0.0f || !(stats[top].max_logit > -kInf)) return {top, 0.0};
  const double inv_t = 1.0 / static_cast<double>(temperature), big_m = stats[top].max_logit;
  auto scale = [&](int r) { return std::exp((static_cast<double>(stats[r].max_logit) - big_m) * inv_t); };
  double total = 0.0;
  for (int r = 0; r < world; ++r) {
    if (stats[r].mass > 0.0f) total += stats[r].mass * scale(r);
  }
  const double target = static_cast<double>(uniform) * total;
  double run = 0.0;
  int last = top;
  for (int r = 0; r < world; ++r) {
    if (!(stats[r].mass > 0.0f)) continue;
    const double w = stats[r].mass * scale(r);
    if (run + w > target) return {r, (target - run) / scale(r)};
    run += w;
    last = r;
  }
  return {last, std::numeric_limits<double>::infinity()};  // rounding: the last id with weight
}

int32_t shard_pick_row(const float* logits, int64_t n, int64_t vocab_start, const ShardStats& own, float temperature,
                       double target) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (temperature == 0.0f || !(own.max_logit > -kInf)) return static_cast<int32_t>(own.argmax);
  const double inv_t = 1.0 / static_cast<double>(temperature), m = own.max_logit;
  double run = 0.0;
  int64_t last = -1;
  for (int64_t i = 0; i < n; ++i) {
    const float l = logits[i];
    if (!(l > -kInf && l < kInf)) continue;
    run += std::exp((static_cast<double>(l) - m) * inv_t);
    last = i;
    if (run > target) break;
  }
  return static_cast<int32_t>(vocab_start + (last < 0 ? 0 : last));
}

}  // namespace minivllm
