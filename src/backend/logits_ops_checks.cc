#include "backend/logits_ops_checks.h"

#include "common/check.h"

namespace minivllm {

void check_token_count_update(const Tensor& counts, const TokenCountUpdate& u) {
  MINIVLLM_CHECK(counts.dtype() == DType::kI32 && counts.ndim() == 2)
      << "update_token_counts: counts " << counts.describe() << " must be i32[slots, V]";
  MINIVLLM_CHECK(u.tokens.size() == u.slots.size() && u.in_prompt.size() == u.slots.size())
      << "update_token_counts: " << u.slots.size() << " slots, " << u.tokens.size() << " tokens, "
      << u.in_prompt.size() << " prompt flags";
  const int64_t rows = counts.size(0), vocab = counts.size(1);
  for (int32_t s : u.reset_slots) MINIVLLM_CHECK(s >= 0 && s < rows) << "update_token_counts: slot " << s;
  for (size_t i = 0; i < u.slots.size(); ++i) {
    MINIVLLM_CHECK(u.slots[i] >= 0 && u.slots[i] < rows && u.tokens[i] >= 0 && u.tokens[i] < vocab)
        << "update_token_counts: token " << u.tokens[i] << " in slot " << u.slots[i] << " of " << counts.describe();
  }
}

void check_penalty_args(const Tensor& logits, const Tensor& counts, const std::vector<int32_t>& slots,
                        const SamplingBatch& b) {
  MINIVLLM_CHECK(logits.dtype() == DType::kF32 && logits.ndim() == 2 && counts.dtype() == DType::kI32 &&
                 counts.ndim() == 2 && counts.size(1) == logits.size(1))
      << "apply_penalties: logits " << logits.describe() << ", counts " << counts.describe();
  const size_t rows = static_cast<size_t>(logits.size(0));
  MINIVLLM_CHECK(slots.size() == rows && b.presence_penalty.size() == rows && b.frequency_penalty.size() == rows &&
                 b.repetition_penalty.size() == rows)
      << "apply_penalties: " << rows << " rows, " << slots.size() << " slots, " << b.presence_penalty.size()
      << " penalty rows";
  for (int32_t s : slots) MINIVLLM_CHECK(s >= -1 && s < counts.size(0)) << "apply_penalties: slot " << s;
}

void check_logit_bias_args(const Tensor& logits, const SamplingBatch& b) {
  MINIVLLM_CHECK(logits.dtype() == DType::kF32 && logits.ndim() == 2)
      << "apply_logit_bias: logits " << logits.describe() << " must be f32[S, V]";
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  MINIVLLM_CHECK(b.bias_offsets.size() == static_cast<size_t>(rows) + 1 && b.bias_offsets.front() == 0 &&
                 static_cast<size_t>(b.bias_offsets.back()) == b.bias_ids.size() &&
                 b.bias_values.size() == b.bias_ids.size())
      << "apply_logit_bias: " << rows << " rows, " << b.bias_offsets.size() << " offsets, " << b.bias_ids.size()
      << " ids, " << b.bias_values.size() << " values";
  for (int64_t r = 0; r < rows; ++r) {
    MINIVLLM_CHECK(b.bias_offsets[r] <= b.bias_offsets[r + 1]) << "apply_logit_bias: row " << r << "'s offsets decrease";
    // Distinct ids within a row: the CUDA kernel adds each entry from its own thread, unordered.
    for (int32_t i = b.bias_offsets[r]; i < b.bias_offsets[r + 1]; ++i) {
      MINIVLLM_CHECK(b.bias_ids[i] >= 0 && b.bias_ids[i] < vocab)
          << "apply_logit_bias: token " << b.bias_ids[i] << " of row " << r << " is outside [0, " << vocab << ")";
      MINIVLLM_CHECK(i == b.bias_offsets[r] || b.bias_ids[i] > b.bias_ids[i - 1])
          << "apply_logit_bias: row " << r << "'s ids must increase (token " << b.bias_ids[i] << ")";
    }
  }
}

void check_token_bitmask_args(const Tensor& logits, const SamplingBatch& b) {
  MINIVLLM_CHECK(logits.dtype() == DType::kF32 && logits.ndim() == 2)
      << "apply_token_bitmask: logits " << logits.describe() << " must be f32[S, V]";
  MINIVLLM_CHECK(b.bitmask_words == (logits.size(1) + 31) / 32 &&
                 b.bitmask.size() == static_cast<size_t>(logits.size(0)) * static_cast<size_t>(b.bitmask_words))
      << "apply_token_bitmask: " << b.bitmask.size() << " words of " << b.bitmask_words << " a row for logits "
      << logits.describe();
}

void check_logprobs_args(const Tensor& logits, const int32_t* tokens, int k) {
  MINIVLLM_CHECK(logits.dtype() == DType::kF32 && logits.ndim() == 2)
      << "compute_logprobs: logits " << logits.describe() << " must be f32[S, V]";
  MINIVLLM_CHECK(k >= 0 && k <= logits.size(1)) << "compute_logprobs: k " << k << " of vocab " << logits.size(1);
  for (int64_t r = 0; r < logits.size(0); ++r) {
    MINIVLLM_CHECK(tokens[r] >= 0 && tokens[r] < logits.size(1)) << "compute_logprobs: token " << tokens[r];
  }
}

}  // namespace minivllm
