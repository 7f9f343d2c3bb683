// The reference sampler against an independent reading of sampler.h's semantics (long double,
// full sorts): exact distributions, inverse CDF on uniform grids, seeded empirical frequencies.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "common/check.h"
#include "engine/sequence.h"

namespace minivllm {
namespace {

struct Params {
  float temperature = 1.0f;
  int top_k = -1;
  float top_p = 1.0f;
  float min_p = 0.0f;
};

// sampler.h read literally: thresholds on p = softmax(logits / T), then normalise the kept mass.
std::vector<double> reference_distribution(const std::vector<float>& logits, const Params& s) {
  const size_t v = logits.size();
  std::vector<double> out(v, 0.0);
  if (s.temperature == 0.0f) {
    out[std::max_element(logits.begin(), logits.end()) - logits.begin()] = 1.0;  // first maximum
    return out;
  }
  const long double m = *std::max_element(logits.begin(), logits.end());
  std::vector<long double> p(v);
  long double z = 0;
  for (size_t i = 0; i < v; ++i) z += p[i] = std::exp(((long double)logits[i] - m) / s.temperature);
  for (auto& x : p) x /= z;
  std::vector<long double> desc(p);
  std::sort(desc.begin(), desc.end(), std::greater<long double>());
  const long double t_k = (s.top_k >= 1 && static_cast<size_t>(s.top_k) < v) ? desc[s.top_k - 1] : 0;
  long double t_p = 0;
  if (s.top_p < 1.0f) {
    long double mass_k = 0;
    for (long double x : p) mass_k += x >= t_k ? x : 0;
    // The largest v among the probabilities whose set {p >= v, p >= t_k} holds top_p of mass_k.
    long double cum = 0;
    for (size_t j = 0; j < v && desc[j] >= t_k; ++j) {
      cum += desc[j];
      if ((j + 1 == v || desc[j + 1] != desc[j]) && cum >= (long double)s.top_p * mass_k) {
        t_p = desc[j];
        break;
      }
    }
  }
  const long double t_min = (long double)s.min_p * desc[0];
  const long double t = std::max({t_k, t_p, t_min});
  long double kept = 0;
  for (long double x : p) kept += x >= t ? x : 0;
  for (size_t i = 0; i < v; ++i) out[i] = p[i] >= t ? static_cast<double>(p[i] / kept) : 0.0;
  return out;
}

// Inverse CDF in increasing id order; -1 when u lies within eps of a boundary (rounding decides).
int expected_token(const std::vector<double>& dist, double u, double eps = 1e-9) {
  double cum = 0;
  for (size_t i = 0; i < dist.size(); ++i) {
    if (dist[i] == 0) continue;
    cum += dist[i];
    if (std::abs(cum - u) < eps) return -1;
    if (cum > u) return static_cast<int>(i);
  }
  return -1;
}

int32_t sample(const std::vector<float>& logits, const Params& s, float u) {
  return sample_row(logits.data(), static_cast<int64_t>(logits.size()), s.temperature, s.top_k, s.top_p, s.min_p, u);
}

const std::vector<float> kSmall = {1.0f, 2.5f, 0.3f, 2.5f, -1.0f, 0.7f, 1.9f, -0.2f};

std::vector<Params> small_cases() {
  return {
      {1.0f, -1, 1.0f, 0.0f}, {0.7f, 0, 1.0f, 0.0f},    {1.0f, 3, 1.0f, 0.0f},   {1.0f, 1, 1.0f, 0.0f},
      {1.0f, -1, 0.6f, 0.0f}, {1.3f, -1, 1.0f, 0.3f},   {0.9f, 5, 0.8f, 0.1f},   {2.0f, -1, 0.95f, 0.0f},
      {1.0f, 2, 0.5f, 0.0f},  {1.0f, 7, 0.999f, 0.05f}, {0.5f, 100, 1.0f, 0.0f},
  };
}

std::string describe(const Params& s) {
  return "T=" + std::to_string(s.temperature) + " top_k=" + std::to_string(s.top_k) +
         " top_p=" + std::to_string(s.top_p) + " min_p=" + std::to_string(s.min_p);
}

TEST(Sampler, GreedyTakesLowestIdAmongTies) {
  const std::vector<float> l = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(sample(l, {0.0f}, 0.99f), 1);
  EXPECT_EQ(sample(l, {0.0f, 1, 0.1f, 0.5f}, 0.0f), 1);
  EXPECT_EQ(sample({-std::numeric_limits<float>::infinity(), -5.0f}, {0.0f}, 0.5f), 1);
}

// Rows longer than the scan's chunks (2,048): the largest in a later or a last partial chunk, ties
// across chunks, -inf everywhere but one logit, and a NaN or +inf after the largest value.
TEST(Sampler, GreedyAcrossChunks) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> l(5000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  l[4999] = 7.0f;  // the last partial chunk
  EXPECT_EQ(sample(l, {0.0f}, 0.5f), 4999);
  l[2100] = 7.0f;  // a tie in an earlier chunk: the lower id
  EXPECT_EQ(sample(l, {0.0f}, 0.5f), 2100);
  l[2047] = 7.0f;  // the last element of the first chunk
  EXPECT_EQ(sample(l, {0.0f}, 0.5f), 2047);
  std::vector<float> all_ninf(4100, ninf);
  EXPECT_THROW(sample(all_ninf, {0.0f}, 0.5f), Error);  // nothing to sample
  all_ninf[3000] = -1e30f;
  EXPECT_EQ(sample(all_ninf, {0.0f}, 0.5f), 3000);
  l[4500] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(sample(l, {0.0f}, 0.5f), Error);
  l[4500] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(sample(l, {0.0f}, 0.5f), 2047);
  l[4500] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(sample(l, {0.0f}, 0.5f), Error);
}

TEST(Sampler, RejectsBadInputs) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THROW(sample({1.0f, nan}, {0.0f}, 0.5f), Error);
  EXPECT_THROW(sample({1.0f, nan}, {1.0f}, 0.5f), Error);
  EXPECT_THROW(sample({1.0f, inf}, {1.0f}, 0.5f), Error);
  EXPECT_THROW(sample({-inf, -inf}, {1.0f}, 0.5f), Error);
  EXPECT_THROW(sample(kSmall, {-1.0f}, 0.5f), Error);
  EXPECT_THROW(sample(kSmall, {1.0f, -1, 0.0f, 0.0f}, 0.5f), Error);
  EXPECT_THROW(sample(kSmall, {1.0f, -1, 1.0f, 1.5f}, 0.5f), Error);
  EXPECT_THROW(sample(kSmall, {1.0f}, nan), Error);
  EXPECT_THROW(sample_row(kSmall.data(), 0, 1.0f, -1, 1.0f, 0.0f, 0.5f), Error);
}

TEST(Sampler, InverseCdfRunsInIncreasingIdOrder) {
  const std::vector<float> l = {0.0f, 0.0f, std::log(2.0f)};  // p = 1/4, 1/4, 1/2
  EXPECT_EQ(sample(l, {}, 0.1f), 0);
  EXPECT_EQ(sample(l, {}, 0.3f), 1);
  EXPECT_EQ(sample(l, {}, 0.6f), 2);
  EXPECT_EQ(sample(l, {}, 0.0f), 0);
  // top_k = 1 keeps the ties at the threshold: here only token 2.
  EXPECT_EQ(sample(l, {1.0f, 1}, 0.0f), 2);
  // top_k = 2 with a tie at the 2nd place keeps all three.
  EXPECT_EQ(sample(l, {1.0f, 2}, 0.3f), 1);
}

TEST(Sampler, ExactDistributionMatchesIndependentReference) {
  for (const Params& s : small_cases()) {
    const std::vector<double> want = reference_distribution(kSmall, s);
    const std::vector<double> got =
        sampling_distribution(kSmall.data(), static_cast<int64_t>(kSmall.size()), s.temperature, s.top_k, s.top_p, s.min_p);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << describe(s) << " token " << i;
  }
  // Spot values computed by hand: top_k = 1 over the tied 2.5s is 1/2 each.
  const std::vector<double> tie = reference_distribution(kSmall, {1.0f, 1});
  EXPECT_NEAR(tie[1], 0.5, 1e-12);
  EXPECT_NEAR(tie[3], 0.5, 1e-12);
}

TEST(Sampler, UniformGridReproducesTheDistribution) {
  constexpr int kN = 20000;
  for (const Params& s : small_cases()) {
    const std::vector<double> want = reference_distribution(kSmall, s);
    std::vector<int> count(kSmall.size(), 0);
    for (int j = 0; j < kN; ++j) ++count[sample(kSmall, s, (j + 0.5f) / kN)];
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(count[i], want[i] * kN, 1.5) << describe(s) << " token " << i;
    }
  }
}

