// Qwen3ReasoningStream: a Qwen3 reply's <think>...</think> apart from its answer, as vLLM's
// `--reasoning-parser qwen3` returns it (message.reasoning_content, delta.reasoning_content). A
// reply that opens with <think> reasons until </think>; one that does not (enable_thinking false:
// the template wrote an empty think block into the prompt) is all content, unless the prompt
// opened the block itself (`opened_in_prompt`: a template whose generation prompt ends with
// <think>, as DeepSeek-R1's distills, QwQ and Qwen3's thinking-only models have; vLLM's
// deepseek_r1 parser): then the reply reasons from its start (a <think> it repeats is dropped). The newlines Qwen3
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

// The tags around a model's thoughts: Qwen3's, DeepSeek-R1's and GLM's <think>...</think>, or
// Seed-OSS's <seed:think>...</seed:think> (vLLM's seed_oss reasoning parser).
struct ThinkTags {
  std::string_view open = "<think>";
  std::string_view close = "</think>";
  bool operator==(const ThinkTags&) const = default;
};
inline constexpr ThinkTags kSeedThinkTags{"<seed:think>", "</seed:think>"};

// The tags a chat template writes its model's thoughts in (Seed-OSS's when it closes a
// <seed:think> block, else <think>), and whether it writes them at all.
ThinkTags template_think_tags(std::string_view chat_template);
inline bool template_thinks(std::string_view chat_template, ThinkTags tags) {
  return chat_template.find(tags.close) != std::string_view::npos;
}

// Whether a prompt's text ends inside an open think block (its last non-space text is the open tag).
bool prompt_opens_think(std::string_view prompt_tail, ThinkTags tags = {});

class Qwen3ReasoningStream {
 public:
  explicit Qwen3ReasoningStream(bool opened_in_prompt = false, ThinkTags tags = {})
      : opened_in_prompt_(opened_in_prompt), tags_(tags) {}
  ReasoningDelta feed(std::string_view text);
  ReasoningDelta finish();

 private:
  enum class Phase { kStart, kThinking, kAnswerStart, kAnswer };
  void step(ReasoningDelta& d, bool final);

  bool opened_in_prompt_;
  ThinkTags tags_;
  Phase phase_ = Phase::kStart;
  std::string pending_;         // text not yet handed out
  bool sent_reasoning_ = false;  // some thought was handed out (its leading newlines are gone)
};

}  // namespace minivllm::server
