#include "server/tool_request.h"

#include "server/api_error.h"
#include "server/tool_parsers/json_scan.h"

namespace minivllm::server {

using nlohmann::json;

namespace {

const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

bool is_string_in(const json& obj, const char* key) { return obj.contains(key) && obj[key].is_string(); }

void check_tool(const json& tool, size_t i) {
  const std::string where = "tools[" + std::to_string(i) + "]";
  if (!tool.is_object()) throw bad_param("tools", where + " must be an object {\"type\": \"function\", \"function\": {...}}");
  if (!is_string_in(tool, "type") || tool["type"] != "function") {
    throw bad_param("tools", where + ".type must be \"function\" (the only tool type supported)");
  }
  if (!tool.contains("function") || !tool["function"].is_object()) {
    throw bad_param("tools", where + ".function must be an object with a \"name\"");
  }
  const json& f = tool["function"];
  if (!is_string_in(f, "name") || f["name"].get<std::string>().empty()) {
    throw bad_param("tools", where + ".function.name must be a non-empty string");
  }
  if (f.contains("description") && !f["description"].is_null() && !f["description"].is_string()) {
    throw bad_param("tools", where + ".function.description must be a string");
  }
  if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object()) {
    throw bad_param("tools", where + ".function.parameters must be a JSON schema object");
  }
  if (f.contains("strict") && !f["strict"].is_null() && !f["strict"].is_boolean()) {
    throw bad_param("tools", where + ".function.strict must be true or false");
  }
}

bool has_function(const json& tools, const std::string& name) {
  for (const json& t : tools) {
    if (t["function"]["name"] == name) return true;
  }
  return false;
}

json parameters_of(const json& function) {
  auto p = function.find("parameters");
  return p == function.end() || p->is_null() ? json{{"type", "object"}} : *p;
}

}  // namespace

ToolRequest read_tool_request(const json& body) {
  ToolRequest t;
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) throw bad_param("tools", "must be a list of tools");
    for (size_t i = 0; i < tools->size(); ++i) check_tool((*tools)[i], i);
    if (!tools->empty()) t.tools = *tools;
  }
  const bool has_tools = !t.tools.is_null();
  t.choice = has_tools ? ToolChoice::kAuto : ToolChoice::kNone;
  if (const json* c = field(body, "tool_choice")) {
    if (c->is_string()) {
      const std::string s = c->get<std::string>();
      if (s == "none") {
        t.choice = ToolChoice::kNone;
      } else if (s == "auto" || s == "required") {
        if (!has_tools) throw bad_param("tool_choice", "\"" + s + "\" needs tools");
        t.choice = s == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
      } else {
        throw bad_param("tool_choice", "must be none, auto, required or {\"type\": \"function\", \"function\": "
                                       "{\"name\": ...}}, got \"" + s.substr(0, 40) + "\"");
      }
    } else if (c->is_object() && is_string_in(*c, "type") && (*c)["type"] == "function" && c->contains("function") &&
               (*c)["function"].is_object() && is_string_in((*c)["function"], "name")) {
      t.named_function = (*c)["function"]["name"].get<std::string>();
      if (!has_tools || !has_function(t.tools, t.named_function)) {
        throw bad_param("tool_choice", "names the function '" + t.named_function.substr(0, 64) +
                                           "', which is not among the tools");
      }
      t.choice = ToolChoice::kNamed;
    } else {
      throw bad_param("tool_choice",
                      "must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  }
  if (const json* p = field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) throw bad_param("parallel_tool_calls", "must be true or false");
    t.parallel = p->get<bool>();
  }
  return t;
}

nlohmann::ordered_json tools_in_order(std::string_view body_text) {
  auto body = nlohmann::ordered_json::parse(body_text.begin(), body_text.end(), nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("tools")) return nullptr;
  return body["tools"];
}

std::string forced_tool_schema(const ToolRequest& t) {
  if (t.choice == ToolChoice::kNamed) {
    for (const json& tool : t.tools) {
      if (tool["function"]["name"] == t.named_function) return parameters_of(tool["function"]).dump();
    }
    return "";
  }
  if (t.choice != ToolChoice::kRequired) return "";
  json any_of = json::array();
  for (const json& tool : t.tools) {
    const json& f = tool["function"];
    any_of.push_back({{"type", "object"},
                      {"properties", {{"name", {{"type", "string"}, {"enum", {f["name"]}}}},
                                      {"parameters", parameters_of(f)}}},
                      {"required", {"name", "parameters"}}});
  }
  json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any_of}}}};
  if (!t.parallel) schema["maxItems"] = 1;
  return schema.dump();
}

std::vector<std::pair<std::string, std::string>> forced_tool_functions(const ToolRequest& t) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!t.forces_calls()) return out;
  for (const json& tool : t.tools) {
    const json& f = tool["function"];
    if (t.choice == ToolChoice::kRequired || f["name"] == t.named_function) {
      out.emplace_back(f["name"].get<std::string>(), parameters_of(f).dump());
    }
  }
  return out;
}

void read_tool_message_fields(const json& m, size_t index, json& copy) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  const std::string role = m["role"].get<std::string>();
  if (role == "tool") {
    if (m.contains("tool_call_id") && !m["tool_call_id"].is_null() && !m["tool_call_id"].is_string()) {
      throw bad_param("messages", where + ".tool_call_id must be a string");
    }
    return;
  }
  const json* calls = field(m, "tool_calls");
  if (!calls) return;
  if (role != "assistant") throw bad_param("messages", where + ": only assistant messages have tool_calls");
  if (!calls->is_array()) throw bad_param("messages", where + ".tool_calls must be a list");
  json out = json::array();
  for (size_t i = 0; i < calls->size(); ++i) {
    const json& c = (*calls)[i];
    const std::string at = where + ".tool_calls[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
        !is_string_in(c["function"], "name")) {
      throw bad_param("messages", at + " must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    }
    json call = c;
    const json& args = c["function"].contains("arguments") ? c["function"]["arguments"] : json();
    if (args.is_string()) {
      if (auto parsed = parse_json_text(args.get<std::string>())) call["function"]["arguments"] = json::parse(parsed->dump());
    } else if (!args.is_object() && !args.is_null()) {
      throw bad_param("messages", at + ".function.arguments must be a JSON string");
    }
    out.push_back(std::move(call));
  }
  copy["tool_calls"] = std::move(out);
}

}  // namespace minivllm::server
