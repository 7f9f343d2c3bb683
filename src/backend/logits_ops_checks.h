// Argument checks shared by every backend's penalties and logprobs (backend.h): the values come
// from rank 0's engine, so a bad one is a bug worth naming, never a stray write.
#pragma once

#include <cstdint>
#include <vector>

#include "common/tensor.h"
#include "sampling/logits_processing.h"
#include "sampling/sampler.h"

namespace minivllm {

void check_token_count_update(const Tensor& counts, const TokenCountUpdate& update);
void check_penalty_args(const Tensor& logits, const Tensor& counts, const std::vector<int32_t>& slots,
                        const SamplingBatch& batch);
void check_logit_bias_args(const Tensor& logits, const SamplingBatch& batch);
void check_token_bitmask_args(const Tensor& logits, const SamplingBatch& batch);
void check_logprobs_args(const Tensor& logits, const int32_t* tokens, int k);

}  // namespace minivllm
