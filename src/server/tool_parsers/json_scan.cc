#include "server/tool_parsers/json_scan.h"

namespace minivllm::server {

using nlohmann::ordered_json;

size_t json_value_end(std::string_view s, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<ordered_json> parse_json_text(std::string_view s) {
  // Nested past kMaxJsonDepth is refused before anything walks it recursively (DESIGN.md: hostile
  // input is bounded).
  bool too_deep = false;
  const ordered_json::parser_callback_t limit = [&too_deep](int depth, ordered_json::parse_event_t event, ordered_json&) {
    if ((event == ordered_json::parse_event_t::object_start || event == ordered_json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      too_deep = true;
    }
    return !too_deep;
  };
  ordered_json j = ordered_json::parse(s.begin(), s.end(), limit, /*allow_exceptions=*/false);
  if (too_deep || j.is_discarded()) return std::nullopt;
  return j;
}

std::optional<ParsedToolCall> call_from_json(const ordered_json& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  ordered_json args = ordered_json::object();
  for (const char* key : {"arguments", "parameters"}) {
    auto a = j.find(key);
    if (a == j.end() || a->is_null()) continue;
    args = *a;
    break;
  }
  if (args.is_string()) {  // arguments written as a JSON string holding the object
    auto inner = parse_json_text(args.get<std::string>());
    if (!inner) return std::nullopt;
    args = std::move(*inner);
  }
  if (!args.is_object()) return std::nullopt;
  return ParsedToolCall{name->get<std::string>(), args.dump(-1, ' ', false, ordered_json::error_handler_t::replace)};
}

namespace {

// One past the '"' that closes the string opening at s[begin], or npos when it is not closed in s.
size_t string_end(std::string_view s, size_t begin) {
  for (size_t i = begin + 1; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// One past the value starting at s[begin] (object, array, string, or a number or literal that a
// ',', '}', ']' or space ends), or npos when it may not be whole yet.
size_t value_end(std::string_view s, size_t begin) {
  const char c = s[begin];
  if (c == '{' || c == '[') return json_value_end(s, begin);
  if (c == '"') return string_end(s, begin);
  for (size_t i = begin; i < s.size(); ++i) {
    if (s[i] == ',' || s[i] == '}' || s[i] == ']' || s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
      return i;
    }
  }
  return std::string_view::npos;
}

}  // namespace

CallPrefix read_call_prefix(std::string_view obj) {
  CallPrefix p;
  if (obj.empty() || obj[0] != '{') return p;
  size_t i = 1;
  while (true) {
    i = skip_space(obj, i);
    if (i >= obj.size() || obj[i] != '"') return p;  // not there yet, or the object's end
    const size_t key_end = string_end(obj, i);
    if (key_end == std::string_view::npos) return p;
    const std::string_view key = obj.substr(i + 1, key_end - i - 2);  // the keys looked for have no escapes
    i = skip_space(obj, key_end);
    if (i >= obj.size() || obj[i] != ':') return p;
    i = skip_space(obj, i + 1);
    if (i >= obj.size()) return p;
    const size_t end = value_end(obj, i);
    if (key == "name" && obj[i] == '"' && end != std::string_view::npos && !p.name) {
      auto name = parse_json_text(obj.substr(i, end - i));
      if (name && name->is_string()) p.name = name->get<std::string>();
    }
    if (key == "arguments" && obj[i] == '{' && p.arguments_begin == std::string_view::npos) p.arguments_begin = i;
    if (key == "parameters" && obj[i] == '{' && p.parameters_begin == std::string_view::npos) p.parameters_begin = i;
    if (end == std::string_view::npos) return p;
    i = skip_space(obj, end);
    if (i >= obj.size() || obj[i] != ',') return p;
    ++i;
  }
}

std::string compact_json(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool in_string = false, escaped = false;
  for (const char c : s) {
    if (in_string) {
      out.push_back(c);
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
      out.push_back(c);
      in_string = c == '"';
    }
  }
  return out;
}

std::optional<ParsedToolCall> call_from_text(std::string_view text) {
  auto j = parse_json_text(text);
  auto call = j ? call_from_json(*j) : std::nullopt;
  if (!call) return std::nullopt;
  // The key call_from_json read: "arguments" unless absent or null.
  auto a = j->find("arguments");
  const bool arguments = a != j->end() && !a->is_null();
  const CallPrefix p = read_call_prefix(text.substr(skip_space(text)));
  const size_t begin = (arguments ? p.arguments_begin : p.parameters_begin);
  if (begin != std::string_view::npos) {
    const std::string_view obj = text.substr(skip_space(text));
    const size_t end = json_value_end(obj, begin);
    if (end != std::string_view::npos) call->arguments = compact_json(obj.substr(begin, end - begin));
  }
  return call;
}

std::optional<PartialToolCall> partial_call_object(std::string_view obj) {
  const CallPrefix p = read_call_prefix(obj);
  const size_t begin = p.arguments_begin != std::string_view::npos ? p.arguments_begin : p.parameters_begin;
  if (!p.name || p.name->empty() || begin == std::string_view::npos) return std::nullopt;
  const size_t end = json_value_end(obj, begin);
  return PartialToolCall{*p.name, obj.substr(begin, end == std::string_view::npos ? end : end - begin)};
}

size_t json_array_element(std::string_view s, size_t begin, size_t index) {
  size_t pos = skip_space(s, begin + 1);
  for (size_t k = 0; k < index; ++k) {
    if (pos >= s.size() || (s[pos] != '{' && s[pos] != '[')) return std::string_view::npos;
    const size_t end = json_value_end(s, pos);
    if (end == std::string_view::npos) return std::string_view::npos;
    pos = skip_space(s, end);
    if (pos >= s.size() || s[pos] != ',') return std::string_view::npos;
    pos = skip_space(s, pos + 1);
  }
  return pos < s.size() ? pos : std::string_view::npos;
}

std::optional<std::vector<ParsedToolCall>> read_call_array(std::string_view s, size_t begin, bool final) {
  std::vector<ParsedToolCall> calls;
  auto so_far = [&]() -> std::optional<std::vector<ParsedToolCall>> {
    if (final || calls.empty()) return std::nullopt;
    return calls;
  };
  size_t pos = skip_space(s, begin + 1);
  while (pos < s.size() && s[pos] != ']') {
    if (s[pos] != '{') return so_far();
    const size_t end = json_value_end(s, pos);
    if (end == std::string_view::npos) return so_far();
    auto call = call_from_text(s.substr(pos, end - pos));
    if (!call) return so_far();
    calls.push_back(std::move(*call));
    pos = skip_space(s, end);
    if (pos < s.size() && s[pos] == ',') pos = skip_space(s, pos + 1);
  }
  if (pos >= s.size()) return so_far();  // the array is not closed yet
  if (final && skip_space(s, pos + 1) != s.size()) return std::nullopt;
  if (calls.empty()) return std::nullopt;
  return calls;
}

size_t skip_space(std::string_view s, size_t from) {
  while (from < s.size() && (s[from] == ' ' || s[from] == '\n' || s[from] == '\r' || s[from] == '\t')) ++from;
  return from;
}

std::optional<std::vector<ParsedToolCall>> read_tagged_blocks(
    std::string_view region, std::string_view open, std::string_view close, bool final,
    const std::function<std::optional<ParsedToolCall>(std::string_view)>& read) {
  std::vector<ParsedToolCall> calls;
  size_t pos = region.find(open);
  while (pos != std::string_view::npos) {
    const size_t body = pos + open.size();
    const size_t end = region.find(close, body);
    if (end == std::string_view::npos && !final) break;  // still being written
    auto call = read(region.substr(body, end == std::string_view::npos ? end : end - body));
    if (!call) {
      if (final) return std::nullopt;
      return calls.empty() ? std::nullopt : std::optional(calls);
    }
    calls.push_back(std::move(*call));
    if (end == std::string_view::npos) break;
    pos = region.find(open, end + close.size());
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace minivllm::server
