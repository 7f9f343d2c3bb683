#include "server/responses_api.h"

#include <string>
#include <string_view>

#include "engine/sampling_keys.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace minivllm::server {

using nlohmann::json;

namespace {

bool present(const json& body, const char* key) { return body.contains(key) && !body.at(key).is_null(); }

// obj[key] when it is a string, else `fallback` (absent, null or another type alike).
template <typename Json>
std::string string_or(const Json& obj, const char* key, const std::string& fallback) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].template get<std::string>() : fallback;
}

// A message's text: a string, or parts of type input_text / output_text (what a previous
// response's output message holds) joined.
std::string item_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_param(where, "must be a string or a list of content parts");
  std::string text;
  for (const json& part : content) {
    const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                                 ? part["type"].get<std::string>()
                                 : std::string();
    if (type != "input_text" && type != "output_text") {
      throw bad_param(where, "only text parts (input_text, output_text) are supported, got " + part.dump());
    }
    if (!part.contains("text") || !part["text"].is_string()) throw bad_param(where, "a text part needs its text");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::string string_field(const json& item, const char* key, const std::string& where) {
  if (!item.contains(key) || !item[key].is_string()) throw bad_param(where, std::string("needs a string ") + key);
  return item[key].get<std::string>();
}

// Responses' input (a string, or a list of items) as chat messages after `messages`' system one.
void add_input(const json& input, json& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array() || input.empty()) throw bad_param("input", "must be a string or a non-empty list of items");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) throw bad_param(where, "must be an object");
    const std::string type = item.contains("type") && item["type"].is_string() ? item["type"].get<std::string>()
                                                                              : std::string("message");
    if (type == "message") {
      std::string role = string_field(item, "role", where);
      if (role == "developer") role = "system";  // the Responses API's name for the system turn
      if (role != "user" && role != "assistant" && role != "system") {
        throw bad_param(where + ".role", "must be user, assistant, system or developer, got " + role);
      }
      messages.push_back({{"role", role}, {"content", item_text(item.value("content", json()), where + ".content")}});
    } else if (type == "function_call") {
      // The model's earlier call: chat's assistant tool_calls (consecutive calls share one message).
      const json call = {{"id", string_field(item, "call_id", where)},
                         {"type", "function"},
                         {"function", {{"name", string_field(item, "name", where)},
                                       {"arguments", string_field(item, "arguments", where)}}}};
      if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls")) {
        messages.back()["tool_calls"].push_back(call);
      } else {
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
      }
    } else if (type == "function_call_output") {
      const json& output = item.value("output", json());
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_field(item, "call_id", where)},
                          {"content", item_text(output, where + ".output")}});
    } else if (type == "reasoning") {
      // An earlier turn's thoughts: the chat templates of the models that think leave them out of
      // the history they render, so there is nothing to pass on.
      continue;
    } else if (type == "item_reference") {  // resolve_item_references replaces them first
      throw bad_param(where, "an item_reference this request cannot resolve; send the item itself");
    } else {
      throw bad_param(where, "unsupported item type \"" + type + "\" (message, function_call, function_call_output "
                             "and reasoning are supported)");
    }
  }
}

