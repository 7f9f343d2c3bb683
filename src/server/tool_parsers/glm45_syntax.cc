// GLM-4.5's calls (GLM-4.5, GLM-4.5-Air, GLM-4.6; vLLM's glm45 parser):
//   <tool_call>get_weather
//   <arg_key>city</arg_key>
//   <arg_value>Paris</arg_value>
//   <arg_key>days</arg_key>
//   <arg_value>3</arg_value>
//   </tool_call>
// one block per call, the function's name on its first line, then key / value pairs. GLM's template
// writes a string argument as it is and any other as JSON, so a value is read back as the tool's
// schema types it (param_types.h).
#include "server/tool_parsers/json_scan.h"
#include "server/tool_parsers/param_types.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValueOpen = "<arg_value>";
constexpr std::string_view kValueClose = "</arg_value>";

class Glm45Syntax : public ToolCallSyntax {
 public:
  explicit Glm45Syntax(const nlohmann::json& tools) : types_(tools) {}

  std::vector<std::string_view> markers() const override { return {kOpen}; }

  std::optional<std::vector<ParsedToolCall>> parse_calls(std::string_view region, bool final) const override {
    return read_tagged_blocks(region, kOpen, kClose, final, [this](std::string_view t) { return read_call(t); });
  }

 private:
  // A block's text: the name (up to its line's end or the first key), then whole key / value pairs
  // with only space around them.
  std::optional<ParsedToolCall> read_call(std::string_view text) const {
    const size_t first_key = text.find(kKeyOpen);
    const std::string_view name = trim_space(text.substr(0, std::min(text.find('\n'), first_key)));
    if (name.empty() || name.find('<') != std::string_view::npos || name.find('{') != std::string_view::npos) {
      return std::nullopt;
    }
    size_t at = std::min(text.find('\n'), first_key);
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    while (true) {
      at = skip_space(text, at);
      if (at >= text.size()) break;
      if (!holds_at(text, at, kKeyOpen)) return std::nullopt;
      const size_t key_end = text.find(kKeyClose, at + kKeyOpen.size());
      if (key_end == std::string_view::npos) return std::nullopt;
      const std::string key(trim_space(text.substr(at + kKeyOpen.size(), key_end - at - kKeyOpen.size())));
      at = skip_space(text, key_end + kKeyClose.size());
      if (!holds_at(text, at, kValueOpen)) return std::nullopt;
      const size_t value_end = text.find(kValueClose, at + kValueOpen.size());
      if (value_end == std::string_view::npos) return std::nullopt;
      const std::string_view value = text.substr(at + kValueOpen.size(), value_end - at - kValueOpen.size());
      at = value_end + kValueClose.size();
      if (key.empty()) return std::nullopt;
      args[key] = types_.value(std::string(name), key, value);
    }
    // Text the detokenizer gives is valid UTF-8; a byte that is not (a fuzzer's) becomes U+FFFD.
    return ParsedToolCall{std::string(name), args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
  }

  ParamTypes types_;
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_glm45_syntax(const nlohmann::json& tools) {
  return std::make_unique<Glm45Syntax>(tools);
}

}  // namespace minivllm::server
