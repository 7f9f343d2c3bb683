#include "server/reasoning/harmony_reply.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "server/tool_parsers/json_scan.h"

namespace minivllm::server {

namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kFunctions = "functions.";
// Markers that end a message's body: its end, or (the model skipping <|end|>) the next header.
constexpr auto kBodyEnds = std::to_array<std::string_view>({kEnd, kCall, kReturn, kStart, kChannel});
// A header is a role, a channel, a recipient and a content type: this long, it is not a header.
constexpr size_t kMaxHeader = 512;

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Whether s and one of `options` agree as far as both go (s may become, or already is past, it).
template <size_t N>
bool agrees_with_one(std::string_view s, const std::array<std::string_view, N>& options) {
  for (std::string_view o : options) {
    const size_t n = std::min(s.size(), o.size());
    if (s.substr(0, n) == o.substr(0, n)) return true;
  }
  return false;
}

// How the reply's first header may begin (its role is in the prompt).
constexpr auto kFirstHeaderOpenings =
    std::to_array<std::string_view>({kChannel, kMessage, " to=", "to=", "<|constrain|>"});

// The first marker in s that ends a body: its offset (npos when none) and the marker.
std::pair<size_t, std::string_view> find_body_end(std::string_view s) {
  std::pair<size_t, std::string_view> best{std::string_view::npos, {}};
  for (std::string_view m : kBodyEnds) {
    const size_t p = s.find(m);
    if (p < best.first) best = {p, m};
  }
  return best;
}

// Bytes at the end of s that may begin a marker ending the body: held back until they do not.
size_t held_back(std::string_view s) {
  constexpr size_t kLongest = 11;  // <|channel|>
  for (size_t i = s.size() > kLongest ? s.size() - kLongest : 0; i < s.size(); ++i) {
    if (s[i] != '<') continue;
    const std::string_view tail = s.substr(i);
    for (std::string_view m : kBodyEnds) {
      if (tail.size() < m.size() && starts_with(m, tail)) return s.size() - i;
    }
  }
  return 0;
}

// A word of a header from `from`: up to a space or a marker.
std::string header_word(std::string_view h, size_t from) {
  size_t e = from;
  while (e < h.size() && !std::isspace(static_cast<unsigned char>(h[e])) && h[e] != '<') ++e;
  return std::string(h.substr(from, e - from));
}

struct Header {
  std::string channel;
  std::string recipient;
};

Header parse_header(std::string_view h) {
  Header out;
  const size_t c = h.find(kChannel);
  if (c != std::string_view::npos) out.channel = header_word(h, c + kChannel.size());
  // " to=" in the role part or after the channel; at the start of the reply's first header too.
  for (size_t p = h.find("to="); p != std::string_view::npos; p = h.find("to=", p + 1)) {
    if (p == 0 || h[p - 1] == ' ' || h[p - 1] == '>') {
      out.recipient = header_word(h, p + 3);
      break;
    }
  }
  return out;
}

}  // namespace

HarmonyReplyStream::HarmonyReplyStream(bool reasoning, bool tools, bool parallel, bool stream_arguments)
    : reasoning_(reasoning), tools_(tools), parallel_(parallel), stream_arguments_(stream_arguments) {}

HarmonyDelta HarmonyReplyStream::feed(std::string_view text) {
  HarmonyDelta d;
  pending_.append(text);
  step(d, /*final=*/false);
  return d;
}

HarmonyDelta HarmonyReplyStream::finish() {
  HarmonyDelta d;
  step(d, /*final=*/true);
  return d;
}

