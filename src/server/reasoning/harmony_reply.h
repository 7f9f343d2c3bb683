// HarmonyReplyStream: a reply in OpenAI's harmony format (gpt-oss) split as vLLM's
// `--reasoning-parser openai_gptoss --tool-call-parser openai` split it. The reply is a run of
// messages, each "[role][ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>TYPE]<|message|>BODY"
// ended by <|end|> (and the next opened by <|start|>), <|call|> or <|return|> (the last two end the
// sequence, so their text is not in the reply). The first message's role is in the prompt (its
// generation prompt ends with <|start|>assistant). Routed by channel and recipient:
//   analysis                          -> reasoning_content (content when reasoning is off);
//   final, commentary with no recipient (a preamble the user sees) -> content;
//   a recipient functions.NAME        -> a tool call NAME whose arguments are the body (when tools
//                                        are parsed; else the body is content);
//   any other recipient (a built-in tool the system prompt did not offer) -> as analysis.
// The markers need the reply's special tokens in its text (the server detokenizes such a reply
// with them). A reply that does not open as harmony (no header first) is all content.
#pragma once

#include <string>
#include <string_view>

#include "server/tool_parsers/tool_call_stream.h"

namespace minivllm::server {

struct HarmonyDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallPiece> calls;
};

class HarmonyReplyStream {
 public:
  // `reasoning` false: analysis is content. `tools` false: no tool calls (their bodies are
  // content). `parallel` false: calls after the first are dropped. `stream_arguments`: a call's
  // name goes out as its body opens and its arguments as written (ToolCallStream's); else each
  // call whole once its message ends.
  HarmonyReplyStream(bool reasoning, bool tools, bool parallel, bool stream_arguments);

  HarmonyDelta feed(std::string_view text);
  HarmonyDelta finish();
  int num_calls() const { return num_calls_; }

 private:
  enum class Phase { kHeader, kBody, kBetween, kPlain };
  enum class Route { kReasoning, kContent, kCall, kDropped };
  void step(HarmonyDelta& d, bool final);
  bool read_header(bool first, bool final, HarmonyDelta& d);
  void body(std::string_view text, HarmonyDelta& d);
  void end_message(HarmonyDelta& d);

  bool reasoning_, tools_, parallel_, stream_arguments_;
  Phase phase_ = Phase::kHeader;
  bool first_message_ = true;  // the header being read is the reply's first (no role)
  std::string pending_;        // text not yet handed out
  Route route_ = Route::kContent;
  std::string call_name_;      // kCall: the function
  std::string call_body_;      // kCall: its body so far
  size_t call_sent_ = 0;       // kCall, streamed: bytes of compact arguments handed out
  bool call_open_ = false;     // kCall, streamed: the call's first piece went out
  int num_calls_ = 0;          // calls handed out (whole or begun)
};

}  // namespace minivllm::server
