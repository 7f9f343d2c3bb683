// Hermes-style calls (Qwen2.5, Qwen3, NousResearch Hermes, ChatML models such as SmolLM2):
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// one block per call; text between blocks is ignored, as vLLM's hermes parser does. A last block
// left open when the reply ended is read too, if its JSON is whole.
#include "server/tool_parsers/json_scan.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

class HermesSyntax : public ToolCallSyntax {
 public:
  std::vector<std::string_view> markers() const override { return {kOpen}; }

  std::optional<std::vector<ParsedToolCall>> parse_calls(std::string_view region, bool final) const override {
    return read_tagged_blocks(region, kOpen, kClose, final, read_call);
  }

  // Block num_complete, while it is still open.
  std::optional<PartialToolCall> partial_call(std::string_view region, size_t num_complete) const override {
    size_t pos = region.find(kOpen);
    for (size_t k = 0; k < num_complete && pos != std::string_view::npos; ++k) pos = region.find(kOpen, pos + 1);
    if (pos == std::string_view::npos) return std::nullopt;
    const std::string_view body = region.substr(pos + kOpen.size());
    if (body.find(kClose) != std::string_view::npos) return std::nullopt;  // closed: parse_calls' to read
    const size_t begin = skip_space(body);
    if (begin >= body.size() || body[begin] != '{') return std::nullopt;
    return partial_call_object(body.substr(begin));
  }

 private:
  static std::optional<ParsedToolCall> read_call(std::string_view text) {
    const size_t begin = skip_space(text);
    if (begin >= text.size() || text[begin] != '{') return std::nullopt;
    const size_t end = json_value_end(text, begin);
    if (end == std::string_view::npos || skip_space(text, end) != text.size()) return std::nullopt;
    return call_from_text(text.substr(begin, end - begin));
  }
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_hermes_syntax() { return std::make_unique<HermesSyntax>(); }

}  // namespace minivllm::server