// Responses' flat function tools ({type, name, description, parameters, strict}) as chat's; for the
// parsed body, and for its text in the client's key order (the order the chat template shows).
template <typename Json>
Json chat_tools(const Json& tools) {
  if (!tools.is_array()) throw bad_param("tools", "must be a list");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (string_or(t, "type", "") != "function") {
      throw bad_param(where, "only function tools are supported, got " + t.dump());
    }
    if (!t.contains("name") || !t["name"].is_string()) throw bad_param(where, "needs a string name");
    Json fn = {{"name", t["name"]}};
    for (const char* key : {"description", "parameters", "strict"}) {
      if (t.contains(key) && !t[key].is_null()) fn[key] = t[key];
    }
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json chat_tool_choice(const json& choice) {
  if (choice.is_string()) return choice;  // none, auto, required: the same words
  if (string_or(choice, "type", "") == "function" && choice.contains("name") && choice["name"].is_string()) {
    return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  }
  throw bad_param("tool_choice", "must be none, auto, required or {\"type\": \"function\", \"name\": ...}, got " +
                                     choice.dump());
}

// text.format onto chat's response_format.
json chat_response_format(const json& text) {
  if (!text.is_object()) throw bad_param("text", "must be an object");
  for (const auto& [key, value] : text.items()) {
    if (key != "format" && !value.is_null()) throw bad_param("text." + key, "not supported");
  }
  const json& f = text.value("format", json());
  if (f.is_null()) return json();
  if (!f.is_object() || !f.contains("type")) throw bad_param("text.format", "must be an object with a type");
  const std::string type = f["type"].is_string() ? f["type"].get<std::string>() : "";
  if (type == "text" || type == "json_object") return {{"type", type}};
  if (type != "json_schema") throw bad_param("text.format.type", "must be text, json_object or json_schema");
  json schema = {{"name", string_or(f, "name", "response")}};
  if (f.contains("schema")) schema["schema"] = f["schema"];
  if (present(f, "strict")) schema["strict"] = f["strict"];
  return {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

struct Refusal {
  std::string_view field;
  std::string_view why;
};
constexpr Refusal kRefused[] = {
    {"conversation", "the server keeps no conversations; send the whole conversation in input"},
    {"background", "background responses are not supported"},
    {"include", "no extra output data (include) is supported"},
    {"max_tool_calls", "max_tool_calls is not supported"},
    {"prompt", "stored prompt templates are not supported"},
    {"top_logprobs", "logprobs are not supported in responses; use /v1/chat/completions"},
    {"stream_options", "stream_options (include_obfuscation) is not supported"},
};

// Accepted and ignored besides chat's bookkeeping fields: neither changes the tokens generated.
constexpr std::string_view kIgnored[] = {"safety_identifier", "prompt_cache_key"};

}  // namespace

json resolve_item_references(json body, const std::function<std::optional<json>(const std::string&)>& find_item) {
  if (!body.is_object() || !body.contains("input") || !body["input"].is_array()) return body;
  json& input = body["input"];
  for (size_t i = 0; i < input.size(); ++i) {
    json& item = input[i];
    if (!item.is_object() || string_or(item, "type", "") != "item_reference") continue;
    const std::string where = "input[" + std::to_string(i) + "].id";
    if (!item.contains("id") || !item["id"].is_string()) throw bad_param(where, "an item_reference needs a string id");
    const std::string id = item["id"].get<std::string>();
    std::optional<json> found = find_item(id);
    if (!found) {
      throw ApiError(404,
                     "no stored item '" + id + "': an item_reference names an input or output item of a response "
                     "this server keeps (store not false, in memory, none across a restart)",
                     where);
    }
    item = std::move(*found);
  }
  return body;
}

json responses_to_chat_body(const json& body, const json& previous) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  json chat = {{"messages", json::array()}};
  for (const auto& [name, value] : body.items()) {
    if (value.is_null()) continue;
    if (name == "stream") {
      if (!value.is_boolean()) throw bad_param("stream", "must be true or false");
      if (value == true) chat["stream_options"] = {{"include_usage", true}};  // the completed event's usage
      chat["stream"] = value;
      continue;
    }
    if (name == "truncation" && value == "disabled") continue;  // the only behaviour here: refused if too long
    if (name == "reasoning") {  // effort is chat's reasoning_effort (refused where the template has none)
      if (!value.is_object()) throw bad_param("reasoning", "must be an object with an \"effort\"");
      if (!value.value("summary", json()).is_null()) {
        throw bad_param("reasoning", "not supported: summary (the reasoning is returned whole, not summarised)");
      }
      if (const json effort = value.value("effort", json()); !effort.is_null()) chat["reasoning_effort"] = effort;
      continue;
    }
    bool known = name == "input" || name == "instructions" || name == "model" || name == "max_output_tokens" ||
                 name == "tools" || name == "tool_choice" || name == "parallel_tool_calls" || name == "text" ||
                 name == "request_timeout" || name == "previous_response_id";
    if (name == "previous_response_id" && !value.is_string()) throw bad_param(name, "must be a string");
    if (name == "store" && !value.is_boolean()) throw bad_param(name, "must be true or false");
    known = known || is_ignored_bookkeeping_field(name);
    for (std::string_view n : kIgnored) known = known || n == name;
    if (known) continue;
    for (const Refusal& r : kRefused) {
      if (r.field == name) throw bad_param(name, "not supported: " + std::string(r.why));
    }
    // vLLM's sampling keys (temperature, top_p, top_k, seed, stop ...) mean the same in both
    // endpoints; a response has one output, and its length is max_output_tokens.
    if (name != "max_tokens" && name != "n" && name != "logprobs" && find_key(sampling_rows(), name) != nullptr) {
      chat[name] = value;
      continue;
    }
    throw bad_param(name, "unknown parameter of /v1/responses (refused rather than ignored)");
  }
  if (!present(body, "input")) throw bad_param("input", "is required");
  if (present(body, "instructions")) {
    if (!body["instructions"].is_string()) throw bad_param("instructions", "must be a string");
    chat["messages"].push_back({{"role", "system"}, {"content", body["instructions"]}});
  }
  // A previous response's conversation goes before the input; its instructions do not carry over.
  for (const json& m : previous) chat["messages"].push_back(m);
  add_input(body["input"], chat["messages"]);
  if (present(body, "model")) chat["model"] = body["model"];
  if (present(body, "max_output_tokens")) chat["max_completion_tokens"] = body["max_output_tokens"];
  if (present(body, "tools")) chat["tools"] = chat_tools(body["tools"]);
  if (present(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(body["tool_choice"]);
  if (present(body, "parallel_tool_calls")) chat["parallel_tool_calls"] = body["parallel_tool_calls"];
  if (present(body, "request_timeout")) chat["request_timeout"] = body["request_timeout"];
  if (present(body, "text")) {
    json format = chat_response_format(body["text"]);
    if (!format.is_null()) chat["response_format"] = std::move(format);
  }
  return chat;
}

nlohmann::ordered_json responses_tools_in_order(std::string_view body_text) {
  auto body = nlohmann::ordered_json::parse(body_text.begin(), body_text.end(), nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("tools") || body["tools"].is_null()) return nullptr;
  return chat_tools(body["tools"]);
}

json chat_completion_to_response(const json& completion, const json& body) {
  const json& choice = completion.at("choices").at(0);
  const json& message = choice.at("message");
  const std::string id = completion.at("id").get<std::string>();
  const std::string suffix = id.substr(id.find('-') == std::string::npos ? 0 : id.find('-') + 1);
  json output = json::array();
  if (message.contains("reasoning_content") && message["reasoning_content"].is_string()) {
    output.push_back({{"type", "reasoning"},
                      {"id", "rs_" + suffix},
                      {"summary", json::array()},
                      {"content", json::array({{{"type", "reasoning_text"}, {"text", message["reasoning_content"]}}})}});
  }
  const std::string text = message.value("content", json()).is_string() ? message["content"].get<std::string>() : "";
  const bool calls = message.contains("tool_calls") && message["tool_calls"].is_array() && !message["tool_calls"].empty();
  const bool cut = choice.contains("finish_reason") && choice["finish_reason"] == "length";
  if (!text.empty() || !calls) {
    output.push_back({{"type", "message"},
                      {"id", "msg_" + suffix},
                      {"status", cut ? "incomplete" : "completed"},
                      {"role", "assistant"},
                      {"content", json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}})}});
  }
  if (calls) {
    for (const json& c : message["tool_calls"]) {
      const std::string call_id = c.at("id").get<std::string>();
      output.push_back({{"type", "function_call"},
                        {"id", "fc_" + call_id},
                        {"call_id", call_id},
                        {"name", c.at("function").at("name")},
                        {"arguments", c.at("function").at("arguments")},
                        {"status", "completed"}});
    }
  }
  const json& u = completion.at("usage");
  const int64_t cached = u.contains("prompt_tokens_details") ? u["prompt_tokens_details"].value("cached_tokens", 0) : 0;
  const auto given = [&](const char* key, json fallback) { return present(body, key) ? body[key] : fallback; };
  return {{"id", "resp_" + suffix},
          {"object", "response"},
          {"created_at", completion.at("created")},
          {"status", cut ? "incomplete" : "completed"},
          {"error", nullptr},
          {"incomplete_details", cut ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
          {"instructions", given("instructions", nullptr)},
          {"max_output_tokens", given("max_output_tokens", nullptr)},
          {"model", completion.at("model")},
          {"output", std::move(output)},
          {"parallel_tool_calls", given("parallel_tool_calls", true)},
          {"previous_response_id", given("previous_response_id", nullptr)},
          {"reasoning", {{"effort", present(body, "reasoning") ? body["reasoning"].value("effort", json()) : json()},
                         {"summary", nullptr}}},
          {"store", given("store", true)},
          {"temperature", given("temperature", nullptr)},
          {"text", given("text", json{{"format", {{"type", "text"}}}})},
          {"tool_choice", given("tool_choice", "auto")},
          {"tools", given("tools", json::array())},
          {"top_p", given("top_p", nullptr)},
          {"truncation", "disabled"},
          {"usage",
           {{"input_tokens", u.at("prompt_tokens")},
            {"input_tokens_details", {{"cached_tokens", cached}}},
            {"output_tokens", u.at("completion_tokens")},
            // (the chat path does not count the reply's thinking tokens apart from its answer)
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", u.at("total_tokens")}}},
          {"metadata", given("metadata", json::object())},
          {"user", given("user", nullptr)}};
}

json conversation_after(const json& previous, const json& body, const json& response) {
  json messages = previous.is_array() ? previous : json::array();
  add_input(body.at("input"), messages);
  // The reply as the client would send it back as input: its message and function_call items become
  // chat's assistant turn, its reasoning nothing (chat templates leave a past turn's thinking out).
  const json& output = response.at("output");
  if (output.is_array() && !output.empty()) add_input(output, messages);
  return messages;
}

}  // namespace minivllm::server
