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

// The reply fed `piece` bytes at a time; the calls' pieces joined (a piece with a name begins a call).
Split run(std::unique_ptr<ToolCallSyntax> syntax, const std::string& reply, size_t piece, bool parallel = true,
          bool stream_arguments = false) {
  ToolCallStream stream(std::move(syntax), parallel, stream_arguments);
  Split out;
  auto take = [&](ToolStreamDelta d) {
    out.content += d.content;
    for (const ToolCallPiece& c : d.calls) {
      EXPECT_EQ(c.index, static_cast<int>(out.calls.size()) - (c.name.empty() ? 1 : 0));
      if (!c.name.empty()) {
        out.calls.push_back({c.name, c.arguments});
      } else if (!out.calls.empty()) {
        out.calls.back().arguments += c.arguments;
      } else {
        ADD_FAILURE() << "a piece without a name opened the calls";
      }
    }
  };
  for (size_t i = 0; i < reply.size(); i += piece) take(stream.feed(std::string_view(reply).substr(i, piece)));
  take(stream.finish());
  EXPECT_EQ(stream.num_calls(), static_cast<int>(out.calls.size()));
  return out;
}

// The split of `reply` by `kind`, checked to be the same fed whole and 1, 2, 3 and 7 bytes at a time.
// With the arguments streamed, the joined pieces are the same calls, but for a call the reply was
// cut inside, which a stream has begun (the whole reply gives it as content).
Split split(ToolParserKind kind, const std::string& reply, bool parallel = true,
            const nlohmann::json& tools = nlohmann::json()) {
  Split whole = run(make_tool_call_syntax(kind, tools), reply, reply.size() + 1, parallel);
  for (size_t piece : {1, 2, 3, 7}) {
    Split s = run(make_tool_call_syntax(kind, tools), reply, piece, parallel);
    EXPECT_EQ(s.content, whole.content) << "piece " << piece << ": " << reply;
    EXPECT_EQ(s.calls, whole.calls) << "piece " << piece << ": " << reply;
    Split streamed = run(make_tool_call_syntax(kind, tools), reply, piece, parallel, /*stream_arguments=*/true);
    const bool cut = streamed.calls.size() == whole.calls.size() + 1;
    EXPECT_TRUE(streamed.calls.size() == whole.calls.size() || cut) << "piece " << piece << ": " << reply;
    EXPECT_TRUE(std::equal(whole.calls.begin(), whole.calls.end(), streamed.calls.begin()))
        << "piece " << piece << ": " << reply;
    if (!cut) {
      EXPECT_EQ(streamed.content, whole.content) << "piece " << piece << ": " << reply;
    }
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

// GLM-4.5's calls: the name on the block's first line, then key / value pairs; a string
// parameter's value is its text, any other value JSON when it parses (vLLM's glm45 parser).
TEST(Glm45Syntax, CallsAndContent) {
  const nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"},
                                                      "days": {"type": "integer"}}}}}])");
  const std::string paris = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
                            "<arg_key>unit</arg_key>\n<arg_value>C</arg_value>\n</tool_call>";
  Split s = split(ToolParserKind::kGlm45, "Let me check.\n" + paris, true, tools);
  EXPECT_EQ(s.content, "Let me check.\n");
  EXPECT_EQ(s.calls, std::vector<ParsedToolCall>{kParis});
  // A string parameter whose text looks like JSON stays text; a typed one is JSON; no arguments: {}.
  const std::string typed = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>123</arg_value>\n"
                            "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n"
                            "<tool_call>now\n</tool_call>";
  s = split(ToolParserKind::kGlm45, typed, true, tools);
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{{"get_weather", R"({"city":"123","days":3})"}, {"now", "{}"}}));
  // Without the tools' schemas: JSON wherever it parses, else text.
  s = split(ToolParserKind::kGlm45, typed);
  EXPECT_EQ(s.calls[0], (ParsedToolCall{"get_weather", R"({"city":123,"days":3})"}));
  s = split(ToolParserKind::kGlm45, "<tool_call>f<arg_key>q</arg_key><arg_value>{\"a\": [1, 2]}</arg_value>"
                                    "<arg_key>w</arg_key><arg_value>two words</arg_value></tool_call>");
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{{"f", R"({"q":{"a":[1,2]},"w":"two words"})"}}));
  // parallel_tool_calls false: the first call.
  s = split(ToolParserKind::kGlm45, paris + paris, false, tools);
  EXPECT_EQ(s.calls, std::vector<ParsedToolCall>{kParis});
  // What does not read as a call (no name, a stray text between pairs, cut by max_tokens) is content.
  for (const char* reply : {"<tool_call>\n<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>",
                            "<tool_call>f\n<arg_key>x</arg_key>junk<arg_value>1</arg_value></tool_call>",
                            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par"}) {
    s = split(ToolParserKind::kGlm45, reply, true, tools);
    EXPECT_EQ(s.content, reply);
    EXPECT_TRUE(s.calls.empty()) << reply;
  }
}