void HarmonyReplyStream::step(HarmonyDelta& d, bool final) {
  while (true) {
    switch (phase_) {
      case Phase::kPlain:
        d.content += pending_;
        pending_.clear();
        return;
      case Phase::kHeader:
        if (!read_header(first_message_, final, d)) return;
        break;
      case Phase::kBody: {
        const auto [end, marker] = find_body_end(pending_);
        if (end == std::string::npos) {
          const size_t keep = final ? 0 : held_back(pending_);
          body(std::string_view(pending_).substr(0, pending_.size() - keep), d);
          pending_.erase(0, pending_.size() - keep);
          if (final) end_message(d);
          return;
        }
        body(std::string_view(pending_).substr(0, end), d);
        end_message(d);
        if (marker == kChannel) {  // a header with no <|start|> (and so no role) before it
          pending_.erase(0, end);
          phase_ = Phase::kHeader;
          first_message_ = true;
        } else {
          pending_.erase(0, end + marker.size());
          phase_ = marker == kStart ? Phase::kHeader : Phase::kBetween;
          first_message_ = false;
        }
        break;
      }
      case Phase::kBetween: {
        if (starts_with(pending_, kStart)) {
          pending_.erase(0, kStart.size());
          phase_ = Phase::kHeader;
          break;
        }
        if (starts_with(kStart, pending_)) {  // empty, or <|start|> begun
          if (final) pending_.clear();
          return;
        }
        // Text where a message should open: the model left the format; what it writes is content.
        route_ = Route::kContent;
        phase_ = Phase::kBody;
        break;
      }
    }
  }
}

bool HarmonyReplyStream::read_header(bool first, bool final, HarmonyDelta& d) {
  // Decided on the first bytes (and the length) alone, so that any split of the reply decides alike.
  const size_t m = pending_.find(kMessage);
  const bool too_long =
      m != std::string::npos ? m > kMaxHeader : pending_.size() >= kMaxHeader + kMessage.size();
  if ((first && !agrees_with_one(pending_, kFirstHeaderOpenings)) || too_long) {
    phase_ = Phase::kPlain;  // not harmony: all content
    return true;
  }
  if (m == std::string::npos) {
    if (final) pending_.clear();  // a header cut short is markup, no text
    return false;
  }
  const Header h = parse_header(std::string_view(pending_).substr(0, m));
  pending_.erase(0, m + kMessage.size());
  phase_ = Phase::kBody;
  first_message_ = false;
  if (starts_with(h.recipient, kFunctions) && h.recipient.size() > kFunctions.size()) {
    if (!tools_) {
      route_ = Route::kContent;
    } else if (!parallel_ && num_calls_ > 0) {
      route_ = Route::kDropped;
    } else {
      route_ = Route::kCall;
      call_name_ = h.recipient.substr(kFunctions.size());
      call_body_.clear();
      call_sent_ = 0;
      call_open_ = false;
      if (stream_arguments_) {
        d.calls.push_back(ToolCallPiece{num_calls_, call_name_, ""});
        call_open_ = true;
        ++num_calls_;
      }
    }
  } else if (!h.recipient.empty() || h.channel == "analysis") {
    route_ = reasoning_ ? Route::kReasoning : Route::kContent;
  } else {
    route_ = Route::kContent;  // final, a preamble on commentary, or no channel named
  }
  return true;
}

void HarmonyReplyStream::body(std::string_view text, HarmonyDelta& d) {
  switch (route_) {
    case Route::kReasoning: d.reasoning.append(text); break;
    case Route::kContent: d.content.append(text); break;
    case Route::kDropped: break;
    case Route::kCall: {
      call_body_.append(text);
      if (!call_open_) break;
      const std::string compact = compact_json(call_body_);
      if (compact.size() > call_sent_) {
        d.calls.push_back(ToolCallPiece{num_calls_ - 1, "", compact.substr(call_sent_)});
        call_sent_ = compact.size();
      }
      break;
    }
  }
}

void HarmonyReplyStream::end_message(HarmonyDelta& d) {
  if (route_ != Route::kCall) return;
  const bool blank = skip_space(call_body_) == call_body_.size();
  if (call_open_) {  // streamed: its arguments went out as written
    if (blank) d.calls.push_back(ToolCallPiece{num_calls_ - 1, "", "{}"});
  } else if (blank) {
    d.calls.push_back(ToolCallPiece{num_calls_++, call_name_, "{}"});
  } else if (auto j = parse_json_text(call_body_); j && j->is_object()) {
    d.calls.push_back(ToolCallPiece{num_calls_++, call_name_, compact_json(call_body_)});
  } else {
    d.content += call_body_;  // not an arguments object (cut by max_tokens): nothing is lost
  }
  call_body_.clear();
  call_open_ = false;
  route_ = Route::kContent;
}

}  // namespace minivllm::server
