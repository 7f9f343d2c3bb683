// The reference sampler on the host: the semantics every backend's sampler follows.
#pragma once

#include <cstdint>
#include <vector>

namespace minivllm {

// Sampling inputs for a batch of sequences (rank 0 only). All host values.
// Semantics, identical on every backend (threshold form, so that a GPU needs no sort):
//   The logits are first penalised (logits_processing.h: repetition over the prompt and generated
//   tokens, then OpenAI's presence and frequency over the generated ones) when the row has
//   penalties, then biased (logit_bias, min_tokens, bad_words) when it has biases, then masked
//   (structured outputs: a disallowed token's logit becomes -inf) when it has a grammar; logprobs are
//   the log-softmax of these logits at temperature 1, before
//   any temperature, top-k, top-p or min-p (what the model, penalties included, thinks of each
//   token, whatever the request samples with).
//   temperature == 0: argmax of the logits (lowest id among ties).
//   otherwise p = softmax(logits / temperature), and a token is kept when p_i >= t, where t is the
//   largest of these thresholds (ties with a threshold are always kept):
//     top_k >= 1 (and < vocab): the k-th largest p;
//     top_p < 1: the largest v such that the mass of {j : p_j >= v, p_j >= t_k} is at least
//                top_p * the mass of {j : p_j >= t_k} (t_k: the top_k threshold, or 0);
//     min_p > 0: min_p * max(p).
//   The token is picked by inverse CDF in increasing id order over the kept tokens: the first kept
//   id whose running sum of p exceeds uniform * (sum of kept p); the last kept id if rounding
//   leaves none.
struct SamplingBatch {
  std::vector<float> temperature;
  std::vector<int> top_k;
  std::vector<float> top_p;
  std::vector<float> min_p;
  std::vector<float> uniform;  // one draw per sequence from its own seeded generator
  // Empty when no row of the batch has penalties (the fast path), else one value per row.
  std::vector<float> presence_penalty, frequency_penalty, repetition_penalty;
  // Empty when no row asks for logprobs, else per row: -1 none, else how many top tokens (0..20).
  std::vector<int> logprobs;
  // Additions to single logits after the penalties (logit_bias; -inf for what min_tokens and
  // bad_words ban; logits_processing.h): row r's are [bias_offsets[r], bias_offsets[r + 1]) of
  // bias_ids / bias_values, ids distinct within a row. Empty when no row has any.
  std::vector<int32_t> bias_offsets, bias_ids;
  std::vector<float> bias_values;
  int size() const { return static_cast<int>(temperature.size()); }
  bool has_penalties() const { return !presence_penalty.empty(); }
  bool has_logprobs() const { return !logprobs.empty(); }
  bool has_bias() const { return !bias_offsets.empty(); }
  // Structured outputs: the tokens each row may sample, as bits (token v: bit v % 32 of word v / 32
  // of the row; logits_processing.h), bitmask_words words a row; rows without a grammar allow
  // every token. Empty when no row has a grammar. Applied after the biases.
  int bitmask_words = 0;
  std::vector<int32_t> bitmask;
  bool has_bitmask() const { return !bitmask.empty(); }
};

// logits: [num_seqs, vocab] row-major fp32. Writes num_seqs token ids.
void sample_on_host(const float* logits, int64_t vocab, const SamplingBatch& batch, int32_t* out_tokens);

// One row: the token for these logits under these parameters (used by sample_on_host).
int32_t sample_row(const float* logits, int64_t vocab, float temperature, int top_k, float top_p, float min_p,
                   float uniform);

// The exact distribution sample_row draws from (vocab probabilities summing to 1; one-hot for
// greedy). For tests of every backend's sampler.
std::vector<double> sampling_distribution(const float* logits, int64_t vocab, float temperature, int top_k,
                                          float top_p, float min_p);

}  // namespace minivllm
