// The tool-calling fields of a chat request: tools, tool_choice and parallel_tool_calls checked
// with a 400 naming the field; required and named choices become the reply's JSON schema; assistant
// tool_calls reach the template with their arguments as objects.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/json_body.h"
#include "server/openai_request.h"

namespace minivllm::server {
namespace {

using nlohmann::json;

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}])";

GenerationRequest chat_with(const std::string& extra) {
  return parse_chat_request(parse_json_body(R"({"messages": [{"role": "user", "content": "x"}], "tools": )" +
                                            std::string(kTools) + extra + "}"));
}

std::pair<std::string, std::string> error_of(const std::string& body) {
  try {
    parse_chat_request(parse_json_body(body));
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return {e.param(), e.what()};
  }
  return {"no error", ""};
}

TEST(ToolRequest, ChoicesAndDefaults) {
  GenerationRequest r = chat_with("");
  EXPECT_EQ(r.tools.choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.tools.parallel);
  EXPECT_TRUE(r.params.structured_outputs.empty());
  EXPECT_EQ(r.tools.tools.size(), 2u);

  r = chat_with(R"(, "tool_choice": "none")");
  EXPECT_EQ(r.tools.choice, ToolChoice::kNone);
  EXPECT_EQ(r.tools.tools.size(), 2u);  // still shown to the template, as vLLM does

  r = chat_with(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(r.tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tools.named_function, "get_weather");
  EXPECT_EQ(json::parse(r.params.structured_outputs.json)["required"], json::array({"city"}));

  r = chat_with(R"(, "tool_choice": "required", "parallel_tool_calls": false)");
  EXPECT_EQ(r.tools.choice, ToolChoice::kRequired);
  EXPECT_FALSE(r.tools.parallel);
  const json schema = json::parse(r.params.structured_outputs.json);
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_EQ(schema["maxItems"], 1);
  ASSERT_EQ(schema["items"]["anyOf"].size(), 2u);
  EXPECT_EQ(schema["items"]["anyOf"][1]["properties"]["name"]["enum"], json::array({"now"}));
  EXPECT_EQ(schema["items"]["anyOf"][1]["properties"]["parameters"], (json{{"type", "object"}}));

  // No tools: no tool choice.
  r = parse_chat_request(parse_json_body(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none"})"));
  EXPECT_EQ(r.tools.choice, ToolChoice::kNone);
}

TEST(ToolRequest, BadInputIsA400NamingTheField) {
  const std::string m = R"({"messages": [{"role": "user", "content": "x"}], )";
  EXPECT_EQ(error_of(m + R"("tools": {"a": 1}})").first, "tools");
  EXPECT_EQ(error_of(m + R"("tools": [{"type": "retrieval"}]})").first, "tools");
  auto [param, message] = error_of(m + R"("tools": [{"type": "function", "function": {"name": ""}}]})");
  EXPECT_EQ(param, "tools");
  EXPECT_NE(message.find("tools[0].function.name"), std::string::npos) << message;
  EXPECT_EQ(error_of(m + R"("tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})").first,
            "tools");
  EXPECT_EQ(error_of(m + R"("tool_choice": "required"})").first, "tool_choice");  // without tools
  EXPECT_EQ(error_of(m + R"("tools": )" + kTools + R"(, "tool_choice": "sometimes"})").first, "tool_choice");
  std::tie(param, message) =
      error_of(m + R"("tools": )" + kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}}})");
  EXPECT_EQ(param, "tool_choice");
  EXPECT_NE(message.find("nope"), std::string::npos) << message;
  EXPECT_EQ(error_of(m + R"("tools": )" + kTools + R"(, "parallel_tool_calls": "yes"})").first, "parallel_tool_calls");
  // A forced call is the reply's grammar: no second one beside it.
  EXPECT_EQ(error_of(m + R"("tools": )" + kTools +
                     R"(, "tool_choice": "required", "response_format": {"type": "json_object"}})").first,
            "tool_choice");
}

TEST(ToolRequest, ToolMessagesReachTheTemplate) {
  const GenerationRequest r = parse_chat_request(parse_json_body(R"({"messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "22 C"}]})"));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1]["content"], "");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"], (json{{"city", "Paris"}}));
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(r.messages[2]["tool_call_id"], "call_1");

  EXPECT_EQ(error_of(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]})").first, "messages");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})").first, "messages");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "tool", "content": "x", "tool_call_id": 3}]})").first, "messages");
}

}  // namespace
}  // namespace minivllm::server