// Qwen3-Coder's and Seed-OSS's calls: <function=NAME> with <parameter=KEY> values, one newline off
// each end of a value, typed by the request's schemas (a boolean as Python writes it).
TEST(XmlFunctionSyntax, CallsAndContent) {
  const nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"},
                     "days": {"type": "integer"}, "hourly": {"type": "boolean"}}}}}])");
  const std::string paris = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                            "<parameter=unit>\nC\n</parameter>\n</function>\n";
  Split s = split(ToolParserKind::kQwen3Coder, "I'll look.\n<tool_call>\n" + paris + "</tool_call>", true, tools);
  EXPECT_EQ(s.content, "I'll look.\n");
  EXPECT_EQ(s.calls, std::vector<ParsedToolCall>{kParis});
  s = split(ToolParserKind::kSeedOss, "<seed:tool_call>\n" + paris + "</seed:tool_call>", true, tools);
  EXPECT_EQ(s.calls, std::vector<ParsedToolCall>{kParis});
  const std::string typed = "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n"
                            "<parameter=days>\n3\n</parameter>\n<parameter=hourly>\nTrue\n</parameter>\n"
                            "<parameter=note>\nline one\nline two\n</parameter>\n</function>\n</tool_call>"
                            "<tool_call><function=now></function></tool_call>";
  s = split(ToolParserKind::kQwen3Coder, typed, true, tools);
  EXPECT_EQ(s.calls, (std::vector<ParsedToolCall>{
                         {"get_weather", R"({"city":"42","days":3,"hourly":true,"note":"line one\nline two"})"},
                         {"now", "{}"}}));
  s = split(ToolParserKind::kQwen3Coder, paris + "<tool_call>" + paris, true, tools);  // the first is prose
  EXPECT_EQ(s.content, paris);
  EXPECT_EQ(s.calls, std::vector<ParsedToolCall>{kParis});
  for (const char* reply : {"<tool_call>\n<function=f>\n<parameter=x>1</parameter>\nstray</function></tool_call>",
                            "<tool_call><parameter=x>1</parameter></tool_call>",
                            "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar"}) {
    s = split(ToolParserKind::kQwen3Coder, reply, true, tools);
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
  EXPECT_EQ(d.calls, (std::vector<ToolCallPiece>{{0, "a", "{}"}}));
  EXPECT_TRUE(stream.feed("\n<tool_call>{\"name\": \"b\", \"arguments\": {\"x\"").calls.empty());
  EXPECT_EQ(stream.feed(": 1}}</tool_call>").calls, (std::vector<ToolCallPiece>{{1, "b", "{\"x\":1}"}}));
  EXPECT_TRUE(stream.finish().calls.empty());
}

