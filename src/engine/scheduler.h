// Scheduler: the waiting and running queues, the per-step budgets and preemption (seeds: Scheduler).
// With chunked prefill (the default) a step first gives each running, prefilled sequence its one
// decode token, then fills the rest of max_num_batched_tokens with prefill chunks: the partly
// prefilled running sequences first, then waiting ones as they are admitted. Without it, each step
// is either one prefill batch of whole prompts or one decode batch. Preemption is by
// recomputation: blocks are freed and the sequence is prefilled again later (its prefix may still
// be cached).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "engine/step_input.h"

namespace minivllm {

struct SchedulerConfig {
  int max_num_seqs = 256;              // sequences running at once (the decode batch bound)
  int max_num_batched_tokens = 16384;  // tokens computed in one step
  int num_kvcache_blocks = 0;
  int block_size = 256;
  int max_model_length = 4096;  // prompt + completion
  // Prompts longer than the token budget prefilled over several steps, sharing them with decodes.
  // Off: whole prompts in prefill-only steps (max_num_batched_tokens >= max_model_length).
  bool enable_chunked_prefill = true;
  std::vector<int64_t> eos_token_ids;
  // Every layer slides over this many keys (Mistral's sliding_window): the blocks before every
  // running sequence's window are released (BlockManager::release_out_of_window). 0: some layer
  // sees every key (full attention, Gemma 3's global layers), every block is kept.
  int sliding_window = 0;
};

struct ScheduledBatch {
  // Each computes its tokens [num_computed_tokens, + num_new_tokens); those whose span ends at
  // their last token sample (Sequence::samples()). Decodes come first in a mixed batch.
  std::vector<Sequence*> seqs;
  // Runs through the varlen (prefill) path: some row is a prefill chunk. False: every row is one
  // decode token, and the runner may replay a decode graph.
  bool is_prefill = false;
  int num_tokens = 0;  // tokens computed this step
  // Keeps seqs alive while the batch lives, even if one is aborted before postprocess().
  std::vector<std::shared_ptr<Sequence>> owners;
  bool empty() const { return seqs.empty(); }

  // Set by Scheduler::advance (the step was launched): sequence i's span [span_begin[i],
  // span_begin[i] + span_len[i]) and whether it samples, in which case its token at the span's end
  // is a placeholder until resolve().
  std::vector<int32_t> span_begin, span_len;
  std::vector<uint8_t> sampled;
  bool advanced = false;
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Queues a new sequence. Throws an Error naming the lengths when it could never be scheduled
  // (prompt longer than max_sequence_length()), or when it is malformed.
  void add(std::shared_ptr<Sequence> seq);
  bool is_finished() const { return waiting_.empty() && running_.empty(); }

  // The next batch (see the top of this file). Empty when idle.
  ScheduledBatch schedule();
  // A step is launched, then advanced, then resolved; postprocess() is the two at once.
  // advance: the batch was handed to the runner. Each sequence's computed tokens move past its span
  // and each one that samples gets a placeholder (pending_token(row), engine/step_input.h) as its
  // next token, so the next step can be scheduled, and run, before this one's tokens are known
  // (async scheduling).
  void advance(ScheduledBatch& batch);
  // resolve: the step succeeded. The placeholders become the sampled tokens (token_ids: one per
  // sequence that sampled, in batch order), the blocks the step filled are hashed and registered in
  // the prefix cache, and the sequences that stop finish (blocks freed) and are returned. A
  // sequence preempted since the launch gets its token too (and may finish while waiting); an
  // aborted one is skipped.
  // Every finish decision is made here (stop_reason): eos, stop token ids, a stop string (when
  // `found_stop_string(seq)`, called after the token is in place, says the text now holds one),
  // max_tokens and the length limit.
  using StopStringCheck = std::function<bool(Sequence&)>;
  std::vector<std::shared_ptr<Sequence>> resolve(const ScheduledBatch& batch, const std::vector<int32_t>& token_ids,
                                                 const StopStringCheck& found_stop_string = {});
  std::vector<std::shared_ptr<Sequence>> postprocess(const std::vector<Sequence*>& seqs,
                                                     const std::vector<int32_t>& token_ids,
                                                     const StopStringCheck& found_stop_string = {});
  // The step failed: its sequences finish with FinishReason::kError (blocks freed, none of the
  // blocks it filled ever found by the prefix cache) and are returned.
  std::vector<std::shared_ptr<Sequence>> fail(const std::vector<Sequence*>& seqs);
  // Removes a waiting or running sequence (FinishReason::kAbort). nullptr when unknown or done.
  std::shared_ptr<Sequence> abort(int64_t seq_id);
  // Finishes a waiting or running sequence for a reason found outside (e.g. a stop string) and
  // returns it; nullptr when it was not queued (already finished).
  std::shared_ptr<Sequence> finish(Sequence* seq, FinishReason reason);

  // The longest a sequence may grow (prompt + completion): max_model_length, or the whole KV cache
  // when that is smaller. Reaching it finishes a sequence with FinishReason::kLength.
  int max_sequence_length() const { return max_sequence_length_; }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const BlockManager& block_manager() const { return block_manager_; }
  BlockManager& block_manager() { return block_manager_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  ScheduledBatch schedule_chunked();
  ScheduledBatch schedule_prefill();
  ScheduledBatch schedule_decode();
  // Allocates the front waiting sequence's blocks, takes a slot and moves it to running_; false
  // when its blocks do not fit now.
  bool admit_front();
  // Adds seq to the batch computing `num_new` tokens from its computed ones.
  void schedule_tokens(const std::shared_ptr<Sequence>& seq, int num_new, ScheduledBatch& batch);
  void preempt(std::shared_ptr<Sequence> seq);
  FinishReason stop_reason(const Sequence& seq, int32_t token_id, bool stop_string) const;
  void take_slot(Sequence& seq);
  void release_slot(Sequence& seq);
  // Removes seq from waiting_ or running_; nullptr when it is in neither.
  std::shared_ptr<Sequence> remove(const Sequence* seq);
  void mark_finished(Sequence& seq, FinishReason reason);

  SchedulerConfig config_;
  int max_sequence_length_;
  BlockManager block_manager_;
  std::deque<std::shared_ptr<Sequence>> waiting_;
  std::deque<std::shared_ptr<Sequence>> running_;
  std::vector<int> free_slots_;  // rows of per-sequence runner state not held by a running sequence
  int64_t num_preemptions_ = 0;
};

}  // namespace minivllm
