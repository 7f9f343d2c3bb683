// The reference sampler: thresholds (top_k, top_p, min_p) on relative probabilities, then inverse
// CDF in increasing id order (sampler.h states the semantics). Probabilities and sums in fp64.
// Relative probabilities q_i = exp((l_i - max l) / T) are used throughout: every threshold and the
// inverse CDF are invariant to the softmax's normaliser, and q_max = 1 exactly.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"
#include "sampling/keep_threshold.h"

namespace minivllm {

namespace {

struct Scratch {
  std::vector<double> q;
  ThresholdScratch threshold;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void check_row_params(int64_t vocab, float temperature, float top_p, float min_p, float uniform) {
  MINIVLLM_CHECK(vocab > 0 && vocab <= std::numeric_limits<int32_t>::max()) << "sampler: bad vocab size " << vocab;
  MINIVLLM_CHECK(std::isfinite(temperature) && temperature >= 0.0f)
      << "sampler: temperature must be finite and >= 0, got " << temperature;
  MINIVLLM_CHECK(top_p > 0.0f && top_p <= 1.0f) << "sampler: top_p must be in (0, 1], got " << top_p;
  MINIVLLM_CHECK(min_p >= 0.0f && min_p <= 1.0f) << "sampler: min_p must be in [0, 1], got " << min_p;
  MINIVLLM_CHECK(uniform >= 0.0f && uniform <= 1.0f) << "sampler: uniform must be in [0, 1), got " << uniform;
}

// What can be wrong with a row of logits; reported after any parallel region (no throwing inside).
struct LogitsScan {
  int64_t argmax = 0;
  int64_t bad_index = -1;  // a NaN or +inf logit, or -1
};

// Two passes, so that the long one vectorises: each chunk's largest logit and whether it holds a bad
// one (no branch per element), then the first index of the largest in the first chunk that has it.
// One loop with two branches an element was a measurable part of a CPU decode step
// (docs/PERFORMANCE.md, stop 99).
LogitsScan scan_logits(const float* logits, int64_t vocab) {
  constexpr int64_t kChunk = 2048;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  LogitsScan scan;
  float best = -kInf;
  int64_t best_chunk = 0;
  for (int64_t c0 = 0; c0 < vocab; c0 += kChunk) {
    const int64_t c1 = std::min(vocab, c0 + kChunk);
    float m = -kInf;
    int bad = 0;
#pragma omp simd reduction(max : m) reduction(| : bad)
    for (int64_t i = c0; i < c1; ++i) {
      const float l = logits[i];
      m = l > m ? l : m;
      bad |= static_cast<int>(l != l) | static_cast<int>(l == kInf);
    }
    if (bad != 0) {
      for (int64_t i = c0;; ++i) {
        if (std::isnan(logits[i]) || logits[i] == kInf) {
          scan.bad_index = i;
          return scan;
        }
      }
    }
    if (m > best) {  // strict: the lowest id wins ties
      best = m;
      best_chunk = c0;
    }
  }
  // Every logit -inf leaves best -inf and chunk 0, whose first element is then the answer, as before.
  for (int64_t i = best_chunk;; ++i) {
    if (logits[i] == best) {
      scan.argmax = i;
      return scan;
    }
  }
}

void relative_probs(const float* logits, int64_t vocab, double max_logit, float temperature, std::vector<double>& q) {
  q.resize(static_cast<size_t>(vocab));
  const double inv_t = 1.0 / static_cast<double>(temperature);
  for (int64_t i = 0; i < vocab; ++i) q[i] = std::exp((static_cast<double>(logits[i]) - max_logit) * inv_t);
}

int64_t inverse_cdf(const std::vector<double>& q, double t, float uniform) {
  double kept_mass = 0.0;
  for (double v : q) kept_mass += v >= t ? v : 0.0;
  const double target = static_cast<double>(uniform) * kept_mass;
  double run = 0.0;
  int64_t last = -1;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] < t) continue;
    run += q[i];
    last = static_cast<int64_t>(i);
    if (run > target) return last;
  }
  return last;  // rounding left none above the target
}

