// ChoiceOutput: what the engine hands out for one choice of a request (seeds: the text side of
// postprocess). Turns the sequence's new tokens into text with the streaming detokenizer, finds
// stop strings (the Scheduler makes the finish decision, this only says whether one appeared),
// keeps the logprobs, and cuts deltas: new tokens, their logprobs, and text that can no longer
// become part of a stop string.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/sequence.h"
#include "tokenizer/tokenizer.h"

namespace minivllm {

struct RequestDelta;
struct RequestOutput;

class ChoiceOutput {
 public:
  // `tokenizer` may be null (token ids only; stop strings then need none). eos_token_ids: the
  // engine's, whose text (as a stop token id's) is left out unless include_stop_str_in_output.
  ChoiceOutput(std::shared_ptr<Sequence> seq, const Tokenizer* tokenizer,
               const std::vector<int64_t>& eos_token_ids = {});

  Sequence& seq() { return *seq_; }
  const Sequence& seq() const { return *seq_; }
  const std::shared_ptr<Sequence>& shared_seq() const { return seq_; }

  // After the Scheduler appended a token: its logprob (when asked for), its text; true when the
  // text now holds a stop string (cut there: the stop string is not returned).
  bool append(const TokenLogprob* logprob);
  // The prompt tokens the first prefill found in the prefix cache.
  void note_prefill(int num_cached_tokens);
  // What is new since the last delta (flushing the detokenizer once the sequence finished);
  // false when nothing is.
  bool take_delta(RequestDelta& d);
  void fill_output(RequestOutput& o) const;

 private:
  std::shared_ptr<Sequence> seq_;
  std::unique_ptr<IncrementalDetokenizer> detok_;
  std::vector<int64_t> eos_token_ids_;  // the engine's (ends_sequence)
  std::string text_;          // completion text so far (a stop string cut off)
  bool stopped_ = false;      // a stop string was found: no more text
  bool flushed_ = false;
  size_t tokens_seen_ = 0;    // completion tokens turned into text
  size_t text_streamed_ = 0;  // bytes of text_ handed out
  size_t tokens_streamed_ = 0;
  std::vector<TokenLogprob> logprobs_;
  size_t logprobs_streamed_ = 0;
  int num_cached_tokens_ = -1;
};

}  // namespace minivllm
