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
    auto j = parse_json_text(s.substr(pos, end - pos));
    auto call = j ? call_from_json(*j) : std::nullopt;
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

}  // namespace minivllm::server
