// Scheduler: prefill-first batching, decode with preemption from the back, stop conditions.
#include "engine/scheduler.h"

#include <algorithm>

#include "common/check.h"

namespace minivllm {

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config),
      max_sequence_length_(0),
      block_manager_(config.num_kvcache_blocks, config.block_size) {
  MINIVLLM_CHECK_GE(config.max_num_seqs, 1) << "max_num_seqs must be >= 1";
  MINIVLLM_CHECK_GE(config.max_model_length, 1) << "max_model_length must be >= 1";
  // Without chunked prefill a sequence (a preempted one too) is prefilled in a single step.
  MINIVLLM_CHECK_GE(config.max_num_batched_tokens, config.max_model_length)
      << "max_num_batched_tokens must be >= max_model_length: a whole sequence is prefilled in one step";
  const int64_t cache_tokens = static_cast<int64_t>(config.num_kvcache_blocks) * config.block_size;
  max_sequence_length_ = static_cast<int>(std::min<int64_t>(config.max_model_length, cache_tokens));
  for (int slot = config.max_num_seqs - 1; slot >= 0; --slot) free_slots_.push_back(slot);
}

void Scheduler::take_slot(Sequence& seq) {
  MINIVLLM_CHECK(!free_slots_.empty()) << "more than max_num_seqs " << config_.max_num_seqs << " running";
  seq.slot = free_slots_.back();
  free_slots_.pop_back();
}

void Scheduler::release_slot(Sequence& seq) {
  if (seq.slot < 0) return;
  free_slots_.push_back(seq.slot);
  seq.slot = -1;
}

void Scheduler::add(std::shared_ptr<Sequence> seq) {
  MINIVLLM_CHECK(seq != nullptr) << "null sequence";
  MINIVLLM_CHECK(seq->status == SequenceStatus::kWaiting && seq->block_table.empty())
      << "sequence " << seq->seq_id() << " was already scheduled";
  MINIVLLM_CHECK_EQ(seq->block_size(), config_.block_size) << "sequence " << seq->seq_id() << " block_size";
  MINIVLLM_CHECK_GE(seq->num_tokens(), 1) << "sequence " << seq->seq_id() << " has an empty prompt";
  MINIVLLM_CHECK(seq->num_tokens() <= config_.max_model_length)
      << "sequence " << seq->seq_id() << ": prompt of " << seq->num_tokens()
      << " tokens is longer than max_model_length " << config_.max_model_length;
  MINIVLLM_CHECK(seq->num_tokens() <= max_sequence_length_)
      << "sequence " << seq->seq_id() << ": prompt of " << seq->num_tokens() << " tokens needs " << seq->num_blocks()
      << " KV blocks but the whole cache has " << config_.num_kvcache_blocks << " blocks of " << config_.block_size
      << " tokens";
  waiting_.push_back(std::move(seq));
}

ScheduledBatch Scheduler::schedule() {
  ScheduledBatch batch = schedule_prefill();
  if (!batch.empty()) return batch;
  return schedule_decode();
}

