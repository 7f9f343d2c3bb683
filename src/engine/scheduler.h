// Scheduler: the waiting and running queues, the per-step budgets and preemption (seeds: Scheduler).
// Each step is either one prefill batch (new or preempted sequences) or one decode batch (one
// token for each running sequence). Preemption is by recomputation: blocks are freed and the
// sequence is prefilled again later (its prefix may still be cached).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace minivllm {

struct SchedulerConfig {
  int max_num_seqs = 256;              // sequences running at once (the decode batch bound)
  int max_num_batched_tokens = 16384;  // tokens computed in one step
  int num_kvcache_blocks = 0;
  int block_size = 256;
  int max_model_length = 4096;  // prompt + completion
  std::vector<int64_t> eos_token_ids;
};

struct ScheduledBatch {
  std::vector<Sequence*> seqs;
  bool is_prefill = false;
  int num_tokens = 0;  // tokens computed this step (prefill: uncached prompt tokens)
  // Keeps seqs alive while the batch lives, even if one is aborted before postprocess().
  std::vector<std::shared_ptr<Sequence>> owners;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Queues a new sequence. Throws an Error naming the lengths when it could never be scheduled
  // (prompt longer than max_sequence_length()), or when it is malformed.
  void add(std::shared_ptr<Sequence> seq);
  bool is_finished() const { return waiting_.empty() && running_.empty(); }

  // The next batch: prefill when any waiting sequence fits, else decode. Empty when idle.
  ScheduledBatch schedule();
  // The step succeeded: registers the blocks it filled in the prefix cache, appends one sampled
  // token per scheduled sequence, finishes those that stop, frees their blocks and returns them.
  // Every finish decision is made here (stop_reason): eos, stop token ids, a stop string (when
  // `found_stop_string(seq)`, called after the append, says the text now holds one), max_tokens
  // and the length limit.
  using StopStringCheck = std::function<bool(Sequence&)>;
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
  ScheduledBatch schedule_prefill();
  ScheduledBatch schedule_decode();
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
