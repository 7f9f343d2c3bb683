// Qwen3ReasoningStream: a Qwen3 reply's <think>...</think> apart from its answer, as vLLM's
// `--reasoning-parser qwen3` returns it (message.reasoning_content, delta.reasoning_content). A
// reply that opens with <think> reasons until </think>; one that does not (enable_thinking false:
// the template wrote an empty think block into the prompt) is all content. The newlines Qwen3
// writes around its thoughts and before its answer are dropped. A reply cut inside its thoughts
// is all reasoning, as it was streamed.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace minivllm::server {

// Whether Qwen3's template lets the model think: unless chat_template_kwargs.enable_thinking is
// false (the template then writes an empty think block into the prompt).
bool qwen3_thinking_enabled(const nlohmann::json& chat_template_kwargs);

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class Qwen3ReasoningStream {
 public:
  ReasoningDelta feed(std::string_view text);
  ReasoningDelta finish();

 private:
  enum class Phase { kStart, kThinking, kAnswerStart, kAnswer };
  void step(ReasoningDelta& d, bool final);

  Phase phase_ = Phase::kStart;
  std::string pending_;         // text not yet handed out
  bool sent_reasoning_ = false;  // some thought was handed out (its leading newlines are gone)
};

}  // namespace minivllm::server
