// The reference sampler on the host: the semantics every backend's sampler follows.
#pragma once

#include <cstdint>
#include <vector>

namespace minivllm {

// Sampling inputs for a batch of sequences (rank 0 only). All host values.
//   temperature == 0: argmax (lowest id among ties).
//   otherwise: p = softmax(logits / temperature); keep the top_k largest (top_k <= 0: all);
//   keep the smallest prefix (by descending p, ties by lower id) whose mass reaches top_p;
//   drop tokens with p < min_p * max(p); renormalise; pick by inverse CDF with uniform[i] in [0,1)
//   over that descending order.
struct SamplingBatch {
  std::vector<float> temperature;
  std::vector<int> top_k;
  std::vector<float> top_p;
  std::vector<float> min_p;
  std::vector<float> uniform;  // one draw per sequence from its own seeded generator
  int size() const { return static_cast<int>(temperature.size()); }
};

// logits: [num_seqs, vocab] row-major fp32. Writes num_seqs token ids.
void sample_on_host(const float* logits, int64_t vocab, const SamplingBatch& batch, int32_t* out_tokens);

// One row: the token for these logits under these parameters (used by sample_on_host).
int32_t sample_row(const float* logits, int64_t vocab, float temperature, int top_k, float top_p, float min_p,
                   float uniform);

}  // namespace minivllm
