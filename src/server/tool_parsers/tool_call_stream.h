// ToolCallStream: a reply's text, as it arrives, split into content and tool calls by one
// ToolCallSyntax. Content streams until the calls begin (text that may be the start of a marker
// is held back until it is not). Calls go out as OpenAI's delta.tool_calls pieces: with
// `stream_arguments`, a call's first piece (its name) as soon as its arguments object opens, then
// its arguments text as the model writes it (whitespace between tokens dropped, so the pieces add
// up to the call's `arguments`); else each call whole once complete. A whole reply is feed() then
// finish() without stream_arguments, so that a reply cut inside a call is content, not half a call.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {

// A piece of call `index` (0-based, in the reply): the first piece of a call has its name (the id
// and type go with it), later pieces only more of its arguments.
struct ToolCallPiece {
  int index = 0;
  std::string name;
  std::string arguments;
  bool operator==(const ToolCallPiece&) const = default;
};

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallPiece> calls;
};

class ToolCallStream {
 public:
  // `parallel` false (parallel_tool_calls): only the first call is handed out.
  ToolCallStream(std::unique_ptr<ToolCallSyntax> syntax, bool parallel, bool stream_arguments = false);

  ToolStreamDelta feed(std::string_view text);
  // The reply ended: what was held back. Calls that do not read (a reply cut by max_tokens inside
  // one) are content, unless calls (or a piece of one) were already handed out.
  ToolStreamDelta finish();
  // Calls handed out, whole or begun.
  int num_calls() const { return static_cast<int>(calls_sent_) + (open_named_ ? 1 : 0); }

 private:
  void find_region();
  void take_calls(bool final, ToolStreamDelta& d);
  void take_partial(ToolStreamDelta& d);
  void take_content(size_t end, ToolStreamDelta& d);

  std::unique_ptr<ToolCallSyntax> syntax_;
  bool parallel_;
  std::string text_;
  size_t content_sent_ = 0;                     // bytes of text_ handed out (or dropped) as content
  size_t region_ = std::string::npos;           // where the calls begin, once seen
  size_t calls_sent_ = 0;                       // calls handed out whole (their last piece sent)
  bool stream_arguments_ = false;
  bool open_named_ = false;                     // call calls_sent_ has had its first piece
  size_t open_arguments_sent_ = 0;              // and this much of its compact arguments
  bool leading_decided_ = false;                // the first non-space character was seen
  size_t content_end_ = 0;                      // find_region: content certain up to here
};

}  // namespace minivllm::server
