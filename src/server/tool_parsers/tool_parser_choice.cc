// Which syntax a model writes its calls in: --tool-call-parser's names and the pick from the model.
#include "server/tool_parsers/tool_call_syntax.h"

#include <cctype>
#include <stdexcept>

namespace minivllm::server {

std::unique_ptr<ToolCallSyntax> make_hermes_syntax();
std::unique_ptr<ToolCallSyntax> make_llama3_json_syntax();
std::unique_ptr<ToolCallSyntax> make_mistral_syntax();
std::unique_ptr<ToolCallSyntax> make_glm45_syntax(const nlohmann::json& tools);
std::unique_ptr<ToolCallSyntax> make_qwen3_coder_syntax(const nlohmann::json& tools);
std::unique_ptr<ToolCallSyntax> make_seed_oss_syntax(const nlohmann::json& tools);

std::unique_ptr<ToolCallSyntax> make_tool_call_syntax(ToolParserKind kind, const nlohmann::json& tools) {
  switch (kind) {
    case ToolParserKind::kGlm45: return make_glm45_syntax(tools);
    case ToolParserKind::kQwen3Coder: return make_qwen3_coder_syntax(tools);
    case ToolParserKind::kSeedOss: return make_seed_oss_syntax(tools);
    case ToolParserKind::kHermes: return make_hermes_syntax();
    case ToolParserKind::kLlama3Json: return make_llama3_json_syntax();
    case ToolParserKind::kMistral: return make_mistral_syntax();
    case ToolParserKind::kOpenAi: break;
  }
  throw std::logic_error("the openai (harmony) tool parser reads whole replies: HarmonyReplyStream");
}

std::optional<ToolParserKind> tool_parser_from_name(std::string_view name) {
  if (name == "hermes") return ToolParserKind::kHermes;
  if (name == "llama3_json") return ToolParserKind::kLlama3Json;
  if (name == "mistral") return ToolParserKind::kMistral;
  if (name == "openai") return ToolParserKind::kOpenAi;
  if (name == "glm45") return ToolParserKind::kGlm45;
  if (name == "qwen3_coder") return ToolParserKind::kQwen3Coder;
  if (name == "seed_oss") return ToolParserKind::kSeedOss;
  return std::nullopt;
}

const char* tool_parser_name(ToolParserKind kind) {
  switch (kind) {
    case ToolParserKind::kHermes: return "hermes";
    case ToolParserKind::kLlama3Json: return "llama3_json";
    case ToolParserKind::kMistral: return "mistral";
    case ToolParserKind::kOpenAi: return "openai";
    case ToolParserKind::kGlm45: return "glm45";
    case ToolParserKind::kQwen3Coder: return "qwen3_coder";
    case ToolParserKind::kSeedOss: return "seed_oss";
  }
  return "hermes";
}

bool is_harmony_template(std::string_view chat_template) {
  return chat_template.find("<|channel|>") != std::string_view::npos &&
         chat_template.find("<|message|>") != std::string_view::npos;
}

ToolParserKind pick_tool_parser(std::string_view architecture, std::string_view chat_template) {
  if (is_harmony_template(chat_template)) return ToolParserKind::kOpenAi;
  if (chat_template.find("<seed:tool_call>") != std::string_view::npos) return ToolParserKind::kSeedOss;
  if (chat_template.find("<arg_key>") != std::string_view::npos) return ToolParserKind::kGlm45;
  if (chat_template.find("<function=") != std::string_view::npos &&
      chat_template.find("<tool_call>") != std::string_view::npos) {
    return ToolParserKind::kQwen3Coder;
  }
  if (chat_template.find("<tool_call>") != std::string_view::npos) return ToolParserKind::kHermes;
  if (chat_template.find("[TOOL_CALLS]") != std::string_view::npos) return ToolParserKind::kMistral;
  if (chat_template.find("<|python_tag|>") != std::string_view::npos ||
      chat_template.find("ipython") != std::string_view::npos) {
    return ToolParserKind::kLlama3Json;
  }
  std::string lower(architecture);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("mistral") != std::string::npos) return ToolParserKind::kMistral;
  return ToolParserKind::kHermes;
}

}  // namespace minivllm::server
