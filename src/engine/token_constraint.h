// TokenConstraint: one sequence's grammar state, as the engine sees it (no grammar engine here:
// src/structured/ implements it with xgrammar). build_step_input asks it for the row's bitmask of
// allowed next tokens; Scheduler::resolve feeds it each sampled token. Rank 0 only.
#pragma once

#include <cstdint>

namespace minivllm {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // 32-bit words of one bitmask row: ceil(model vocabulary / 32).
  virtual int bitmask_words() const = 0;
  // The tokens allowed next, as bits (token v is bit v % 32 of word v / 32; set: allowed).
  virtual void fill_bitmask(int32_t* words) = 0;
  // The token sampled under the last mask. False when the grammar rejects it (it was sampled
  // without the mask), which ends the sequence.
  virtual bool accept(int32_t token) = 0;
  // Takes back the last `num_tokens` accepted tokens (a sequence that loses tokens).
  virtual void rollback(int num_tokens) = 0;
  // The grammar is complete and has taken its stop token: nothing may follow.
  virtual bool is_terminated() const = 0;
};

}  // namespace minivllm
