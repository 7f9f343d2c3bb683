// SamplingParams::validate: every bad value is rejected up front with the field and value named.
#include "engine/sampling_params.h"

#include <cmath>

#include "common/check.h"

namespace minivllm {

void SamplingParams::validate() const {
  MINIVLLM_CHECK(std::isfinite(temperature) && temperature >= 0.0f)
      << "temperature must be finite and >= 0, got " << temperature;
  MINIVLLM_CHECK(top_p > 0.0f && top_p <= 1.0f) << "top_p must be in (0, 1], got " << top_p;
  MINIVLLM_CHECK(min_p >= 0.0f && min_p <= 1.0f) << "min_p must be in [0, 1], got " << min_p;
  MINIVLLM_CHECK(top_k >= -1) << "top_k must be -1 or 0 (off) or >= 1, got " << top_k;
  MINIVLLM_CHECK(max_tokens >= 1) << "max_tokens must be >= 1, got " << max_tokens;
  for (int64_t id : stop_token_ids) {
    MINIVLLM_CHECK(id >= 0) << "stop_token_ids must be >= 0, got " << id;
  }
  for (const std::string& s : stop) {
    MINIVLLM_CHECK(!s.empty()) << "stop strings must not be empty";
  }
  MINIVLLM_CHECK(n >= 1 && n <= kMaxN) << "n must be in [1, " << kMaxN << "], got " << n;
  MINIVLLM_CHECK(logprobs >= -1 && logprobs <= kMaxLogprobs)
      << "logprobs must be in [0, " << kMaxLogprobs << "] (or -1 for none), got " << logprobs;
  MINIVLLM_CHECK(std::isfinite(presence_penalty) && presence_penalty >= -2.0f && presence_penalty <= 2.0f)
      << "presence_penalty must be in [-2, 2], got " << presence_penalty;
  MINIVLLM_CHECK(std::isfinite(frequency_penalty) && frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)
      << "frequency_penalty must be in [-2, 2], got " << frequency_penalty;
  MINIVLLM_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f)
      << "repetition_penalty must be finite and > 0, got " << repetition_penalty;
}

}  // namespace minivllm