TEST(Sampler, TiesAndTinyProbabilities) {
  const std::vector<float> flat(10, 0.5f);
  const std::vector<float> steep = {0.0f, -100.0f, -200.0f, -300.0f, -300.0f, -400.0f, -500.0f};
  for (const Params& s : std::vector<Params>{{1.0f, 3}, {1.0f, -1, 0.5f}, {1.0f, 3, 0.2f, 0.5f}, {1.0f, -1, 0.01f}}) {
    for (const auto* l : {&flat, &steep}) {
      const std::vector<double> want = reference_distribution(*l, s);
      const std::vector<double> got =
          sampling_distribution(l->data(), static_cast<int64_t>(l->size()), s.temperature, s.top_k, s.top_p, s.min_p);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << describe(s) << " token " << i;
    }
  }
  // Probabilities below 2^-64 of the maximum share a histogram bucket; top_k must still split them.
  std::vector<float> spread;
  for (int i = 0; i < 50; ++i) spread.push_back(-50.0f - 3.0f * static_cast<float>(i % 25) - 0.01f * i);
  spread[17] = 0.0f;
  for (int k : {2, 5, 26, 49}) {
    const std::vector<double> want = reference_distribution(spread, {1.0f, k});
    const std::vector<double> got = sampling_distribution(spread.data(), 50, 1.0f, k, 1.0f, 0.0f);
    int kept = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      kept += got[i] > 0;
      EXPECT_EQ(got[i] > 0, want[i] > 0) << "top_k " << k << " token " << i;
    }
    EXPECT_EQ(kept, k);
  }
}

