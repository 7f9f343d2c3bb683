// ToolCallStream: a reply's text, as it arrives, split into content and tool calls by one
// ToolCallSyntax. Content streams until the calls begin (text that may be the start of a marker
// is held back until it is not); each call is handed out once it is complete, so a client gets
// OpenAI's delta.tool_calls a call at a time. A whole reply is feed() then finish(), so a whole
// response and a stream split the same text the same way.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {

struct ToolStreamDelta {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

class ToolCallStream {
 public:
  // `parallel` false (parallel_tool_calls): only the first call is handed out.
  ToolCallStream(std::unique_ptr<ToolCallSyntax> syntax, bool parallel);

  ToolStreamDelta feed(std::string_view text);
  // The reply ended: what was held back. Calls that do not read (a reply cut by max_tokens inside
  // one) are content, unless calls were already handed out.
  ToolStreamDelta finish();
  int num_calls() const { return static_cast<int>(calls_sent_); }

 private:
  void find_region();
  void take_calls(bool final, ToolStreamDelta& d);
  void take_content(size_t end, ToolStreamDelta& d);

  std::unique_ptr<ToolCallSyntax> syntax_;
  bool parallel_;
  std::string text_;
  size_t content_sent_ = 0;                     // bytes of text_ handed out (or dropped) as content
  size_t region_ = std::string::npos;           // where the calls begin, once seen
  size_t calls_sent_ = 0;
  bool leading_decided_ = false;                // the first non-space character was seen
  size_t content_end_ = 0;                      // find_region: content certain up to here
};

}  // namespace minivllm::server
