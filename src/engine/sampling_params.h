// SamplingParams: per-request generation settings (seeds: SamplingParams), validated up front.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace minivllm {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  int top_k = -1;            // <= 0: off
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  int max_tokens = 64;       // >= 1
  bool ignore_eos = false;
  std::optional<uint64_t> seed;           // reproducible sampling when set
  std::vector<int64_t> stop_token_ids;    // besides eos
  std::vector<std::string> stop;          // stop strings (text API); the stop text is not returned

  // Throws an Error naming the field when a value is invalid.
  void validate() const;
};

}  // namespace minivllm
