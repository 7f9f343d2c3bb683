#include "engine/step_input.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "common/check.h"
#include "engine/sequence.h"
#include "engine/token_constraint.h"

namespace minivllm {
namespace {

constexpr uint32_t kMagic = 0x53544550;  // "STEP"

class Writer {
 public:
  template <typename T>
  void pod(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    pod<uint32_t>(static_cast<uint32_t>(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  template <typename T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> vec() {
    const size_t n = pod<uint32_t>();
    need(n * sizeof(T));
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), s_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  void need(size_t n) const {
    MINIVLLM_CHECK(pos_ + n <= s_.size()) << "StepInput image truncated at byte " << pos_ << " of " << s_.size();
  }
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

std::string StepInput::serialize() const {
  Writer w;
  w.pod(kMagic);
  w.pod<uint8_t>(is_prefill ? 1 : 0);
  w.pod<uint8_t>(needs_full_logits() ? 1 : 0);
  w.pod<int32_t>(block_size);
  w.pod<int32_t>(max_blocks_per_seq);
  w.pod<int32_t>(max_seqlen_q);
  w.pod<int32_t>(max_seqlen_k);
  for (const auto* v : {&input_ids, &positions, &slot_mapping, &cu_seqlens_q, &cu_seqlens_k, &last_indices,
                        &context_lens, &block_tables, &sampling.top_k, &prompt_logprob_rows}) {
    w.vec(*v);
  }
  for (const auto* v : {&sampling.temperature, &sampling.top_p, &sampling.min_p, &sampling.uniform}) w.vec(*v);
  return w.take();
}

StepInput StepInput::deserialize(const std::string& bytes) {
  Reader r(bytes);
  MINIVLLM_CHECK(r.pod<uint32_t>() == kMagic) << "not a StepInput image";
  StepInput s;
  s.is_prefill = r.pod<uint8_t>() != 0;
  s.full_logits = r.pod<uint8_t>() != 0;
  s.block_size = r.pod<int32_t>();
  s.max_blocks_per_seq = r.pod<int32_t>();
  s.max_seqlen_q = r.pod<int32_t>();
  s.max_seqlen_k = r.pod<int32_t>();
  for (auto* v : {&s.input_ids, &s.positions, &s.slot_mapping, &s.cu_seqlens_q, &s.cu_seqlens_k, &s.last_indices,
                  &s.context_lens, &s.block_tables, &s.sampling.top_k, &s.prompt_logprob_rows}) {
    *v = r.vec<int32_t>();
  }
  for (auto* v : {&s.sampling.temperature, &s.sampling.top_p, &s.sampling.min_p, &s.sampling.uniform}) {
    *v = r.vec<float>();
  }
  MINIVLLM_CHECK(r.done()) << "StepInput image has trailing bytes";
  return s;
}

bool StepInput::needs_full_logits() const {
  if (full_logits || defer_bitmask || sampling.has_penalties() || sampling.has_logprobs() || sampling.has_bias() ||
      sampling.has_bitmask()) {
    return true;
  }
  for (int r = 0; r < sampling.size(); ++r) {
    if (sampling.top_k[r] >= 1 || sampling.top_p[r] < 1.0f || sampling.min_p[r] > 0.0f) return true;
  }
  return false;
}

namespace {

// Only when some sampling row asks: a batch without penalties or logprobs carries none of these arrays.
void add_penalties_and_logprobs(const std::vector<Sequence*>& seqs, StepInput& s) {
  auto any = [&](auto pred) {
    return std::any_of(seqs.begin(), seqs.end(), [&](Sequence* q) { return pred(q->params()); });
  };
  if (any([](const SamplingParams& p) { return p.logprobs >= 0; })) {
    for (Sequence* seq : seqs) s.sampling.logprobs.push_back(seq->params().logprobs);
  }
  if (!any([](const SamplingParams& p) { return p.has_penalties(); })) return;
  s.count_offsets.push_back(0);
  for (Sequence* seq : seqs) {
    const SamplingParams& p = seq->params();
    s.sampling.presence_penalty.push_back(p.presence_penalty);
    s.sampling.frequency_penalty.push_back(p.frequency_penalty);
    s.sampling.repetition_penalty.push_back(p.repetition_penalty);
    const bool penalised = p.has_penalties();
    MINIVLLM_CHECK(!penalised || seq->slot >= 0) << "sequence " << seq->seq_id() << " has penalties but no slot";
    s.penalty_slots.push_back(penalised ? seq->slot : -1);
    if (penalised && !seq->prefilled) {  // completes a prefill: its counts row starts over
      s.count_tokens.insert(s.count_tokens.end(), seq->token_ids().begin(), seq->token_ids().end());
      s.count_num_prompt.push_back(seq->num_prompt_tokens());
    } else {
      s.count_num_prompt.push_back(0);
    }
    s.count_offsets.push_back(static_cast<int32_t>(s.count_tokens.size()));
  }
}

// Whether the completion so far ends with `prefix` (a multi-token bad word's tokens before its last).
bool completion_ends_with(const Sequence& seq, const std::vector<int32_t>& word, size_t prefix) {
  if (static_cast<size_t>(seq.num_completion_tokens()) < prefix) return false;
  const auto end = seq.token_ids().end();
  for (size_t i = 0; i < prefix; ++i) {
    const int32_t t = *(end - static_cast<std::ptrdiff_t>(prefix - i));
    // The engine builds a bad_words row only once the tokens before it are on the host.
    MINIVLLM_CHECK(!is_pending_token(t)) << "sequence " << seq.seq_id() << ": bad_words need its tokens on the host";
    if (t != word[i]) return false;
  }
  return true;
}

// One sampling row's sparse bias: logit_bias, then -inf (a ban) for the eos and stop ids while the
// completion is shorter than min_tokens, and for the last token of each bad word whose other
// tokens the completion ends with (vLLM's rules).
std::map<int32_t, float> row_bias(const Sequence& seq) {
  const SamplingParams& p = seq.params();
  std::map<int32_t, float> bias = p.logit_bias;
  constexpr float kBan = -std::numeric_limits<float>::infinity();
  if (seq.num_completion_tokens() < p.min_tokens) {
    for (int32_t id : p.min_tokens_banned_ids) bias[id] = kBan;
  }
  for (const std::vector<int32_t>& word : p.bad_words_token_ids) {
    if (completion_ends_with(seq, word, word.size() - 1)) bias[word.back()] = kBan;
  }
  return bias;
}

// Only when some sampling row has logit rules: other batches carry no bias arrays.
void add_logit_bias(const std::vector<Sequence*>& seqs, StepInput& s) {
  if (std::none_of(seqs.begin(), seqs.end(), [](Sequence* q) { return q->params().has_logit_rules(); })) return;
  SamplingBatch& b = s.sampling;
  b.bias_offsets.push_back(0);
  for (Sequence* seq : seqs) {
    for (const auto& [id, value] : row_bias(*seq)) {
      b.bias_ids.push_back(id);
      b.bias_values.push_back(value);
    }
    b.bias_offsets.push_back(static_cast<int32_t>(b.bias_ids.size()));
  }
}

// The span's positions p that score prompt token p + 1 and were not asked for by an earlier step
// (a sequence recomputed after a preemption asks for none twice). `first_row`: the span's first
// token row.
void add_prompt_logprob_rows(Sequence& seq, int seq_index, int first_row, StepInput& s) {
  if (!seq.needs_prompt_logprobs()) return;
  const int begin = seq.num_computed_tokens, end = std::min(begin + seq.num_new_tokens, seq.num_prompt_tokens() - 1);
  MINIVLLM_CHECK(begin <= seq.prompt_logprobs_asked)
      << "sequence " << seq.seq_id() << " skips prompt positions [" << seq.prompt_logprobs_asked << ", " << begin
      << ") whose logprobs are owed (a prefix-cache hit?)";
  for (int p = std::max(begin, seq.prompt_logprobs_asked); p < end; ++p) {
    s.prompt_logprob_rows.push_back(first_row + p - begin);
    s.prompt_logprob_targets.push_back(seq.token_ids()[static_cast<size_t>(p) + 1]);
    s.prompt_logprob_top.push_back(seq.prompt_logprobs_top);
    s.prompt_logprob_seqs.push_back(seq_index);
  }
  seq.prompt_logprobs_asked = std::max(seq.prompt_logprobs_asked, end);
}

}  // namespace

std::vector<int32_t> fill_token_bitmask(const std::vector<Sequence*>& seqs, int& words) {
  words = 0;
  auto constrained = std::find_if(seqs.begin(), seqs.end(), [](Sequence* q) { return q->constraint != nullptr; });
  if (constrained == seqs.end()) return {};
  words = (*constrained)->constraint->bitmask_words();
  std::vector<int32_t> mask(seqs.size() * static_cast<size_t>(words), -1);
  for (size_t r = 0; r < seqs.size(); ++r) {
    TokenConstraint* c = seqs[r]->constraint.get();
    // A finished sequence's grammar may have taken its stop token: it has no next mask.
    if (c == nullptr || seqs[r]->is_finished()) continue;
    MINIVLLM_CHECK_EQ(c->bitmask_words(), words) << "sequence " << seqs[r]->seq_id() << "'s grammar";
    c->fill_bitmask(mask.data() + r * static_cast<size_t>(words));
  }
  return mask;
}

StepInput build_step_input(const std::vector<Sequence*>& seqs, bool is_prefill, int max_blocks_per_seq,
                           bool draw_samples, bool defer_bitmask) {
  MINIVLLM_CHECK(!seqs.empty()) << "a step needs at least one sequence";
  StepInput s;
  s.is_prefill = is_prefill;
  s.block_size = seqs.front()->block_size();
  s.max_blocks_per_seq = max_blocks_per_seq;
  const size_t mb = static_cast<size_t>(max_blocks_per_seq);
  s.block_tables.assign(seqs.size() * mb, -1);
  if (is_prefill) {
    s.cu_seqlens_q.assign(1, 0);
    s.cu_seqlens_k.assign(1, 0);
  }
  std::vector<Sequence*> sampling;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& seq = *seqs[i];
    const int bs = s.block_size, begin = seq.num_computed_tokens, end = begin + seq.num_new_tokens;
    MINIVLLM_CHECK_EQ(seq.block_size(), bs) << "sequence " << seq.seq_id();
    MINIVLLM_CHECK(begin >= 0 && end > begin && end <= seq.num_tokens())
        << "sequence " << seq.seq_id() << ": tokens [" << begin << ", " << end << ") of " << seq.num_tokens();
    // Blocks are allocated up front for every token (BlockManager::allocate), a chunk's included.
    MINIVLLM_CHECK(static_cast<int>(seq.block_table.size()) == seq.num_blocks() && seq.block_table.size() <= mb)
        << "sequence " << seq.seq_id() << " has " << seq.block_table.size() << " blocks for " << seq.num_tokens()
        << " tokens (at most " << mb << ")";
    std::copy(seq.block_table.begin(), seq.block_table.end(), s.block_tables.begin() + i * mb);
    if (seq.samples()) sampling.push_back(seqs[i]);
    if (is_prefill) {
      for (int p = begin; p < end; ++p) {
        s.input_ids.push_back(seq.token_ids()[p]);
        s.positions.push_back(p);
        s.slot_mapping.push_back(seq.block_table[p / bs] * bs + p % bs);
      }
      add_prompt_logprob_rows(*seqs[i], static_cast<int>(i), s.cu_seqlens_q.back(), s);
      s.cu_seqlens_q.push_back(s.cu_seqlens_q.back() + end - begin);
      s.cu_seqlens_k.push_back(s.cu_seqlens_k.back() + end);
      if (seq.samples()) s.last_indices.push_back(s.cu_seqlens_q.back() - 1);
      if (seq.samples() && seq.params().pooling && !seq.prefilled) {
        s.pool_rows.push_back(s.cu_seqlens_q.back() - 1);
        s.pool_seqs.push_back(static_cast<int32_t>(i));
      }
      s.max_seqlen_q = std::max(s.max_seqlen_q, end - begin);
      s.max_seqlen_k = std::max(s.max_seqlen_k, end);
    } else {
      MINIVLLM_CHECK(end - begin == 1 && seq.samples())
          << "sequence " << seq.seq_id() << ": a decode step computes the last token alone";
      s.input_ids.push_back(seq.last_token());
      s.positions.push_back(begin);
      s.context_lens.push_back(end);
      s.slot_mapping.push_back(seq.block_table[begin / bs] * bs + begin % bs);
      s.max_seqlen_q = 1;
      s.max_seqlen_k = std::max(s.max_seqlen_k, end);
    }
  }
  // Sampling rows: rank 0 draws each one's uniform from its own generator, once per step.
  for (Sequence* seq : sampling) {
    const SamplingParams& p = seq->params();
    s.sampling.temperature.push_back(p.temperature);
    s.sampling.top_k.push_back(p.top_k);
    s.sampling.top_p.push_back(p.top_p);
    s.sampling.min_p.push_back(p.min_p);
    s.sampling.uniform.push_back(draw_samples ? seq->next_uniform() : 0.0f);
  }
  if (!sampling.empty()) {
    add_penalties_and_logprobs(sampling, s);
    add_logit_bias(sampling, s);
    const bool constrained =
        std::any_of(sampling.begin(), sampling.end(), [](Sequence* q) { return q->constraint != nullptr; });
    if (constrained && defer_bitmask) {
      s.defer_bitmask = true;
    } else if (constrained) {
      s.sampling.bitmask = fill_token_bitmask(sampling, s.sampling.bitmask_words);
    }
  }
  return s;
}

}  // namespace minivllm
