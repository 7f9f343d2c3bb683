// Sequence: one request's tokens, its KV block table and its sampling state (seeds: Sequence).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/token_constraint.h"

namespace minivllm {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

// Why a sequence stopped: an eos / stop token / stop string ("stop"), max_tokens or the context
// limit ("length"), an abort, or a failed step ("error").
enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason r);

class Sequence {
 public:
  Sequence(int64_t seq_id, std::vector<int32_t> prompt_token_ids, SamplingParams params, int block_size);

  int64_t seq_id() const { return seq_id_; }
  const SamplingParams& params() const { return params_; }
  int block_size() const { return block_size_; }

  // Tokens: the prompt followed by the completion.
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int32_t last_token() const { return token_ids_.back(); }
  int num_tokens() const { return static_cast<int>(token_ids_.size()); }
  int num_prompt_tokens() const { return num_prompt_tokens_; }
  int num_completion_tokens() const { return num_tokens() - num_prompt_tokens_; }
  std::vector<int32_t> completion_token_ids() const;
  void append_token(int32_t token_id) { token_ids_.push_back(token_id); }
  // Async scheduling: the placeholder at `pos` becomes the token sampled for it.
  void set_token(int pos, int32_t token_id) { token_ids_.at(static_cast<size_t>(pos)) = token_id; }

  // KV blocks.
  int num_cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
  // Chunked prefill. Tokens whose KV is in the cache (prefix-cache hits, then every successful
  // step's tokens), and the tokens the step being built computes: positions
  // [num_computed_tokens, num_computed_tokens + num_new_tokens). Set by the Scheduler.
  int num_computed_tokens = 0;
  int num_new_tokens = 0;
  // The scheduled step computes the last token, so this row samples; a partial prefill chunk does not.
  bool samples() const { return num_new_tokens > 0 && num_computed_tokens + num_new_tokens == num_tokens(); }
  // False from (re)admission until a step that sampled it succeeded: the step that completes a
  // prefill rebuilds the penalties' count row, each later (decode) step adds one token to it.
  bool prefilled = false;
  std::vector<int32_t> block_table;
  int num_blocks() const { return (num_tokens() + block_size_ - 1) / block_size_; }
  int num_cached_blocks() const { return num_cached_tokens / block_size_; }
  int last_block_num_tokens() const { return num_tokens() - (num_blocks() - 1) * block_size_; }
  // Token ids of logical block i.
  std::vector<int32_t> block(int i) const;

  // While running: this sequence's row in the runner's per-sequence state (the penalties' token
  // counts), in [0, max_num_seqs); -1 otherwise. Set by the Scheduler.
  int slot = -1;

  // Structured outputs (rank 0): the grammar state, fed every sampled token by Scheduler::resolve;
  // null when unconstrained. A preempted sequence keeps its tokens (its KV is recomputed), so its
  // grammar state stays as it is; only a sequence that lost tokens would roll it back.
  std::shared_ptr<TokenConstraint> constraint;

  // Prompt logprobs (SamplingParams::prompt_logprobs; set by the engine on the one choice that
  // computes them, -1 on the others): entry j - 1 scores prompt token j, from position j - 1's
  // logits. build_step_input asks for each position once (prompt_logprobs_asked: the positions
  // [0, asked) went into a step), and the engine appends the results in order.
  int prompt_logprobs_top = -1;
  int prompt_logprobs_asked = 0;
  std::vector<TokenLogprob> prompt_logprobs;
  // SamplingParams::pooling: the last prompt token's final-normed hidden state, once its prefill ran.
  std::vector<float> embedding;
  // Its prefill must compute every prompt position, so it takes no prefix-cache hits.
  bool needs_prompt_logprobs() const { return prompt_logprobs_top >= 0 && prompt_logprobs_asked < num_prompt_tokens_ - 1; }

  SequenceStatus status = SequenceStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  bool is_finished() const { return status == SequenceStatus::kFinished; }

  // One uniform in [0, 1) from this sequence's own generator: seeded from params().seed when set,
  // so that a request's samples do not depend on what else is in the batch.
  float next_uniform();

 private:
  int64_t seq_id_;
  SamplingParams params_;
  int block_size_;
  int num_prompt_tokens_;
  std::vector<int32_t> token_ids_;
  std::mt19937_64 rng_;
};

}  // namespace minivllm
