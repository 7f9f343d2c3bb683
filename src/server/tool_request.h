// The tool-calling fields of a chat request (OpenAI's tools, tool_choice, parallel_tool_calls),
// checked, and what they ask of the engine: the tools for the chat template, and for
// tool_choice "required" or a named function, the JSON schema that constrains the reply (vLLM's
// approach: an array of {"name", "parameters"} calls, or the named function's arguments), so the
// call always reads and its arguments validate. Errors are ApiError 400 naming the field.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace minivllm::server {

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolRequest {
  nlohmann::json tools;  // the tools as given (an array), null when none
  // The same in the client's key order, when the server read it from the body (tools_in_order):
  // what the chat template prints, so the model sees {"type", "function": {"name", "description",
  // "parameters"}} as it was trained to, not the keys sorted.
  nlohmann::ordered_json tools_in_order;
  ToolChoice choice = ToolChoice::kNone;  // auto when tools are given and tool_choice is not
  std::string named_function;             // kNamed: the function's name
  bool parallel = true;                   // parallel_tool_calls

  // Calls are parsed out of the reply (auto) or the reply is the calls (required, named).
  bool parses_calls() const { return choice != ToolChoice::kNone; }
  bool forces_calls() const { return choice == ToolChoice::kRequired || choice == ToolChoice::kNamed; }
};

ToolRequest read_tool_request(const nlohmann::json& body);

// The body's "tools" in its own key order (null when none); `body_text` parsed and checked already.
nlohmann::ordered_json tools_in_order(std::string_view body_text);

// The JSON schema (as text) a forced choice constrains the reply to; "" for none and auto.
std::string forced_tool_schema(const ToolRequest& t);
// A forced choice's functions, each with the JSON schema (as text) of its parameters: the named
// one, or every tool for required (a harmony model's grammar writes the call's own header).
std::vector<std::pair<std::string, std::string>> forced_tool_functions(const ToolRequest& t);

// An assistant message's tool_calls and a tool message's fields, checked; `copy` gets each call's
// function.arguments as an object (the templates print it with tojson, as vLLM and transformers
// hand it to them), kept as the string when it is not JSON.
void read_tool_message_fields(const nlohmann::json& message, size_t index, nlohmann::json& copy);

}  // namespace minivllm::server
