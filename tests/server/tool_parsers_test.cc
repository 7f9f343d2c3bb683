// The tool-call syntaxes (src/server/tool_parsers/): each family's replies read into calls, the
// same split whether the reply comes whole or a few bytes at a time, and replies that are not calls
// left as content.
#include <gtest/gtest.h>

#include "server/tool_parsers/tool_call_stream.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {
namespace {

struct Split {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

Split run(std::unique_ptr<ToolCallSyntax> syntax, const std::string& reply, size_t piece, bool parallel = true) {
  ToolCallStream stream(std::move(syntax), parallel);
  Split out;
  auto take = [&](ToolStreamDelta d) {
    out.content += d.content;
    for (auto& c : d.calls) out.calls.push_back(c);
  };
  for (size_t i = 0; i < reply.size(); i += piece) take(stream.feed(std::string_view(reply).substr(i, piece)));
  take(stream.finish());
  EXPECT_EQ(stream.num_calls(), static_cast<int>(out.calls.size()));
  return out;
}

// The split of `reply` by `kind`, checked to be the same fed whole and 1, 2, 3 and 7 bytes at a time.
Split split(ToolParserKind kind, const std::string& reply, bool parallel = true) {
  Split whole = run(make_tool_call_syntax(kind), reply, reply.size() + 1, parallel);
  for (size_t piece : {1, 2, 3, 7}) {
    Split s = run(make_tool_call_syntax(kind), reply, piece, parallel);
    EXPECT_EQ(s.content, whole.content) << "piece " << piece << ": " << reply;
    EXPECT_EQ(s.calls, whole.calls) << "piece " << piece << ": " << reply;
  }
  return whole;
}

const ParsedToolCall kParis{"get_weather", R"({"city":"Paris","unit":"C"})"};
const ParsedToolCall kRome{"get_weather", R"({"city":"Rome"})"};

TEST(HermesSyntax, CallsAndContent) {
  Split s = split(ToolParserKind::kHermes,
                  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"C\"}}\n"
                  "</tool_call>");
  EXPECT_EQ(s.content, "");
  EXPECT_EQ(s.calls, std::vector<ParsedToolCall>{kParis});

  s = split(ToolParserKind::kHermes,
            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
            "\"C\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": "
            "\\\"Rome\\\"}\"}\n</tool_call>");
  EXPECT_EQ(s.content, "Let me check.\n");
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{kParis, kRome}));  // arguments given as a string too

  // parallel_tool_calls false: the first call only.
  s = split(ToolParserKind::kHermes,
            "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>", /*parallel=*/false);
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{{"a", "{}"}}));

  // A last block left open (the model stopped before </tool_call>) is read when its JSON is whole.
  s = split(ToolParserKind::kHermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n");
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{{"now", "{}"}}));
}

TEST(HermesSyntax, WhatIsNotACallIsContent) {
  for (const std::string reply : {"The answer is 4.", "I use <tool without closing", "a < b and <tool_ca",
                                  "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1", "<tool_call>not json</tool_call>",
                                  "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>[1, 2]</tool_call>"}) {
    Split s = split(ToolParserKind::kHermes, reply);
    EXPECT_EQ(s.content, reply);
    EXPECT_TRUE(s.calls.empty()) << reply;
  }
}

TEST(Llama3JsonSyntax, CallsAndContent) {
  Split s = split(ToolParserKind::kLlama3Json,
                  " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"C\"}}");
  EXPECT_EQ(s.content, "");
  EXPECT_EQ(s.calls, std::vector<ParsedToolCall>{kParis});
  s = split(ToolParserKind::kLlama3Json,
            "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"C\"}}; "
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}");
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{kParis, kRome}));
  // JSON that is not a call, and JSON inside prose, stay content.
  for (const std::string reply : {"{\"answer\": 4}", "The call would be {\"name\": \"f\"}.", "{\"name\": \"f\"} and more"}) {
    s = split(ToolParserKind::kLlama3Json, reply);
    EXPECT_EQ(s.content, reply);
    EXPECT_TRUE(s.calls.empty()) << reply;
  }
}

