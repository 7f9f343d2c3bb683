#include "server/chat_reply.h"

namespace minivllm::server {

void ReplyDelta::append(ReplyDelta more) {
  reasoning += more.reasoning;
  content += more.content;
  for (ToolCallPiece& c : more.calls) {
    if (!calls.empty() && calls.back().index == c.index) {
      calls.back().arguments += c.arguments;
    } else {
      calls.push_back(std::move(c));
    }
  }
}

ChatReplyParser::ChatReplyParser(bool reasoning, std::unique_ptr<ToolCallSyntax> tools, bool parallel_tool_calls,
                                 bool stream_arguments, bool thinking_open, ThinkTags think_tags) {
  if (reasoning) reasoning_.emplace(thinking_open, think_tags);
  if (tools) tools_.emplace(std::move(tools), parallel_tool_calls, stream_arguments);
}

void ChatReplyParser::answer(std::string_view text, ReplyDelta& d) {
  if (!tools_) {
    d.content.append(text);
    return;
  }
  ToolStreamDelta t = tools_->feed(text);
  d.content.append(t.content);
  for (ToolCallPiece& c : t.calls) d.calls.push_back(std::move(c));
}

namespace {

ReplyDelta from_harmony(HarmonyDelta h) {
  return ReplyDelta{std::move(h.reasoning), std::move(h.content), std::move(h.calls)};
}

}  // namespace

ReplyDelta ChatReplyParser::feed(std::string_view text) {
  if (harmony_) return from_harmony(harmony_->feed(text));
  ReplyDelta d;
  if (reasoning_) {
    ReasoningDelta r = reasoning_->feed(text);
    d.reasoning = std::move(r.reasoning);
    answer(r.content, d);
  } else {
    answer(text, d);
  }
  return d;
}

ReplyDelta ChatReplyParser::finish() {
  if (harmony_) return from_harmony(harmony_->finish());
  ReplyDelta d;
  if (reasoning_) {
    ReasoningDelta r = reasoning_->finish();
    d.reasoning = std::move(r.reasoning);
    answer(r.content, d);
  }
  if (tools_) {
    ToolStreamDelta t = tools_->finish();
    d.content.append(t.content);
    for (ToolCallPiece& c : t.calls) d.calls.push_back(std::move(c));
  }
  return d;
}

std::unique_ptr<ChatReplyParser> ReplyParsing::make(bool streaming) const {
  if (harmony) {
    return std::make_unique<ChatReplyParser>(
        HarmonyReplyStream(reasoning, choice != ToolChoice::kNone && (choice != ToolChoice::kAuto || syntax),
                           parallel, streaming));
  }
  std::unique_ptr<ToolCallSyntax> tools;
  if (choice == ToolChoice::kRequired) tools = make_required_tools_syntax();
  if (choice == ToolChoice::kNamed) tools = make_named_tool_syntax(named_function);
  if (choice == ToolChoice::kAuto && syntax) tools = make_tool_call_syntax(*syntax, this->tools);
  return std::make_unique<ChatReplyParser>(reasoning, std::move(tools), parallel, streaming, thinking_open,
                                           think_tags);
}

}  // namespace minivllm::server
