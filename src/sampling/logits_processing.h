// What happens to a row of logits around the sampler: penalties before it, logprobs beside it.
// The host reference of both; every backend follows these semantics (sampler.h says where they
// sit in a step).
#pragma once

#include <cstdint>
#include <vector>

namespace minivllm {

// Per-sequence token counts, one int32 per vocabulary entry, as the penalties read them:
// 2 * (times the token was generated) + (1 when it occurs in the prompt).
inline constexpr int32_t kPromptCountBit = 1;
inline constexpr int32_t kGeneratedCountStep = 2;

// In place on one row of logits, for every token v with counts[v] != 0:
//   repetition (HF / vLLM, over prompt and generated tokens): l > 0 ? l / repetition : l * repetition;
//   then OpenAI's: l -= frequency * generated(v) + presence * (generated(v) > 0).
// Tokens never seen are left alone, so a row with no penalties is unchanged bit for bit.
void apply_penalties_row(float* logits, int64_t vocab, const int32_t* counts, float presence, float frequency,
                         float repetition);

// In place on one row of logits: logits[ids[i]] += values[i] for i < n (a value of -inf bans the
// token: its logit becomes -inf whatever it was). Ids are distinct and in [0, vocab).
void apply_bias_row(float* logits, const int32_t* ids, const float* values, int n);

// In place on one row of logits: tokens whose bit is clear in `words` (token v: bit v % 32 of
// words[v / 32]) get -inf, so no sampler can pick them (greedy, top-k and the inverse CDF alike).
void apply_bitmask_row(float* logits, int64_t vocab, const int32_t* words);

// Adds a token to a row of counts (generated, or seen in the prompt).
inline void count_token(int32_t* counts, int32_t token, bool in_prompt) {
  if (in_prompt) {
    counts[token] |= kPromptCountBit;
  } else {
    counts[token] += kGeneratedCountStep;
  }
}

// Changes to the per-sequence counts before a step's penalties: rows to zero, then tokens to count.
struct TokenCountUpdate {
  std::vector<int32_t> reset_slots;
  std::vector<int32_t> slots, tokens;
  std::vector<uint8_t> in_prompt;  // 1: a prompt token, 0: a generated one
  bool empty() const { return reset_slots.empty() && slots.empty(); }
};

// log-softmax of one row (natural log, computed in fp32 from the row's max and the sum of
// exp(l - max) in double on the host): *chosen = logprob of `token`; the `k` most likely tokens in
// top_ids / top_logprobs, most likely first, ties by lower id. k may be 0.
void logprobs_row(const float* logits, int64_t vocab, int32_t token, int k, float* chosen, int32_t* top_ids,
                  float* top_logprobs);

}  // namespace minivllm
