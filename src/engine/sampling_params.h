// SamplingParams: per-request generation settings (seeds: SamplingParams), validated up front.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace minivllm {

struct SamplingParams {
  static constexpr int kMaxN = 128;        // choices per request
  static constexpr int kMaxLogprobs = 20;  // top alternatives per token (OpenAI's limit)

  float temperature = 1.0f;  // 0: greedy
  int top_k = -1;            // <= 0: off
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  int max_tokens = 64;       // >= 1
  bool ignore_eos = false;
  std::optional<uint64_t> seed;           // reproducible sampling when set
  std::vector<int64_t> stop_token_ids;    // besides eos
  std::vector<std::string> stop;          // stop strings (text API); the stop text is not returned
  // Choices for one prompt, 1..kMaxN. They share the prompt's KV blocks through the prefix cache;
  // with a seed, choice i draws from a generator seeded from (seed, i).
  int n = 1;
  // -1: none; 0: the chosen token's logprob; k in 1..kMaxLogprobs: also the k most likely tokens.
  int logprobs = -1;
  // OpenAI's penalties on the generated tokens, in [-2, 2]: logit -= presence * (count > 0) +
  // frequency * count. repetition_penalty > 0 (HF / vLLM, 1 = off) over prompt and generated
  // tokens: a positive logit is divided by it, a negative one multiplied.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;

  bool has_penalties() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f;
  }

  // Throws an Error naming the field when a value is invalid.
  void validate() const;

  // From a JSON object with the fields above (sampling_params_json.cc): unknown keys and values of
  // the wrong type are an Error naming the key; the result is validated. `seed` may be null,
  // `stop` a string or a list of strings. The Python package passes its keyword arguments here.
  static SamplingParams from_json(const nlohmann::json& j);
  // Every field, in declaration order (seed null when unset): what from_json reads back.
  nlohmann::ordered_json to_json() const;
};

// One generated token's log-probability and, when asked for, the most likely tokens at that
// position (most likely first, ties by lower id). See LLMEngine for which logits they come from.
struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

}  // namespace minivllm