// Never throws (it runs inside parallel regions): a bad logit is returned in scan.bad_index.
LogitsScan sample_row_unchecked(const float* logits, int64_t vocab, float temperature, int top_k, float top_p,
                                float min_p, float uniform, int32_t* out) {
  const LogitsScan scan = scan_logits(logits, vocab);
  if (scan.bad_index >= 0 || temperature == 0.0f) {
    *out = static_cast<int32_t>(scan.argmax);
    return scan;
  }
  Scratch& s = scratch();
  relative_probs(logits, vocab, static_cast<double>(logits[scan.argmax]), temperature, s.q);
  const double t = keep_threshold(s.q, top_k, top_p, min_p, s.threshold);
  *out = static_cast<int32_t>(inverse_cdf(s.q, t, uniform));
  return scan;
}

void check_scan(const LogitsScan& scan, const float* logits, int64_t row) {
  MINIVLLM_CHECK(scan.bad_index < 0) << "sampler: row " << row << " has logit " << logits[scan.bad_index]
                                     << " at token " << scan.bad_index;
  MINIVLLM_CHECK(logits[scan.argmax] > -std::numeric_limits<float>::infinity())
      << "sampler: row " << row << " has every logit -inf";
}

}  // namespace

int32_t sample_row(const float* logits, int64_t vocab, float temperature, int top_k, float top_p, float min_p,
                   float uniform) {
  check_row_params(vocab, temperature, top_p, min_p, uniform);
  int32_t token = 0;
  const LogitsScan scan = sample_row_unchecked(logits, vocab, temperature, top_k, top_p, min_p, uniform, &token);
  check_scan(scan, logits, 0);
  return token;
}

void sample_on_host(const float* logits, int64_t vocab, const SamplingBatch& batch, int32_t* out_tokens) {
  const int n = batch.size();
  MINIVLLM_CHECK(batch.top_k.size() == static_cast<size_t>(n) && batch.top_p.size() == static_cast<size_t>(n) &&
                 batch.min_p.size() == static_cast<size_t>(n) && batch.uniform.size() == static_cast<size_t>(n))
      << "sampler: SamplingBatch fields differ in length (temperature has " << n << ")";
  for (int i = 0; i < n; ++i) {
    check_row_params(vocab, batch.temperature[i], batch.top_p[i], batch.min_p[i], batch.uniform[i]);
  }
  std::vector<LogitsScan> scans(static_cast<size_t>(n));
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int i = 0; i < n; ++i) {
    scans[i] = sample_row_unchecked(logits + static_cast<int64_t>(i) * vocab, vocab, batch.temperature[i],
                                    batch.top_k[i], batch.top_p[i], batch.min_p[i], batch.uniform[i], &out_tokens[i]);
  }
  for (int i = 0; i < n; ++i) check_scan(scans[i], logits + static_cast<int64_t>(i) * vocab, i);
}

std::vector<double> sampling_distribution(const float* logits, int64_t vocab, float temperature, int top_k,
                                          float top_p, float min_p) {
  check_row_params(vocab, temperature, top_p, min_p, 0.0f);
  const LogitsScan scan = scan_logits(logits, vocab);
  check_scan(scan, logits, 0);
  std::vector<double> dist(static_cast<size_t>(vocab), 0.0);
  if (temperature == 0.0f) {
    dist[scan.argmax] = 1.0;
    return dist;
  }
  std::vector<double> q;
  ThresholdScratch threshold_scratch;
  relative_probs(logits, vocab, static_cast<double>(logits[scan.argmax]), temperature, q);
  const double t = keep_threshold(q, top_k, top_p, min_p, threshold_scratch);
  double kept_mass = 0.0;
  for (double v : q) kept_mass += v >= t ? v : 0.0;
  for (int64_t i = 0; i < vocab; ++i) dist[i] = q[i] >= t ? q[i] / kept_mass : 0.0;
  return dist;
}

}  // namespace minivllm
