#include "server/tool_parsers/param_types.h"

#include <cctype>

#include "server/tool_parsers/json_scan.h"

namespace minivllm::server {

ParamTypes::ParamTypes(const nlohmann::json& tools) {
  if (!tools.is_array()) return;
  for (const nlohmann::json& tool : tools) {
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) continue;
    const nlohmann::json& f = tool["function"];
    if (!f.contains("name") || !f["name"].is_string()) continue;
    const auto params = f.find("parameters");
    if (params == f.end() || !params->is_object() || !params->contains("properties")) continue;
    const nlohmann::json& props = (*params)["properties"];
    if (!props.is_object()) continue;
    for (const auto& [key, schema] : props.items()) {
      if (schema.is_object() && schema.contains("type") && schema["type"].is_string()) {
        types_[f["name"].get<std::string>()][key] = schema["type"].get<std::string>();
      }
    }
  }
}

std::string ParamTypes::type_of(const std::string& function, const std::string& key) const {
  const auto f = types_.find(function);
  if (f == types_.end()) return "";
  const auto k = f->second.find(key);
  return k == f->second.end() ? "" : k->second;
}

nlohmann::ordered_json ParamTypes::value(const std::string& function, const std::string& key,
                                         std::string_view text) const {
  const std::string type = type_of(function, key);
  if (type == "string") return std::string(text);
  const std::string_view t = trim_space(text);
  if (type == "boolean" && (t == "True" || t == "False")) return t == "True";
  if (auto parsed = parse_json_text(t)) return *parsed;
  return std::string(text);
}

std::string_view trim_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace minivllm::server
