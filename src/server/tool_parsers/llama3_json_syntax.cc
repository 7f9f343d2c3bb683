// Llama 3.x JSON calls (vLLM's llama3_json): the reply is one or more objects
//   {"name": "get_weather", "parameters": {"city": "Paris"}}
// separated by ';', optionally after <|python_tag|> (a special token, so usually already gone from
// the text). Only a reply that starts with them is a call; JSON later in prose is content.
#include "server/tool_parsers/json_scan.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3JsonSyntax : public ToolCallSyntax {
 public:
  std::vector<std::string_view> markers() const override { return {kPythonTag}; }
  char leading_char() const override { return '{'; }

  std::optional<std::vector<ParsedToolCall>> parse_calls(std::string_view region, bool final) const override {
    size_t pos = region.starts_with(kPythonTag) ? kPythonTag.size() : 0;
    std::vector<ParsedToolCall> calls;
    while (true) {
      pos = skip_space(region, pos);
      if (pos >= region.size()) break;
      if (region[pos] != '{') return final ? std::nullopt : partial(calls);
      const size_t end = json_value_end(region, pos);
      if (end == std::string_view::npos) {
        if (final) return std::nullopt;
        break;
      }
      auto call = call_from_text(region.substr(pos, end - pos));
      if (!call) return final ? std::nullopt : partial(calls);
      pos = skip_space(region, end);
      const bool more = pos < region.size() && region[pos] == ';';
      // Not final, a call counts once a ';' follows: text after the last object makes it prose.
      if (!final && !more) break;
      calls.push_back(std::move(*call));
      if (more) ++pos;
    }
    if (calls.empty()) return std::nullopt;
    return calls;
  }

 private:
  static std::optional<std::vector<ParsedToolCall>> partial(const std::vector<ParsedToolCall>& calls) {
    if (calls.empty()) return std::nullopt;
    return calls;
  }
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_llama3_json_syntax() { return std::make_unique<Llama3JsonSyntax>(); }

}  // namespace minivllm::server