TEST(MistralSyntax, CallsAndContent) {
  const std::string calls = "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"C\"}}, "
                            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]";
  Split s = split(ToolParserKind::kMistral, "[TOOL_CALLS] " + calls);
  EXPECT_EQ(s.content, "");
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{kParis, kRome}));
  s = split(ToolParserKind::kMistral, calls);  // [TOOL_CALLS] is special: the detokenizer drops it
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{kParis, kRome}));
  s = split(ToolParserKind::kMistral, "Sure. [TOOL_CALLS]" + calls);
  EXPECT_EQ(s.content, "Sure. ");
  EXPECT_EQ(s.calls.size(), 2u);
  for (const std::string reply : {"[1, 2, 3]", "Plain words.", "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {"}) {
    s = split(ToolParserKind::kMistral, reply);
    EXPECT_EQ(s.content, reply);
    EXPECT_TRUE(s.calls.empty()) << reply;
  }
}

TEST(ForcedToolSyntax, RequiredAndNamed) {
  Split s = run(make_required_tools_syntax(),
                "[{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Paris\",\"unit\":\"C\"}},"
                "{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Rome\"}}]", 5);
  EXPECT_EQ(s.content, "");
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{kParis, kRome}));
  s = run(make_named_tool_syntax("get_weather"), "{\"city\": \"Paris\", \"unit\": \"C\"}", 4);
  EXPECT_EQ(s.calls, std::vector<ParsedToolCall>{kParis});
  s = run(make_named_tool_syntax("get_weather"), "{\"city\": \"Par", 4);  // cut by max_tokens
  EXPECT_EQ(s.content, "{\"city\": \"Par");
  EXPECT_TRUE(s.calls.empty());
}

// Calls are handed out as each completes, not only at the end.
TEST(ToolCallStream, CallsArriveAsTheyComplete) {
  ToolCallStream stream(make_tool_call_syntax(ToolParserKind::kHermes), true);
  EXPECT_EQ(stream.feed("Hi <tool").content, "Hi ");
  ToolStreamDelta d = stream.feed("_call>{\"name\": \"a\"}</tool_call>");
  EXPECT_EQ(d.calls, (std::vector<ParsedToolCall>{{"a", "{}"}}));
  EXPECT_TRUE(stream.feed("\n<tool_call>{\"name\": \"b\"").calls.empty());
  EXPECT_EQ(stream.feed("}</tool_call>").calls, (std::vector<ParsedToolCall>{{"b", "{}"}}));
  EXPECT_TRUE(stream.finish().calls.empty());
}

TEST(ToolParserChoice, PickedFromTheModel) {
  EXPECT_EQ(pick_tool_parser("Qwen3ForCausalLM", "... <tool_call> ..."), ToolParserKind::kHermes);
  EXPECT_EQ(pick_tool_parser("LlamaForCausalLM", "{{- \"Environment: ipython\\n\" }}"), ToolParserKind::kLlama3Json);
  EXPECT_EQ(pick_tool_parser("llama", "<|im_start|>"), ToolParserKind::kHermes);  // SmolLM2's ChatML
  EXPECT_EQ(pick_tool_parser("MistralForCausalLM", "[INST]"), ToolParserKind::kMistral);
  EXPECT_EQ(pick_tool_parser("llama", "[TOOL_CALLS]"), ToolParserKind::kMistral);
  EXPECT_EQ(tool_parser_from_name("llama3_json"), ToolParserKind::kLlama3Json);
  EXPECT_EQ(tool_parser_from_name("pythonic"), std::nullopt);
  EXPECT_STREQ(tool_parser_name(ToolParserKind::kMistral), "mistral");
}

}  // namespace
}  // namespace minivllm::server
