// CpuBackend's penalties, logit biases and logprobs: the host reference (sampling/logits_processing.h), rows
// in parallel.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/logits_ops_checks.h"

namespace minivllm {

void CpuBackend::update_token_counts(const Tensor& counts, const TokenCountUpdate& u) {
  check_token_count_update(counts, u);
  const int64_t vocab = counts.size(1);
  int32_t* c = counts.ptr<int32_t>();
  for (int32_t s : u.reset_slots) std::memset(c + s * vocab, 0, static_cast<size_t>(vocab) * sizeof(int32_t));
  for (size_t i = 0; i < u.slots.size(); ++i) count_token(c + u.slots[i] * vocab, u.tokens[i], u.in_prompt[i] != 0);
}

void CpuBackend::apply_penalties(const Tensor& logits, const Tensor& counts, const std::vector<int32_t>& slots,
                                 const SamplingBatch& b) {
  check_penalty_args(logits, counts, slots, b);
  const int64_t rows = logits.size(0), vocab = logits.size(1);
#pragma omp parallel for num_threads(num_threads_) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    if (slots[r] < 0) continue;
    apply_penalties_row(logits.ptr<float>() + r * vocab, vocab, counts.ptr<int32_t>() + slots[r] * vocab,
                        b.presence_penalty[r], b.frequency_penalty[r], b.repetition_penalty[r]);
  }
}

void CpuBackend::apply_logit_bias(const Tensor& logits, const SamplingBatch& b) {
  check_logit_bias_args(logits, b);
  const int64_t vocab = logits.size(1);
  for (int64_t r = 0; r < logits.size(0); ++r) {
    const int32_t begin = b.bias_offsets[r];
    apply_bias_row(logits.ptr<float>() + r * vocab, b.bias_ids.data() + begin, b.bias_values.data() + begin,
                   b.bias_offsets[r + 1] - begin);
  }
}

void CpuBackend::apply_token_bitmask(const Tensor& logits, const SamplingBatch& b) {
  check_token_bitmask_args(logits, b);
  const int64_t rows = logits.size(0), vocab = logits.size(1);
#pragma omp parallel for num_threads(num_threads_) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    apply_bitmask_row(logits.ptr<float>() + r * vocab, vocab, b.bitmask.data() + r * b.bitmask_words);
  }
}

void CpuBackend::compute_logprobs(const Tensor& logits, const int32_t* tokens, int k, float* chosen,
                                  int32_t* top_ids, float* top_logprobs) {
  check_logprobs_args(logits, tokens, k);
  const int64_t rows = logits.size(0), vocab = logits.size(1);
#pragma omp parallel for num_threads(num_threads_) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    logprobs_row(logits.ptr<float>() + r * vocab, vocab, tokens[r], k, chosen + r, top_ids + r * k,
                 top_logprobs + r * k);
  }
}

}  // namespace minivllm
