// Mistral's calls (Mistral-7B-Instruct-v0.3's tokenizer): [TOOL_CALLS] then a JSON array
//   [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]
// [TOOL_CALLS] is a special token, which the detokenizer leaves out of the text, so a reply that
// starts with the array is read as calls too.
#include "server/tool_parsers/json_scan.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {
namespace {

constexpr std::string_view kToolCalls = "[TOOL_CALLS]";

class MistralSyntax : public ToolCallSyntax {
 public:
  std::vector<std::string_view> markers() const override { return {kToolCalls}; }
  char leading_char() const override { return '['; }

  std::optional<std::vector<ParsedToolCall>> parse_calls(std::string_view region, bool final) const override {
    const size_t pos = skip_space(region, region.starts_with(kToolCalls) ? kToolCalls.size() : 0);
    if (pos >= region.size()) return std::nullopt;
    if (region[pos] == '[') return read_call_array(region, pos, final);
    if (region[pos] != '{') return std::nullopt;  // one call without its array, as some replies have
    const size_t end = json_value_end(region, pos);
    if (end == std::string_view::npos || (final && skip_space(region, end) != region.size())) return std::nullopt;
    auto call = call_from_text(region.substr(pos, end - pos));
    if (!call) return std::nullopt;
    return std::vector<ParsedToolCall>{std::move(*call)};
  }

  std::optional<PartialToolCall> partial_call(std::string_view region, size_t num_complete) const override {
    const size_t pos = skip_space(region, region.starts_with(kToolCalls) ? kToolCalls.size() : 0);
    if (pos >= region.size()) return std::nullopt;
    size_t at = pos;
    if (region[pos] == '[') {
      at = json_array_element(region, pos, num_complete);
    } else if (num_complete > 0) {
      return std::nullopt;
    }
    if (at == std::string_view::npos || region[at] != '{' || json_value_end(region, at) != std::string_view::npos) {
      return std::nullopt;
    }
    return partial_call_object(region.substr(at));
  }
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_mistral_syntax() { return std::make_unique<MistralSyntax>(); }

}  // namespace minivllm::server
