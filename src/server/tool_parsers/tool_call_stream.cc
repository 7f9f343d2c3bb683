#include "server/tool_parsers/tool_call_stream.h"

#include <algorithm>

#include "server/tool_parsers/json_scan.h"

namespace minivllm::server {

ToolCallStream::ToolCallStream(std::unique_ptr<ToolCallSyntax> syntax, bool parallel)
    : syntax_(std::move(syntax)), parallel_(parallel) {}

void ToolCallStream::take_content(size_t end, ToolStreamDelta& d) {
  if (end > content_sent_) d.content.append(text_, content_sent_, end - content_sent_);
  content_sent_ = std::max(content_sent_, end);
}

void ToolCallStream::take_calls(bool final, ToolStreamDelta& d) {
  auto calls = syntax_->parse_calls(std::string_view(text_).substr(region_), final);
  if (!calls) {
    // A reply that does not read as calls is content, whole, unless calls already went out.
    if (final && calls_sent_ == 0) {
      content_sent_ = region_;
      take_content(text_.size(), d);
    }
    return;
  }
  const size_t limit = parallel_ ? calls->size() : std::min<size_t>(calls->size(), 1);
  for (; calls_sent_ < limit; ++calls_sent_) d.calls.push_back((*calls)[calls_sent_]);
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
