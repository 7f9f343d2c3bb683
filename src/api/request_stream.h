// RequestStream: what one request produces, handed from the engine thread to the thread that
// serves the request (an HTTP handler). The engine thread pushes; the consumer waits with a
// timeout, so it can also watch its client (a dropped connection) while nothing arrives.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/llm_engine.h"

namespace minivllm {

// New tokens of one choice, or its end (then `final` holds the whole output).
struct StreamEvent {
  int index = 0;  // the choice (0..n-1)
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprob> logprobs;  // one per token when the request asked for logprobs
  std::optional<RequestOutput> final;
};

class RequestStream {
 public:
  explicit RequestStream(int num_choices) : num_choices_(num_choices) {}

  // Engine thread. A final event for a choice that already ended is dropped (an abort racing the
  // natural end of a request), so every choice ends exactly once.
  void push(StreamEvent e);
  // Ends every choice that has not ended with `finish_reason` (and `error`): an abort, a shutdown,
  // or a step that failed.
  void end_all(const std::string& finish_reason, const std::string& error = "");

  // Consumer: everything pushed so far, waiting up to `timeout` when nothing is there yet.
  std::vector<StreamEvent> pop(std::chrono::milliseconds timeout);
  // Every choice has ended and the consumer has taken every event.
  bool drained() const;
  // Every choice has ended (events may still wait to be taken).
  bool ended() const;
  int num_choices() const { return num_choices_; }

 private:
  const int num_choices_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::vector<int> ended_choices_;
};

}  // namespace minivllm
