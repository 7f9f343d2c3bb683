// Scheduler: chunked prefill mixed with decodes (or prefill-first batching of whole prompts),
// decode with preemption from the back, stop conditions.
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
  MINIVLLM_CHECK_GE(config.max_num_batched_tokens, 1) << "max_num_batched_tokens must be >= 1";
  // Without chunked prefill a sequence (a preempted one too) is prefilled in a single step.
  MINIVLLM_CHECK(config.enable_chunked_prefill || config.max_num_batched_tokens >= config.max_model_length)
      << "max_num_batched_tokens (" << config.max_num_batched_tokens << ") must be >= max_model_length ("
      << config.max_model_length << ") without chunked prefill: a whole sequence is prefilled in one step";
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
  if (config_.enable_chunked_prefill) return schedule_chunked();
  ScheduledBatch batch = schedule_prefill();
  if (!batch.empty()) return batch;
  return schedule_decode();
}

bool Scheduler::admit_front() {
  Sequence& seq = *waiting_.front();
  if (!block_manager_.can_allocate(seq)) return false;
  block_manager_.allocate(seq);
  seq.num_computed_tokens = seq.num_cached_tokens;
  seq.num_new_tokens = 0;
  seq.prefilled = false;
  seq.status = SequenceStatus::kRunning;
  take_slot(seq);
  running_.push_back(std::move(waiting_.front()));
  waiting_.pop_front();
  return true;
}

void Scheduler::schedule_tokens(const std::shared_ptr<Sequence>& seq, int num_new, ScheduledBatch& batch) {
  MINIVLLM_CHECK(num_new >= 1 && seq->num_computed_tokens + num_new <= seq->num_tokens())
      << "sequence " << seq->seq_id() << ": " << num_new << " new tokens after " << seq->num_computed_tokens << " of "
      << seq->num_tokens();
  seq->num_new_tokens = num_new;
  // A prefill chunk takes the varlen path; so does a pooled prompt of one token (the decode graphs
  // hand back no hidden state).
  if (num_new != 1 || !seq->samples() || (seq->params().pooling && !seq->prefilled)) batch.is_prefill = true;
  batch.num_tokens += num_new;
  batch.seqs.push_back(seq.get());
  batch.owners.push_back(seq);
}

// vLLM / nano-vllm style: decodes first (one token each, so a long prompt never stalls running
// streams for more than one chunk), then prefill chunks fill what is left of the token budget.
ScheduledBatch Scheduler::schedule_chunked() {
  ScheduledBatch batch;
  const int budget = config_.max_num_batched_tokens;
  bool preempted = false;
  for (size_t i = 0; i < running_.size() && batch.num_tokens < budget;) {
    if (!running_[i]->prefilled) {  // a partly prefilled sequence: its chunk comes below
      ++i;
      continue;
    }
    bool fits = true;
    while (!block_manager_.can_append(*running_[i])) {
      preempted = true;
      // The back is never one already scheduled (those are before i); when seq is the back,
      // nobody is left to make room and it yields its own blocks.
      fits = i + 1 < running_.size();
      preempt(std::move(running_.back()));
      running_.pop_back();
      if (!fits) break;
    }
    if (!fits) break;
    block_manager_.may_append(*running_[i]);
    schedule_tokens(running_[i], 1, batch);
    ++i;
  }
  for (const std::shared_ptr<Sequence>& seq : running_) {
    if (batch.num_tokens >= budget) break;
    if (seq->prefilled) continue;
    schedule_tokens(seq, std::min(seq->num_tokens() - seq->num_computed_tokens, budget - batch.num_tokens), batch);
  }
  // A step that had to preempt admits nobody: the blocks it freed go to the running sequences.
  while (!preempted && !waiting_.empty() && batch.num_tokens < budget && num_running() < config_.max_num_seqs) {
    if (!admit_front()) break;
    const std::shared_ptr<Sequence>& seq = running_.back();
    schedule_tokens(seq, std::min(seq->num_tokens() - seq->num_computed_tokens, budget - batch.num_tokens), batch);
  }
  // A sequence never needs more than the whole cache, so a lone one always fits.
  MINIVLLM_CHECK(!batch.empty() || is_finished())
      << "nothing scheduled with " << num_waiting() << " waiting and " << num_running() << " running";
  return batch;
}

// Without chunked prefill: whole prompts (their uncached tokens) while they fit the budget.
ScheduledBatch Scheduler::schedule_prefill() {
  ScheduledBatch batch;
  while (!waiting_.empty() && num_running() < config_.max_num_seqs) {
    Sequence& seq = *waiting_.front();
    const int uncached = seq.num_tokens() - block_manager_.num_cached_tokens_if_allocated(seq);
    if (batch.num_tokens + uncached > config_.max_num_batched_tokens || !admit_front()) break;
    MINIVLLM_CHECK_EQ(seq.num_tokens() - seq.num_computed_tokens, uncached) << "sequence " << seq.seq_id();
    schedule_tokens(running_.back(), uncached, batch);
  }
  batch.is_prefill = true;
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
    schedule_tokens(seq, 1, batch);
    scheduled.push_back(std::move(seq));
  }
  running_.insert(running_.begin(), scheduled.begin(), scheduled.end());
  // A sequence never needs more than the whole cache, so a lone one always fits.
  MINIVLLM_CHECK(!batch.empty() || is_finished())
      << "nothing scheduled with " << num_waiting() << " waiting and " << num_running() << " running";
  return batch;
}

