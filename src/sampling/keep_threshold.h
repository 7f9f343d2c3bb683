// The keep threshold of sampler.h: given relative probabilities q (max 1), the value t such that a
// token is kept when q_i >= t, from top_k, top_p and min_p. Exact, and O(vocab) plus a sort of one
// histogram bucket: no full sort even for top_p over a 152k vocabulary.
#pragma once

#include <cstdint>
#include <vector>

namespace minivllm {

// Reusable buffers (one per thread), so a row allocates nothing once warm.
struct ThresholdScratch {
  std::vector<int64_t> bucket_count;
  std::vector<double> bucket_mass;
  std::vector<double> work;
};

double keep_threshold(const std::vector<double>& q, int top_k, float top_p, float min_p, ThresholdScratch& scratch);

}  // namespace minivllm
