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
    return std::vector<ParsedToolCall>{{name_, args->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)}};
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
