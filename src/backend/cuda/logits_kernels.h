// Kernels around the sampler (logits_ops.cu): the penalties' token counts, the penalties, and
// logprobs. Semantics: sampling/logits_processing.h, the host reference they are tested against.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace minivllm::cuda {

// Zeroes counts rows slots[0..num_slots).
void launch_reset_token_counts(int32_t* counts, int64_t vocab, const int32_t* slots, int num_slots,
                               cudaStream_t stream);
// Counts tokens[i] in row slots[i]: as a prompt token (in_prompt[i] != 0) or a generated one.
void launch_count_tokens(int32_t* counts, int64_t vocab, const int32_t* slots, const int32_t* tokens,
                         const uint8_t* in_prompt, int n, cudaStream_t stream);
// In place on logits [rows, vocab]: row r with slots[r] >= 0 penalised over counts[slots[r]].
void launch_apply_penalties(float* logits, int64_t rows, int64_t vocab, const int32_t* counts, const int32_t* slots,
                            const float* presence, const float* frequency, const float* repetition,
                            cudaStream_t stream);
// In place on logits [rows, vocab]: row r gets values[i] added at ids[i] for i in
// [offsets[r], offsets[r + 1]) (ids distinct within a row; apply_bias_row's semantics).
void launch_apply_logit_bias(float* logits, int64_t rows, int64_t vocab, const int32_t* offsets, const int32_t* ids,
                             const float* values, cudaStream_t stream);
// In place on logits [rows, vocab]: token v of row r becomes -inf when bit v % 32 of
// bitmask[r * words + v / 32] is clear (apply_bitmask_row's semantics).
void launch_apply_token_bitmask(float* logits, int64_t rows, int64_t vocab, const int32_t* bitmask, int words,
                                cudaStream_t stream);
// Per row: chosen[r] = log-softmax at tokens[r]; the k (<= kMaxTopLogprobs) most likely tokens,
// most likely first, ties by lower id, into top_ids / top_logprobs [rows, k].
constexpr int kMaxTopLogprobs = 20;
void launch_logprobs(const float* logits, int64_t rows, int64_t vocab, const int32_t* tokens, int k, float* chosen,
                     int32_t* top_ids, float* top_logprobs, cudaStream_t stream);

}  // namespace minivllm::cuda