TEST(Sampler, SeededDrawsMatchTheDistribution) {
  constexpr int kDraws = 20000;
  for (const Params& s : small_cases()) {
    SamplingParams sp;
    sp.seed = 2024;
    Sequence seq(0, {1}, sp, 16);
    const std::vector<double> want = reference_distribution(kSmall, s);
    std::vector<int> count(kSmall.size(), 0);
    for (int j = 0; j < kDraws; ++j) ++count[sample(kSmall, s, seq.next_uniform())];
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(static_cast<double>(count[i]) / kDraws, want[i], 0.01) << describe(s) << " token " << i;
    }
  }
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams sp;
  sp.seed = 77;
  Sequence a(0, {1}, sp, 16), b(1, {1}, sp, 16);
  sp.seed = 78;
  Sequence c(2, {1}, sp, 16);
  std::vector<int32_t> ta, tb, tc;
  for (int j = 0; j < 200; ++j) {
    ta.push_back(sample(kSmall, {}, a.next_uniform()));
    tb.push_back(sample(kSmall, {}, b.next_uniform()));
    tc.push_back(sample(kSmall, {}, c.next_uniform()));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

std::vector<float> random_logits(size_t v, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> l(v);
  for (auto& x : l) x = normal(rng);
  for (size_t i = 0; i < v; i += 97) l[i + 1 < v ? i + 1 : i] = l[i];  // some exact ties
  return l;
}

TEST(Sampler, LargeVocabFollowsTheReferenceToken) {
  const std::vector<Params> cases = {{0.8f}, {1.0f, -1, 0.9f}, {1.0f, 50}, {0.7f, -1, 1.0f, 0.05f},
                                     {1.2f, 200, 0.8f, 0.01f}, {1.0f, -1, 0.3f}};
  for (size_t v : {size_t{4099}, size_t{151936}}) {
    const std::vector<float> l = random_logits(v, 3.0f, static_cast<uint32_t>(v));
    for (const Params& s : cases) {
      const std::vector<double> want = reference_distribution(l, s);
      int checked = 0;
      const int draws = v > 10000 ? 100 : 300;
      for (int j = 0; j < draws; ++j) {
        const float u = (j + 0.37f) / draws;
        const int tok = expected_token(want, u);
        if (tok < 0) continue;
        ++checked;
        ASSERT_EQ(sample(l, s, u), tok) << describe(s) << " vocab " << v << " u " << u;
      }
      EXPECT_GT(checked, draws - 10);
    }
  }
}

TEST(Sampler, BatchMatchesRowsAndStaysFast) {
  constexpr int64_t kVocab = 151936;
  const int rows = 8;
  std::vector<float> logits;
  SamplingBatch batch;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> l = random_logits(kVocab, 2.0f + r, 100 + r);
    logits.insert(logits.end(), l.begin(), l.end());
    batch.temperature.push_back(r == 0 ? 0.0f : 0.5f + 0.1f * r);
    batch.top_k.push_back(r % 3 == 0 ? 40 : -1);
    batch.top_p.push_back(r % 2 == 0 ? 0.9f : 1.0f);
    batch.min_p.push_back(r % 4 == 1 ? 0.05f : 0.0f);
    batch.uniform.push_back(0.1f * r + 0.05f);
  }
  std::vector<int32_t> out(rows, -1);
  const auto start = std::chrono::steady_clock::now();
  sample_on_host(logits.data(), kVocab, batch, out.data());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("sample_on_host: %d rows of vocab %ld in %.2f ms\n", rows, static_cast<long>(kVocab), ms);
  for (int r = 0; r < rows; ++r) {
    EXPECT_EQ(out[r], sample_row(logits.data() + r * kVocab, kVocab, batch.temperature[r], batch.top_k[r],
                                 batch.top_p[r], batch.min_p[r], batch.uniform[r]))
        << "row " << r;
  }
  EXPECT_LT(ms, 500.0);
  batch.uniform.pop_back();
  EXPECT_THROW(sample_on_host(logits.data(), kVocab, batch, out.data()), Error);
}

}  // namespace
}  // namespace minivllm