// Streamed arguments (OpenAI's delta.tool_calls[i].function.arguments in pieces): the name once the
// arguments object opens, then the arguments as they are written, less their whitespace; the
// pieces add up to the call's arguments. Each syntax that can tell where a call's arguments are.
TEST(ToolCallStream, ArgumentsStreamAsTheyAreWritten) {
  using P = std::vector<ToolCallPiece>;
  ToolCallStream hermes(make_tool_call_syntax(ToolParserKind::kHermes), true, /*stream_arguments=*/true);
  EXPECT_TRUE(hermes.feed("<tool_call>\n{\"name\": \"get_weather\", ").calls.empty());
  EXPECT_EQ(hermes.feed("\"arguments\": {\"ci").calls, (P{{0, "get_weather", "{\"ci"}}));
  EXPECT_EQ(hermes.num_calls(), 1);
  EXPECT_EQ(hermes.feed("ty\": \"Pa").calls, (P{{0, "", "ty\":\"Pa"}}));
  EXPECT_EQ(hermes.feed("ris, FR\"").calls, (P{{0, "", "ris, FR\""}}));  // space inside a string kept
  EXPECT_EQ(hermes.feed("}}\n</tool_call>").calls, (P{{0, "", "}"}}));
  // The name after the arguments: the call begins once the name is whole.
  EXPECT_EQ(hermes.feed("\n<tool_call>{\"arguments\": {}, \"name\": \"no").calls, (P{}));
  EXPECT_EQ(hermes.feed("w\"}").calls, (P{{1, "now", "{}"}}));
  EXPECT_EQ(hermes.feed("</tool_call>").calls, (P{}));
  EXPECT_TRUE(hermes.finish().calls.empty());
  EXPECT_EQ(hermes.num_calls(), 2);

  ToolCallStream named(make_named_tool_syntax("f"), true, true);
  EXPECT_EQ(named.feed(" {\"a\": [1, ").calls, (P{{0, "f", "{\"a\":[1,"}}));
  EXPECT_EQ(named.feed("2]}").calls, (P{{0, "", "2]}"}}));
  EXPECT_TRUE(named.finish().calls.empty());

  ToolCallStream required(make_required_tools_syntax(), true, true);
  EXPECT_EQ(required.feed("[{\"name\": \"a\", \"parameters\": {\"x\": ").calls, (P{{0, "a", "{\"x\":"}}));
  EXPECT_EQ(required.feed("\"y\"}}, {\"name\": \"b\", \"parameters\": {").calls,
            (P{{0, "", "\"y\"}"}, {1, "b", "{"}}));
  EXPECT_EQ(required.feed("}}]").calls, (P{{1, "", "}"}}));

  ToolCallStream mistral(make_tool_call_syntax(ToolParserKind::kMistral), true, true);
  EXPECT_EQ(mistral.feed("[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"k\"").calls, (P{{0, "a", "{\"k\""}}));
  EXPECT_EQ(mistral.feed(": 2}}]").calls, (P{{0, "", ":2}"}}));

  // Llama 3's calls are prose until a ';' or the reply's end follows: they go out whole.
  ToolCallStream llama(make_tool_call_syntax(ToolParserKind::kLlama3Json), true, true);
  EXPECT_TRUE(llama.feed("{\"name\": \"a\", \"parameters\": {\"k\": 1").calls.empty());
  EXPECT_TRUE(llama.feed("}}").calls.empty());
  EXPECT_EQ(llama.finish().calls, (P{{0, "a", "{\"k\":1}"}}));

  // parallel_tool_calls false: only the first call, streamed.
  ToolCallStream single(make_tool_call_syntax(ToolParserKind::kHermes), false, true);
  EXPECT_EQ(single.feed("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": "
                        "\"b\", \"arguments\": {\"z").calls,
            (P{{0, "a", "{}"}}));
  EXPECT_EQ(single.num_calls(), 1);
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
  // GLM-4.5's template shows <tool_call> too, with its key / value pairs.
  EXPECT_EQ(pick_tool_parser("Glm4MoeForCausalLM", "<tool_call>{{ tc.name }}\n<arg_key>{{ k }}</arg_key>"),
            ToolParserKind::kGlm45);
  EXPECT_EQ(tool_parser_from_name("glm45"), ToolParserKind::kGlm45);
  // Qwen3-Coder's shows <tool_call> with <function=...>; Seed-OSS's its own tag.
  EXPECT_EQ(pick_tool_parser("Qwen3MoeForCausalLM", "<tool_call>\n<function={{ tool_call.name }}>"),
            ToolParserKind::kQwen3Coder);
  EXPECT_EQ(pick_tool_parser("SeedOssForCausalLM", "<seed:tool_call>\n<function="), ToolParserKind::kSeedOss);
  EXPECT_EQ(tool_parser_from_name("qwen3_coder"), ToolParserKind::kQwen3Coder);
  EXPECT_STREQ(tool_parser_name(ToolParserKind::kSeedOss), "seed_oss");
  EXPECT_STREQ(tool_parser_name(ToolParserKind::kGlm45), "glm45");
}

}  // namespace
}  // namespace minivllm::server
