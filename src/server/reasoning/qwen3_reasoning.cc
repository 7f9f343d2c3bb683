#include "server/reasoning/qwen3_reasoning.h"

#include <algorithm>

namespace minivllm::server {

bool qwen3_thinking_enabled(const nlohmann::json& chat_template_kwargs) {
  if (!chat_template_kwargs.is_object()) return true;
  auto it = chat_template_kwargs.find("enable_thinking");
  return it == chat_template_kwargs.end() || !it->is_boolean() || it->get<bool>();  // the template tests `is false`
}
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t skip_newlines(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// The length of the longest tail of s that is a proper prefix of `tag`.
size_t partial_tag_tail(std::string_view s, std::string_view tag) {
  for (size_t len = std::min(tag.size() - 1, s.size()); len > 0; --len) {
    if (s.substr(s.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

}  // namespace

ThinkTags template_think_tags(std::string_view chat_template) {
  return template_thinks(chat_template, kSeedThinkTags) ? kSeedThinkTags : ThinkTags{};
}

bool prompt_opens_think(std::string_view prompt_tail, ThinkTags tags) {
  while (!prompt_tail.empty() && is_space(prompt_tail.back())) prompt_tail.remove_suffix(1);
  return prompt_tail.ends_with(tags.open);
}

void Qwen3ReasoningStream::step(ReasoningDelta& d, bool final) {
  const std::string_view kThink = tags_.open, kEndThink = tags_.close;
  if (phase_ == Phase::kStart) {
    const size_t first = skip_newlines(pending_);
    const std::string_view rest = std::string_view(pending_).substr(first);
    if (rest.starts_with(kThink)) {
      pending_.erase(0, first + kThink.size());
      phase_ = Phase::kThinking;
    } else if (!final && kThink.starts_with(rest)) {
      return;  // may still open with <think>
    } else {
      phase_ = opened_in_prompt_ ? Phase::kThinking : Phase::kAnswer;
    }
  }
  if (phase_ == Phase::kThinking) {
    const size_t end = pending_.find(kEndThink);
    if (end != std::string::npos) {
      std::string_view thought = std::string_view(pending_).substr(0, end);
      while (!thought.empty() && is_space(thought.back())) thought.remove_suffix(1);
      if (!sent_reasoning_) thought.remove_prefix(skip_newlines(thought));
      if (!thought.empty()) sent_reasoning_ = true;
      d.reasoning.append(thought);
      pending_.erase(0, end + kEndThink.size());
      phase_ = Phase::kAnswerStart;
    } else {
      // Hand out what cannot be the start of </think> or the newlines before it.
      size_t keep = final ? 0 : partial_tag_tail(pending_, kEndThink);
      while (!final && keep < pending_.size() && is_space(pending_[pending_.size() - keep - 1])) ++keep;
      std::string_view out = std::string_view(pending_).substr(0, pending_.size() - keep);
      if (!sent_reasoning_) out.remove_prefix(skip_newlines(out));
      if (!out.empty()) sent_reasoning_ = true;
      d.reasoning.append(out);
      pending_.erase(0, pending_.size() - keep);
      return;
    }
  }
  if (phase_ == Phase::kAnswerStart) {
    const size_t first = skip_newlines(pending_);
    pending_.erase(0, first);
    if (pending_.empty()) return;
    phase_ = Phase::kAnswer;
  }
  d.content.append(pending_);
  pending_.clear();
}

ReasoningDelta Qwen3ReasoningStream::feed(std::string_view text) {
  ReasoningDelta d;
  pending_.append(text);
  step(d, /*final=*/false);
  return d;
}

ReasoningDelta Qwen3ReasoningStream::finish() {
  ReasoningDelta d;
  step(d, /*final=*/true);
  return d;
}

}  // namespace minivllm::server
