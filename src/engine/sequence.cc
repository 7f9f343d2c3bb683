// Sequence: token bookkeeping and the per-request random generator.
#include "engine/sequence.h"

#include <algorithm>

#include "common/check.h"

namespace minivllm {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
    case FinishReason::kNone:
      break;
  }
  return "";
}

namespace {
// A request without a seed still gets its own generator, so that batching never changes its draws.
uint64_t initial_seed(const SamplingParams& params) {
  if (params.seed) return *params.seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}
}  // namespace

Sequence::Sequence(int64_t seq_id, std::vector<int32_t> prompt_token_ids, SamplingParams params, int block_size)
    : seq_id_(seq_id),
      params_(std::move(params)),
      block_size_(block_size),
      num_prompt_tokens_(static_cast<int>(prompt_token_ids.size())),
      token_ids_(std::move(prompt_token_ids)),
      rng_(initial_seed(params_)) {
  MINIVLLM_CHECK_GE(block_size_, 1) << "sequence " << seq_id_ << ": block_size must be >= 1";
}

std::vector<int32_t> Sequence::completion_token_ids() const {
  return std::vector<int32_t>(token_ids_.begin() + num_prompt_tokens_, token_ids_.end());
}

std::vector<int32_t> Sequence::block(int i) const {
  MINIVLLM_CHECK(i >= 0 && i < num_blocks()) << "sequence " << seq_id_ << ": block " << i << " out of range [0, "
                                             << num_blocks() << ")";
  const int begin = i * block_size_;
  const int end = std::min(begin + block_size_, num_tokens());
  return std::vector<int32_t>(token_ids_.begin() + begin, token_ids_.begin() + end);
}

float Sequence::next_uniform() {
  // The top 24 bits make an exact float in [0, 1): never 1.0, unlike a float distribution can.
  return static_cast<float>(rng_() >> 40) * 0x1p-24f;
}

}  // namespace minivllm
