// Calls written as XML-ish functions (vLLM's qwen3_coder and seed_oss parsers):
//   <tool_call>                       Qwen3-Coder (<seed:tool_call> ... </seed:tool_call>: Seed-OSS)
//   <function=get_weather>
//   <parameter=city>
//   Paris
//   </parameter>
//   </function>
//   </tool_call>
// one function a block. A value loses one newline at each end (the templates put it on its own
// line) and is read by its parameter's type (param_types.h): the templates write a string as it
// is and anything else as JSON or Python's str of it.
#include "server/tool_parsers/json_scan.h"
#include "server/tool_parsers/param_types.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {
namespace {

constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";

// One newline (or \r\n) off each end.
std::string_view strip_newline(std::string_view v) {
  if (holds_at(v, 0, "\r\n")) v.remove_prefix(2);
  else if (holds_at(v, 0, "\n")) v.remove_prefix(1);
  if (v.size() >= 2 && v.substr(v.size() - 2) == "\r\n") v.remove_suffix(2);
  else if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return v;
}

class XmlFunctionSyntax : public ToolCallSyntax {
 public:
  XmlFunctionSyntax(std::string_view open, std::string_view close, const nlohmann::json& tools)
      : open_(open), close_(close), types_(tools) {}

  std::vector<std::string_view> markers() const override { return {open_}; }

  std::optional<std::vector<ParsedToolCall>> parse_calls(std::string_view region, bool final) const override {
    return read_tagged_blocks(region, open_, close_, final, [this](std::string_view t) { return read_call(t); });
  }

 private:
  // <function=NAME> then <parameter=KEY>VALUE</parameter> pairs, </function>, with only space
  // around them.
  std::optional<ParsedToolCall> read_call(std::string_view text) const {
    size_t at = skip_space(text);
    if (!holds_at(text, at, kFunction)) return std::nullopt;
    const size_t name_end = text.find('>', at + kFunction.size());
    if (name_end == std::string_view::npos) return std::nullopt;
    const std::string name(trim_space(text.substr(at + kFunction.size(), name_end - at - kFunction.size())));
    if (name.empty() || name.find('<') != std::string::npos) return std::nullopt;
    at = name_end + 1;
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    while (true) {
      at = skip_space(text, at);
      if (holds_at(text, at, kFunctionClose)) {
        if (skip_space(text, at + kFunctionClose.size()) != text.size()) return std::nullopt;
        break;
      }
      if (!holds_at(text, at, kParameter)) return std::nullopt;
      const size_t key_end = text.find('>', at + kParameter.size());
      if (key_end == std::string_view::npos) return std::nullopt;
      const std::string key(trim_space(text.substr(at + kParameter.size(), key_end - at - kParameter.size())));
      const size_t value_end = text.find(kParameterClose, key_end + 1);
      if (key.empty() || value_end == std::string_view::npos) return std::nullopt;
      args[key] = types_.value(name, key, strip_newline(text.substr(key_end + 1, value_end - key_end - 1)));
      at = value_end + kParameterClose.size();
    }
    // Text the detokenizer gives is valid UTF-8; a byte that is not (a fuzzer's) becomes U+FFFD.
    return ParsedToolCall{name, args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
  }

  std::string_view open_, close_;
  ParamTypes types_;
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_qwen3_coder_syntax(const nlohmann::json& tools) {
  return std::make_unique<XmlFunctionSyntax>("<tool_call>", "</tool_call>", tools);
}

std::unique_ptr<ToolCallSyntax> make_seed_oss_syntax(const nlohmann::json& tools) {
  return std::make_unique<XmlFunctionSyntax>("<seed:tool_call>", "</seed:tool_call>", tools);
}

}  // namespace minivllm::server
