// SamplingParams: per-request generation settings (seeds: SamplingParams), validated up front.
// Each key is defined once, in the table in sampling_keys.cc (name, help, range; the default is
// the member's initializer below), which the JSON parser, the CLI flags, the server's OpenAI
// parameters and the Python keyword arguments read.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/structured_outputs.h"

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
  // vLLM's: the text that ended the completion (a stop string, or the text of eos or of a stop
  // token id) kept at the end of the output text; off: cut (as vLLM, eos's text never shows).
  bool include_stop_str_in_output = false;
  // vLLM's: the text leaves out special tokens (<|im_start|>, ...); off: it shows them.
  bool skip_special_tokens = true;
  // vLLM's: only the prompt's last k tokens are used (left truncation); -1: the last
  // max_model_len; 0: the whole prompt (a longer one is refused).
  int truncate_prompt_tokens = 0;
  // Choices for one prompt, 1..kMaxN. They share the prompt's KV blocks through the prefix cache;
  // with a seed, choice i draws from a generator seeded from (seed, i).
  int n = 1;
  // -1: none; 0: the chosen token's logprob; k in 1..kMaxLogprobs: also the k most likely tokens.
  int logprobs = -1;
  // vLLM's prompt_logprobs, the same values for the prompt: each prompt token after the first,
  // scored by the logits of the position before it (what OpenAI's echo with logprobs returns).
  // Computed once per request, during its prefill, which then takes no prefix-cache hits.
  int prompt_logprobs = -1;
  // OpenAI's penalties on the generated tokens, in [-2, 2]: logit -= presence * (count > 0) +
  // frequency * count. repetition_penalty > 0 (HF / vLLM, 1 = off) over prompt and generated
  // tokens: a positive logit is divided by it, a negative one multiplied.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  // OpenAI's logit_bias: added to the token's logit before sampling (after the penalties), each
  // in [-100, 100]; -100 all but bans a token. Ids must be below the model's vocabulary (the
  // engine checks when it accepts the request).
  std::map<int32_t, float> logit_bias;
  // vLLM's: eos and stop_token_ids cannot be sampled before this many tokens (<= max_tokens).
  int min_tokens = 0;
  // vLLM's: words never generated. Each is tokenized as given and with a leading space; the last
  // token of a word is banned wherever the tokens before it were just generated.
  std::vector<std::string> bad_words;
  // vLLM's: only these tokens may be sampled (eos and stop tokens too only when listed); empty: any.
  // Ids must be below the model's vocabulary (checked when the engine accepts the request).
  std::vector<int64_t> allowed_token_ids;
  // vLLM's structured_outputs (OpenAI's response_format maps onto it): the completion must match a
  // JSON schema, any JSON object, a regex, one of some strings, or an EBNF grammar; a token mask
  // per step (engine/token_constraint.h) keeps the sampler inside it.
  StructuredOutputs structured_outputs;

  // Not keys: filled in by the engine when it accepts the request (LLMEngine::add_request), from
  // the tokenizer and the model's eos ids, as vLLM resolves bad_words once per request.
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  std::vector<int32_t> min_tokens_banned_ids;  // eos ids (unless ignore_eos) and stop_token_ids
  // Not a key: an embedding request (the server's /v1/embeddings). Its prefill also hands back the
  // final-normed hidden state of its last token (RequestOutput::embedding, last-token pooling, as
  // vLLM's for Qwen3-Embedding); the one token it then samples is not its point.
  bool pooling = false;
  // An embedding request's parameters: pooling, one greedy token (eos ignored) that is not returned.
  static SamplingParams embedding_request() {
    SamplingParams p;
    p.pooling = true;
    p.temperature = 0;
    p.max_tokens = 1;
    p.ignore_eos = true;
    return p;
  }

  bool has_penalties() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f;
  }

  // logit_bias, min_tokens or bad_words: a sparse change to the row's logits (SamplingBatch::bias_*).
  bool has_logit_rules() const { return !logit_bias.empty() || min_tokens > 0 || !bad_words_token_ids.empty(); }

  // Throws a ConfigKeyError naming the key when a value is invalid.
  void validate() const;
  // From a JSON object of the table's keys; an unknown key, a wrong type or a value out of range
  // is a ConfigKeyError naming the key; null keeps the default. (sampling_keys.cc)
  static SamplingParams from_json(const nlohmann::json& j);
  nlohmann::ordered_json to_json() const;
};

// One generated token's log-probability and, when asked for, the most likely tokens at that
// position (most likely first, ties by lower id). See LLMEngine for which logits they come from.
struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

// Whether `token` ends a sequence sampled with `p`: one of the engine's eos ids (unless ignore_eos)
// or of p.stop_token_ids. The scheduler finishes on it; the output leaves its text out.
inline bool ends_sequence(const SamplingParams& p, const std::vector<int64_t>& eos_token_ids, int32_t token) {
  const auto contains = [token](const std::vector<int64_t>& ids) {
    return std::find(ids.begin(), ids.end(), static_cast<int64_t>(token)) != ids.end();
  };
  return (!p.ignore_eos && contains(eos_token_ids)) || contains(p.stop_token_ids);
}

// truncate_prompt_tokens applied to a prompt: its last k tokens (k = max_model_length for -1; 0
// keeps all). The engine and the server (which counts the prompt before it submits) both apply it.
inline void truncate_prompt(std::vector<int32_t>& ids, int truncate_prompt_tokens, int max_model_length) {
  const int k = truncate_prompt_tokens < 0 ? max_model_length : truncate_prompt_tokens;
  if (k > 0 && ids.size() > static_cast<size_t>(k)) ids.erase(ids.begin(), ids.end() - k);
}

}  // namespace minivllm
