#include "server/tool_parsers/tool_call_stream.h"

#include <algorithm>

#include "server/tool_parsers/json_scan.h"

namespace minivllm::server {

ToolCallStream::ToolCallStream(std::unique_ptr<ToolCallSyntax> syntax, bool parallel, bool stream_arguments)
    : syntax_(std::move(syntax)), parallel_(parallel), stream_arguments_(stream_arguments) {}

void ToolCallStream::take_content(size_t end, ToolStreamDelta& d) {
  if (end > content_sent_) d.content.append(text_, content_sent_, end - content_sent_);
  content_sent_ = std::max(content_sent_, end);
}

void ToolCallStream::take_calls(bool final, ToolStreamDelta& d) {
  auto calls = syntax_->parse_calls(std::string_view(text_).substr(region_), final);
  if (!calls) {
    // A reply that does not read as calls is content, whole, unless calls already went out.
    if (final && calls_sent_ == 0 && !open_named_) {
      content_sent_ = region_;
      take_content(text_.size(), d);
    }
    if (!final) take_partial(d);
    return;
  }
  const size_t limit = parallel_ ? calls->size() : std::min<size_t>(calls->size(), 1);
  for (; calls_sent_ < limit; ++calls_sent_) {
    const ParsedToolCall& c = (*calls)[calls_sent_];
    ToolCallPiece piece{static_cast<int>(calls_sent_), open_named_ ? "" : c.name, c.arguments};
    // Begun: the rest of its arguments (what went out is their prefix: both are the model's text
    // less its whitespace, json_scan.h; but for an object that gives both "parameters" and, later,
    // "arguments", whose first pieces were the former's).
    if (open_named_) piece.arguments = c.arguments.substr(std::min(open_arguments_sent_, c.arguments.size()));
    open_named_ = false;
    open_arguments_sent_ = 0;
    if (!piece.name.empty() || !piece.arguments.empty()) d.calls.push_back(std::move(piece));
  }
  if (!final) take_partial(d);
}

// The call being written after the complete ones: its first piece, then what more of its
// arguments the model wrote.
void ToolCallStream::take_partial(ToolStreamDelta& d) {
  if (!stream_arguments_ || (!parallel_ && calls_sent_ > 0)) return;
  auto call = syntax_->partial_call(std::string_view(text_).substr(region_), calls_sent_);
  if (!call) return;
  const std::string arguments = compact_json(call->arguments);
  ToolCallPiece piece{static_cast<int>(calls_sent_), open_named_ ? "" : call->name, ""};
  if (arguments.size() > open_arguments_sent_) piece.arguments = arguments.substr(open_arguments_sent_);
  open_named_ = true;
  open_arguments_sent_ = std::max(open_arguments_sent_, arguments.size());
  if (!piece.name.empty() || !piece.arguments.empty()) d.calls.push_back(std::move(piece));
}

// Sets region_ when the calls' opening is in text_; else hands out the content that cannot be the
// start of one.
void ToolCallStream::find_region() {
  const char lead = syntax_->leading_char();
  if (lead != 0 && !leading_decided_) {
    const size_t first = skip_space(text_);
    if (first == text_.size()) return;  // only space so far: it may still open the calls
    leading_decided_ = true;
    if (text_[first] == lead) {
      content_sent_ = first;  // the space before the calls is dropped
      region_ = first;
      return;
    }
  }
  size_t found = std::string::npos;
  for (std::string_view m : syntax_->markers()) {
    const size_t from = content_sent_ >= m.size() ? content_sent_ - m.size() + 1 : 0;
    const size_t at = text_.find(m, from);
    if (at != std::string::npos) found = std::min(found, at);
  }
  if (found != std::string::npos) {
    region_ = found;
    return;
  }
  // No marker yet: everything but a tail that is a proper prefix of a marker is content.
  size_t held = text_.size();
  for (std::string_view m : syntax_->markers()) {
    for (size_t len = std::min(m.size() - 1, text_.size()); len > 0; --len) {
      if (std::string_view(text_).substr(text_.size() - len) == m.substr(0, len)) {
        held = std::min(held, text_.size() - len);
        break;
      }
    }
  }
  content_end_ = held;
}

ToolStreamDelta ToolCallStream::feed(std::string_view text) {
  ToolStreamDelta d;
  text_.append(text);
  if (region_ == std::string::npos) {
    content_end_ = content_sent_;
    find_region();
    if (region_ == std::string::npos) {
      take_content(content_end_, d);
      return d;
    }
    take_content(region_, d);
  }
  take_calls(/*final=*/false, d);
  return d;
}

ToolStreamDelta ToolCallStream::finish() {
  ToolStreamDelta d;
  if (region_ == std::string::npos) {
    take_content(text_.size(), d);
    return d;
  }
  take_calls(/*final=*/true, d);
  return d;
}

}  // namespace minivllm::server
