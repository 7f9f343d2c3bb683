// keep_threshold: a histogram over the bit patterns of q (monotone in q, so equal values share a
// bucket and buckets are ordered), then an exact search inside the one bucket where the top_k
// count or the top_p mass is reached.
#include "sampling/keep_threshold.h"

#include <algorithm>
#include <bit>
#include <functional>

namespace minivllm {

namespace {

// 16 buckets per binade over the 64 binades below 1; everything smaller shares bucket 0.
constexpr int kMantissaBits = 4;
constexpr int64_t kLowestExponent = 1023 - 64;
constexpr int kNumBuckets = (64 << kMantissaBits) + 1;

int bucket_of(double q) {
  const uint64_t bits = std::bit_cast<uint64_t>(q);
  const int64_t exponent = static_cast<int64_t>(bits >> 52);
  if (exponent <= kLowestExponent) return 0;
  const int64_t mantissa = static_cast<int64_t>((bits >> (52 - kMantissaBits)) & ((1 << kMantissaBits) - 1));
  return static_cast<int>(((exponent - kLowestExponent) << kMantissaBits) | mantissa);
}

void build_histogram(const std::vector<double>& q, ThresholdScratch& s) {
  s.bucket_count.assign(kNumBuckets, 0);
  s.bucket_mass.assign(kNumBuckets, 0.0);
  for (double v : q) {
    const int b = bucket_of(v);
    ++s.bucket_count[b];
    s.bucket_mass[b] += v;
  }
}

// The values of bucket b that are >= floor, in descending order.
void gather_bucket(const std::vector<double>& q, int b, double floor, std::vector<double>& work) {
  work.clear();
  for (double v : q) {
    if (v >= floor && bucket_of(v) == b) work.push_back(v);
  }
}

// The k-th largest q, or 0 when top_k is off or keeps everything.
double top_k_threshold(const std::vector<double>& q, int top_k, ThresholdScratch& s) {
  if (top_k <= 0 || static_cast<size_t>(top_k) >= q.size()) return 0.0;
  int64_t above = 0;
  for (int b = kNumBuckets - 1; b >= 0; --b) {
    if (above + s.bucket_count[b] < top_k) {
      above += s.bucket_count[b];
      continue;
    }
    gather_bucket(q, b, 0.0, s.work);
    const auto nth = s.work.begin() + (top_k - 1 - above);
    std::nth_element(s.work.begin(), nth, s.work.end(), std::greater<double>());
    return *nth;
  }
  return 0.0;  // unreachable: the counts add up to q.size() > top_k
}

// The largest value v (one of the q values) whose set {q >= v, q >= t_k} holds top_p of the mass
// of {q >= t_k}. Values below floor (>= t_k) do not matter to the caller, which then gets floor.
double top_p_threshold(const std::vector<double>& q, double t_k, double floor, double top_p, ThresholdScratch& s) {
  double mass = 0.0;
  for (double v : q) mass += v >= t_k ? v : 0.0;
  const double target = top_p * mass;
  const int floor_bucket = bucket_of(floor);
  double cum = 0.0;
  for (int b = kNumBuckets - 1; b >= floor_bucket; --b) {
    if (s.bucket_count[b] == 0) continue;
    // Buckets above floor's hold only values > floor >= t_k: take them whole until the target.
    if (b > floor_bucket && cum + s.bucket_mass[b] < target) {
      cum += s.bucket_mass[b];
      continue;
    }
    gather_bucket(q, b, floor, s.work);
    std::sort(s.work.begin(), s.work.end(), std::greater<double>());
    for (size_t j = 0; j < s.work.size(); ++j) {
      cum += s.work[j];
      const bool group_ends = j + 1 == s.work.size() || s.work[j + 1] != s.work[j];
      if (group_ends && cum >= target) return s.work[j];
    }
    // Rounding (bucket sums against this walk) can leave the target just out of reach: go on.
  }
  return floor;
}

}  // namespace

double keep_threshold(const std::vector<double>& q, int top_k, float top_p, float min_p, ThresholdScratch& scratch) {
  const bool use_top_k = top_k > 0 && static_cast<size_t>(top_k) < q.size();
  if (!use_top_k && top_p >= 1.0f) return static_cast<double>(min_p);
  build_histogram(q, scratch);
  const double t_k = top_k_threshold(q, top_k, scratch);
  const double t_min = static_cast<double>(min_p);  // min_p * max(q), max(q) == 1
  double t = std::max(t_k, t_min);
  if (top_p < 1.0f) t = std::max(t, top_p_threshold(q, t_k, t, static_cast<double>(top_p), scratch));
  return t;
}

}  // namespace minivllm
