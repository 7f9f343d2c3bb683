// ChatReplyParser: one chat choice's text split as the server's parsers say: Qwen3's thoughts into
// reasoning_content (--reasoning-parser), then tool calls out of the answer (--tool-call-parser,
// or the forced JSON of tool_choice required / named); or a harmony reply (gpt-oss) split by its
// channels (reasoning/harmony_reply.h). Streams and whole responses use it alike: a whole reply is
// one feed() and finish().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/reasoning/harmony_reply.h"
#include "server/reasoning/qwen3_reasoning.h"
#include "server/tool_parsers/tool_call_stream.h"
#include "server/tool_request.h"

namespace minivllm::server {

struct ReplyDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallPiece> calls;  // appended: one piece per call, with its name and whole arguments
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
  // Joins `more` on; a piece of the call this one's last piece belongs to extends it.
  void append(ReplyDelta more);
};

class ChatReplyParser {
 public:
  // `tools` null: no tool calls are parsed. `stream_arguments`: ToolCallStream's. `thinking_open`:
  // the prompt opened a think block (Qwen3ReasoningStream's opened_in_prompt).
  ChatReplyParser(bool reasoning, std::unique_ptr<ToolCallSyntax> tools, bool parallel_tool_calls,
                  bool stream_arguments = false, bool thinking_open = false, ThinkTags think_tags = {});
  // A harmony reply: one stream does the reasoning and the calls.
  explicit ChatReplyParser(HarmonyReplyStream harmony) : harmony_(std::move(harmony)) {}

  ReplyDelta feed(std::string_view text);
  ReplyDelta finish();
  int num_calls() const { return harmony_ ? harmony_->num_calls() : tools_ ? tools_->num_calls() : 0; }

 private:
  void answer(std::string_view text, ReplyDelta& d);

  std::optional<Qwen3ReasoningStream> reasoning_;
  std::optional<ToolCallStream> tools_;
  std::optional<HarmonyReplyStream> harmony_;
};

// What a request's chat replies are parsed with: the server's parsers and the request's tools.
struct ReplyParsing {
  bool reasoning = false;                  // the reasoning parser is on
  bool harmony = false;                    // the model writes OpenAI's harmony format (gpt-oss)
  bool thinking_open = false;              // and the prompt opened a think block (prompt_opens_think)
  ThinkTags think_tags;                    // the model's (from its template)
  ToolChoice choice = ToolChoice::kNone;
  std::optional<ToolParserKind> syntax;    // the model's call syntax (auto); none: not parsed
  std::string named_function;              // kNamed
  nlohmann::json tools;                    // the request's, for a syntax that types values by them
  bool parallel = true;

  bool active() const { return reasoning || harmony || choice != ToolChoice::kNone; }
  // `streaming`: a stream's parser, which sends calls' arguments as they are written.
  std::unique_ptr<ChatReplyParser> make(bool streaming = false) const;
};

}  // namespace minivllm::server
