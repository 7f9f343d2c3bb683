#include "api/choice_output.h"

#include <algorithm>

#include "api/llm_engine.h"

namespace minivllm {

ChoiceOutput::ChoiceOutput(std::shared_ptr<Sequence> seq, const Tokenizer* tokenizer,
                           const std::vector<int64_t>& eos_token_ids)
    : seq_(std::move(seq)), eos_token_ids_(eos_token_ids) {
  if (tokenizer != nullptr) {
    detok_ = std::make_unique<IncrementalDetokenizer>(*tokenizer, seq_->params().skip_special_tokens);
  }
}

void ChoiceOutput::note_prefill(int num_cached_tokens) {
  if (num_cached_tokens_ < 0) num_cached_tokens_ = std::min(num_cached_tokens, seq_->num_prompt_tokens());
}

bool ChoiceOutput::append(const TokenLogprob* logprob) {
  if (logprob != nullptr) logprobs_.push_back(*logprob);
  const auto& toks = seq_->token_ids();
  const size_t begin = seq_->num_prompt_tokens() + tokens_seen_;
  tokens_seen_ = toks.size() - seq_->num_prompt_tokens();
  if (!detok_ || stopped_) return stopped_;
  const SamplingParams& p = seq_->params();
  for (size_t i = begin; i < toks.size(); ++i) {
    // A token that ends the sequence (eos, a stop token id) adds no text, as in vLLM, unless asked.
    // (min_tokens keeps it from being sampled before it may end the sequence.)
    if (!p.include_stop_str_in_output && ends_sequence(p, eos_token_ids_, toks[i])) continue;
    const size_t search_from = text_.size();
    text_ += detok_->push(toks[i]);
    for (const std::string& s : p.stop) {
      const size_t from = search_from >= s.size() ? search_from - s.size() + 1 : 0;
      const size_t pos = text_.find(s, from);
      if (pos != std::string::npos) {
        text_.resize(p.include_stop_str_in_output ? pos + s.size() : pos);
        stopped_ = true;
        return true;
      }
    }
  }
  return false;
}

bool ChoiceOutput::take_delta(RequestDelta& d) {
  const bool finished = seq_->is_finished();
  if (finished && detok_ && !stopped_ && !flushed_) {
    text_ += detok_->flush();
    flushed_ = true;
  }
  size_t hold = 0;  // bytes that may yet begin a stop string
  if (!finished) {
    for (const std::string& s : seq_->params().stop) hold = std::max(hold, s.size() - 1);
  }
  const size_t ready = text_.size() > hold ? text_.size() - hold : 0;
  if (ready > text_streamed_) {
    d.text = text_.substr(text_streamed_, ready - text_streamed_);
    text_streamed_ = ready;
  }
  const std::vector<int32_t>& toks = seq_->token_ids();
  const size_t done = seq_->num_prompt_tokens() + tokens_streamed_;
  d.token_ids.assign(toks.begin() + static_cast<std::ptrdiff_t>(done), toks.end());
  tokens_streamed_ = toks.size() - seq_->num_prompt_tokens();
  d.logprobs.assign(logprobs_.begin() + static_cast<std::ptrdiff_t>(logprobs_streamed_), logprobs_.end());
  logprobs_streamed_ = logprobs_.size();
  return !d.token_ids.empty() || !d.text.empty();
}

void ChoiceOutput::fill_output(RequestOutput& o) const {
  const auto& toks = seq_->token_ids();
  o.prompt_token_ids.assign(toks.begin(), toks.begin() + seq_->num_prompt_tokens());
  o.token_ids = seq_->completion_token_ids();
  o.text = text_;
  o.finish_reason = finish_reason_name(seq_->finish_reason);
  o.logprobs = logprobs_;
  o.num_cached_tokens = std::max(num_cached_tokens_, 0);
}

}  // namespace minivllm
