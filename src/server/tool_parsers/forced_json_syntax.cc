// The replies tool_choice "required" and a named function constrain decoding to (tool_schema.h
// builds their grammars, as vLLM does): the whole reply is JSON, so it always reads.
//   required:        [{"name": "get_weather", "parameters": {"city": "Paris"}}, ...]
//   named function:  {"city": "Paris"}
#include "server/tool_parsers/json_scan.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {
namespace {

class RequiredToolsSyntax : public ToolCallSyntax {
 public:
  std::vector<std::string_view> markers() const override { return {}; }
  char leading_char() const override { return '['; }

  std::optional<std::vector<ParsedToolCall>> parse_calls(std::string_view region, bool final) const override {
    const size_t pos = skip_space(region);
    if (pos >= region.size() || region[pos] != '[') return std::nullopt;
    return read_call_array(region, pos, final);
  }

  std::optional<PartialToolCall> partial_call(std::string_view region, size_t num_complete) const override {
    const size_t pos = skip_space(region);
    if (pos >= region.size() || region[pos] != '[') return std::nullopt;
    const size_t at = json_array_element(region, pos, num_complete);
    if (at == std::string_view::npos || region[at] != '{' || json_value_end(region, at) != std::string_view::npos) {
      return std::nullopt;
    }
    return partial_call_object(region.substr(at));
  }
};

class NamedToolSyntax : public ToolCallSyntax {
 public:
  explicit NamedToolSyntax(std::string name) : name_(std::move(name)) {}
  std::vector<std::string_view> markers() const override { return {}; }
  char leading_char() const override { return '{'; }

  std::optional<std::vector<ParsedToolCall>> parse_calls(std::string_view region, bool final) const override {
    const size_t pos = skip_space(region);
    if (pos >= region.size() || region[pos] != '{') return std::nullopt;
    const size_t end = json_value_end(region, pos);
    if (end == std::string_view::npos || (final && skip_space(region, end) != region.size())) return std::nullopt;
    auto args = parse_json_text(region.substr(pos, end - pos));
    if (!args || !args->is_object()) return std::nullopt;
    return std::vector<ParsedToolCall>{{name_, compact_json(region.substr(pos, end - pos))}};
  }

  // The reply is the arguments: they stream from the first '{'.
  std::optional<PartialToolCall> partial_call(std::string_view region, size_t num_complete) const override {
    const size_t pos = skip_space(region);
    if (num_complete > 0 || pos >= region.size() || region[pos] != '{') return std::nullopt;
    if (json_value_end(region, pos) != std::string_view::npos) return std::nullopt;
    return PartialToolCall{name_, region.substr(pos)};
  }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_required_tools_syntax() { return std::make_unique<RequiredToolsSyntax>(); }
std::unique_ptr<ToolCallSyntax> make_named_tool_syntax(std::string function_name) {
  return std::make_unique<NamedToolSyntax>(std::move(function_name));
}

}  // namespace minivllm::server