void Scheduler::preempt(std::shared_ptr<Sequence> seq) {
  ++num_preemptions_;
  block_manager_.deallocate(*seq);
  release_slot(*seq);
  seq->num_computed_tokens = seq->num_new_tokens = 0;
  seq->prefilled = false;
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_front(std::move(seq));
}

FinishReason Scheduler::stop_reason(const Sequence& seq, int32_t token_id, bool stop_string) const {
  const SamplingParams& params = seq.params();
  if (ends_sequence(params, config_.eos_token_ids, token_id) || stop_string) return FinishReason::kStop;
  if (seq.num_completion_tokens() >= params.max_tokens) return FinishReason::kLength;
  if (seq.num_tokens() >= max_sequence_length_) return FinishReason::kLength;
  return FinishReason::kNone;
}

void Scheduler::advance(ScheduledBatch& batch) {
  MINIVLLM_CHECK(!batch.advanced) << "a step is advanced once";
  batch.advanced = true;
  const size_t n = batch.seqs.size();
  batch.span_begin.resize(n);
  batch.span_len.resize(n);
  batch.sampled.resize(n);
  int row = 0;
  for (size_t i = 0; i < n; ++i) {
    Sequence& seq = *batch.seqs[i];
    const bool samples = seq.samples();
    batch.span_begin[i] = seq.num_computed_tokens;
    batch.span_len[i] = seq.num_new_tokens;
    batch.sampled[i] = samples ? 1 : 0;
    const int r = samples ? row++ : -1;
    if (seq.status != SequenceStatus::kRunning) continue;  // aborted since scheduling
    seq.num_computed_tokens += seq.num_new_tokens;
    seq.num_new_tokens = 0;
    if (!samples) continue;  // a prefill chunk short of the prompt's end
    seq.prefilled = true;
    seq.append_token(pending_token(r));
  }
}

std::vector<std::shared_ptr<Sequence>> Scheduler::resolve(const ScheduledBatch& batch,
                                                          const std::vector<int32_t>& token_ids,
                                                          const StopStringCheck& found_stop_string) {
  MINIVLLM_CHECK(batch.advanced) << "resolve() takes an advanced step";
  const size_t n = batch.seqs.size();
  size_t num_sampling = 0;
  for (uint8_t s : batch.sampled) num_sampling += s;
  MINIVLLM_CHECK_EQ(num_sampling, token_ids.size()) << "one sampled token per sequence whose span ends the step";
  // The blocks this step filled, of the sequences that still hold them (a preempted or finished one
  // gave them up: their KV may have been overwritten since).
  for (size_t i = 0; i < n; ++i) {
    const Sequence& seq = *batch.seqs[i];
    if (seq.status != SequenceStatus::kRunning) continue;
    block_manager_.hash_filled_blocks(seq, batch.span_begin[i], batch.span_begin[i] + batch.span_len[i]);
  }
  block_manager_.commit_hashes();
  // Then the blocks no later query sees (a step scheduled since reads them before any reuse
  // writes them: the steps run in order).
  for (size_t i = 0; i < n; ++i) {
    Sequence& seq = *batch.seqs[i];
    if (seq.status != SequenceStatus::kRunning) continue;
    block_manager_.release_out_of_window(seq, config_.sliding_window, batch.span_begin[i] + batch.span_len[i]);
  }
  std::vector<std::shared_ptr<Sequence>> finished;
  size_t row = 0;
  for (size_t i = 0; i < n; ++i) {
    Sequence* seq = batch.seqs[i];
    if (!batch.sampled[i]) continue;
    const int32_t token = token_ids[row];
    const int32_t placeholder = pending_token(static_cast<int>(row));
    ++row;
    if (seq->is_finished()) continue;  // aborted since scheduling
    const int pos = batch.span_begin[i] + batch.span_len[i];
    MINIVLLM_CHECK(pos < seq->num_tokens() && seq->token_ids()[pos] == placeholder)
        << "sequence " << seq->seq_id() << ": no placeholder at position " << pos;
    seq->set_token(pos, token);
    const bool stop_string = found_stop_string && found_stop_string(*seq);
    FinishReason reason = stop_reason(*seq, token, stop_string);
    // The grammar takes the token (it was sampled under its mask); once it has taken its stop
    // token, or if it refuses one (sampled without the mask), nothing more may follow.
    if (seq->constraint && reason == FinishReason::kNone &&
        (!seq->constraint->accept(token) || seq->constraint->is_terminated())) {
      reason = FinishReason::kStop;
    }
    if (reason == FinishReason::kNone) continue;
    std::shared_ptr<Sequence> owned = remove(seq);
    MINIVLLM_CHECK(owned != nullptr) << "sequence " << seq->seq_id() << " is unfinished but not queued";
    mark_finished(*owned, reason);
    finished.push_back(std::move(owned));
  }
  return finished;
}

std::vector<std::shared_ptr<Sequence>> Scheduler::postprocess(const std::vector<Sequence*>& seqs,
                                                              const std::vector<int32_t>& token_ids,
                                                              const StopStringCheck& found_stop_string) {
  ScheduledBatch batch;
  batch.seqs = seqs;
  size_t num_sampling = 0;
  for (const Sequence* seq : seqs) num_sampling += seq->samples() ? 1 : 0;
  MINIVLLM_CHECK_EQ(num_sampling, token_ids.size()) << "one sampled token per sequence whose span ends the step";
  advance(batch);
  return resolve(batch, token_ids, found_stop_string);
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