ScheduledBatch Scheduler::schedule_prefill() {
  ScheduledBatch batch;
  batch.is_prefill = true;
  while (!waiting_.empty() && num_running() < config_.max_num_seqs) {
    Sequence& seq = *waiting_.front();
    const int uncached = seq.num_tokens() - block_manager_.num_cached_tokens_if_allocated(seq);
    if (batch.num_tokens + uncached > config_.max_num_batched_tokens || !block_manager_.can_allocate(seq)) break;
    block_manager_.allocate(seq);
    MINIVLLM_CHECK_EQ(seq.num_tokens() - seq.num_cached_tokens, uncached) << "sequence " << seq.seq_id();
    seq.status = SequenceStatus::kRunning;
    take_slot(seq);
    batch.num_tokens += uncached;
    batch.seqs.push_back(&seq);
    batch.owners.push_back(waiting_.front());
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return batch;
}

ScheduledBatch Scheduler::schedule_decode() {
  ScheduledBatch batch;
  const size_t budget = static_cast<size_t>(std::min(config_.max_num_seqs, config_.max_num_batched_tokens));
  std::vector<std::shared_ptr<Sequence>> scheduled;
  while (!running_.empty() && scheduled.size() < budget) {
    std::shared_ptr<Sequence> seq = std::move(running_.front());
    running_.pop_front();
    bool fits = true;
    while (!block_manager_.can_append(*seq)) {
      if (running_.empty()) {  // nobody left to make room: it yields its own blocks
        preempt(std::move(seq));
        fits = false;
        break;
      }
      preempt(std::move(running_.back()));
      running_.pop_back();
    }
    if (!fits) continue;  // seq was the last running one, the loop ends
    block_manager_.may_append(*seq);
    batch.seqs.push_back(seq.get());
    scheduled.push_back(std::move(seq));
  }
  running_.insert(running_.begin(), scheduled.begin(), scheduled.end());
  batch.owners = std::move(scheduled);
  batch.num_tokens = static_cast<int>(batch.seqs.size());
  // A sequence never needs more than the whole cache, so a lone one always fits.
  MINIVLLM_CHECK(!batch.empty() || is_finished())
      << "nothing scheduled with " << num_waiting() << " waiting and " << num_running() << " running";
  return batch;
}

void Scheduler::preempt(std::shared_ptr<Sequence> seq) {
  ++num_preemptions_;
  block_manager_.deallocate(*seq);
  release_slot(*seq);
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_front(std::move(seq));
}

FinishReason Scheduler::stop_reason(const Sequence& seq, int32_t token_id, bool stop_string) const {
  const SamplingParams& params = seq.params();
  auto contains = [token_id](const std::vector<int64_t>& ids) {
    return std::find(ids.begin(), ids.end(), static_cast<int64_t>(token_id)) != ids.end();
  };
  if (!params.ignore_eos && contains(config_.eos_token_ids)) return FinishReason::kStop;
  if (contains(params.stop_token_ids)) return FinishReason::kStop;
  if (stop_string) return FinishReason::kStop;
  if (seq.num_completion_tokens() >= params.max_tokens) return FinishReason::kLength;
  if (seq.num_tokens() >= max_sequence_length_) return FinishReason::kLength;
  return FinishReason::kNone;
}

std::vector<std::shared_ptr<Sequence>> Scheduler::postprocess(const std::vector<Sequence*>& seqs,
                                                              const std::vector<int32_t>& token_ids,
                                                              const StopStringCheck& found_stop_string) {
  MINIVLLM_CHECK_EQ(seqs.size(), token_ids.size()) << "one sampled token per scheduled sequence";
  block_manager_.commit_hashes();
  std::vector<std::shared_ptr<Sequence>> finished;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence* seq = seqs[i];
    if (seq->status != SequenceStatus::kRunning) continue;  // aborted or finished since scheduling
    seq->append_token(token_ids[i]);
    const bool stop_string = found_stop_string && found_stop_string(*seq);
    const FinishReason reason = stop_reason(*seq, token_ids[i], stop_string);
    if (reason == FinishReason::kNone) continue;
    std::shared_ptr<Sequence> owned = remove(seq);
    MINIVLLM_CHECK(owned != nullptr) << "sequence " << seq->seq_id() << " is running but not queued";
    mark_finished(*owned, reason);
    finished.push_back(std::move(owned));
  }
  return finished;
}

std::shared_ptr<Sequence> Scheduler::remove(const Sequence* seq) {
  for (auto* queue : {&running_, &waiting_}) {
    auto it = std::find_if(queue->begin(), queue->end(), [seq](const auto& s) { return s.get() == seq; });
    if (it != queue->end()) {
      std::shared_ptr<Sequence> owned = std::move(*it);
      queue->erase(it);
      return owned;
    }
  }
  return nullptr;
}

std::vector<std::shared_ptr<Sequence>> Scheduler::fail(const std::vector<Sequence*>& seqs) {
  block_manager_.discard_hashes();
  std::vector<std::shared_ptr<Sequence>> failed;
  for (Sequence* seq : seqs) {
    if (std::shared_ptr<Sequence> owned = finish(seq, FinishReason::kError)) failed.push_back(std::move(owned));
  }
  return failed;
}

void Scheduler::mark_finished(Sequence& seq, FinishReason reason) {
  if (!seq.block_table.empty()) block_manager_.deallocate(seq);
  release_slot(seq);
  seq.status = SequenceStatus::kFinished;
  seq.finish_reason = reason;
}

std::shared_ptr<Sequence> Scheduler::abort(int64_t seq_id) {
  for (auto* queue : {&running_, &waiting_}) {
    auto it = std::find_if(queue->begin(), queue->end(), [seq_id](const auto& s) { return s->seq_id() == seq_id; });
    if (it != queue->end()) {
      std::shared_ptr<Sequence> owned = std::move(*it);
      queue->erase(it);
      mark_finished(*owned, FinishReason::kAbort);
      return owned;
    }
  }
  return nullptr;
}

std::shared_ptr<Sequence> Scheduler::finish(Sequence* seq, FinishReason reason) {
  MINIVLLM_CHECK(seq != nullptr) << "null sequence";
  std::shared_ptr<Sequence> owned = remove(seq);
  if (owned) mark_finished(*owned, reason);  // already finished sequences are left as they are
  return owned;
}

}  // namespace minivllm
