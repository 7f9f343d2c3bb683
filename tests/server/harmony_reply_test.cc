// gpt-oss's harmony replies split into reasoning_content, content and tool calls
// (src/server/reasoning/harmony_reply.h), whole, in pieces and streamed; as vLLM's openai_gptoss
// reasoning parser and openai tool parser split them. The replies are written as gpt-oss writes
// them (its special tokens kept in the text; <|call|> and <|return|> end the sequence and are not).
#include <gtest/gtest.h>

#include "server/chat_reply.h"

namespace minivllm::server {
namespace {

ReplyDelta run(const ReplyParsing& parsing, const std::string& reply, size_t piece, bool streaming) {
  auto parser = parsing.make(streaming);
  ReplyDelta out;
  for (size_t i = 0; i < reply.size(); i += piece) out.append(parser->feed(std::string_view(reply).substr(i, piece)));
  out.append(parser->finish());
  EXPECT_EQ(parser->num_calls(), static_cast<int>(out.calls.size())) << reply;
  return out;
}

// Whole, and in pieces of 1, 2, 5 and 7 bytes: the same split. Streamed (arguments as written),
// the same calls too when the reply ends them (a call cut short has already gone out in part).
ReplyDelta split(const ReplyParsing& parsing, const std::string& reply, bool calls_complete = true) {
  ReplyDelta whole = run(parsing, reply, reply.size() + 1, false);
  for (size_t piece : {1, 2, 5, 7}) {
    for (bool streaming : {false, true}) {
      ReplyDelta d = run(parsing, reply, piece, streaming);
      EXPECT_EQ(d.reasoning, whole.reasoning) << "piece " << piece << ": " << reply;
      if (!streaming || calls_complete) {
        EXPECT_EQ(d.content, whole.content) << "piece " << piece << ": " << reply;
        EXPECT_EQ(d.calls, whole.calls) << "piece " << piece << " streaming " << streaming << ": " << reply;
      }
    }
  }
  return whole;
}

ReplyParsing harmony(bool reasoning = true, ToolChoice choice = ToolChoice::kAuto) {
  ReplyParsing p;
  p.harmony = true;
  p.reasoning = reasoning;
  p.choice = choice;
  p.syntax = ToolParserKind::kOpenAi;
  return p;
}

ToolCallPiece call(int index, std::string name, std::string arguments) {
  return ToolCallPiece{index, std::move(name), std::move(arguments)};
}

const std::string kThink = "<|channel|>analysis<|message|>The user greets me. I greet back.<|end|>";

TEST(HarmonyReply, AnalysisIsReasoningFinalIsContent) {
  ReplyDelta d = split(harmony(), kThink + "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?");
  EXPECT_EQ(d.reasoning, "The user greets me. I greet back.");
  EXPECT_EQ(d.content, "Hello! How can I help?");
  EXPECT_TRUE(d.calls.empty());
  // Text that only looks like markup stays where it is.
  d = split(harmony(), "<|channel|>final<|message|>if a <b and c<|d|> then <|endx");
  EXPECT_EQ(d.content, "if a <b and c<|d|> then <|endx");
  // The reasoning parser off (--reasoning-parser none): every channel is content.
  d = split(harmony(false), kThink + "<|start|>assistant<|channel|>final<|message|>Hi.");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "The user greets me. I greet back.Hi.");
}

TEST(HarmonyReply, ARecipientFunctionIsAToolCall) {
  // The recipient after the channel (as gpt-oss mostly writes it), the content type constrained.
  ReplyDelta d = split(harmony(), kThink +
                                      "<|start|>assistant<|channel|>commentary to=functions.get_weather "
                                      "<|constrain|>json<|message|>{\"city\": \"Paris\", \"unit\": \"c\"}");
  EXPECT_EQ(d.reasoning, "The user greets me. I greet back.");
  EXPECT_EQ(d.content, "");
  EXPECT_EQ(d.calls, std::vector<ToolCallPiece>{call(0, "get_weather", R"({"city":"Paris","unit":"c"})")});
  // The recipient in the role part; a preamble on commentary (no recipient) is content; two calls
  // (<|call|> ends the sequence, so a second call follows only where the server kept <|call|>).
  d = split(harmony(), "<|channel|>commentary<|message|>Checking both.<|end|>"
                       "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                       "{\"city\":\"Oslo\"}<|call|><|start|>assistant to=functions.now<|channel|>commentary<|message|>");
  EXPECT_EQ(d.content, "Checking both.");
  EXPECT_EQ(d.calls, (std::vector<ToolCallPiece>{call(0, "get_weather", R"({"city":"Oslo"})"), call(1, "now", "{}")}));
  // parallel_tool_calls false: the first call only.
  ReplyParsing one = harmony();
  one.parallel = false;
  d = split(one, "<|channel|>commentary to=functions.a<|message|>{}<|call|><|start|>assistant<|channel|>commentary "
                 "to=functions.b<|message|>{\"x\":1}");
  EXPECT_EQ(d.calls, std::vector<ToolCallPiece>{call(0, "a", "{}")});
}

// tool_choice required or named: the grammar wrote one call (harmony_first_test.cc); it is read as
// a call whatever the tool-call parser (none included).
TEST(HarmonyReply, AForcedCallIsACall) {
  for (ToolChoice forced : {ToolChoice::kRequired, ToolChoice::kNamed}) {
    ReplyParsing p = harmony(true, forced);
    p.syntax = std::nullopt;
    ReplyDelta d = split(p, kThink + "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json"
                                     "<|message|>{\"a\": [1]}");
    EXPECT_EQ(d.calls, std::vector<ToolCallPiece>{call(0, "f", R"({"a":[1]})")});
  }
}

TEST(HarmonyReply, WithoutToolsACallIsContent) {
  const std::string reply = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}";
  ReplyDelta d = split(harmony(true, ToolChoice::kNone), reply);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "{\"a\": 1}");
  // A built-in tool's recipient (not a function the request offered) is the model's own business.
  d = split(harmony(), "<|channel|>analysis<|message|>search.<|end|><|start|>assistant<|channel|>analysis "
                       "to=browser.search<|message|>{\"q\": \"x\"}");
  EXPECT_EQ(d.reasoning, "search.{\"q\": \"x\"}");
  EXPECT_TRUE(d.calls.empty());
}

TEST(HarmonyReply, CutShortNothingIsLost) {
  // Cut by max_tokens while thinking: all reasoning, as it streamed.
  ReplyDelta d = split(harmony(), "<|channel|>analysis<|message|>Let me count: 1, 2");
  EXPECT_EQ(d.reasoning, "Let me count: 1, 2");
  EXPECT_EQ(d.content, "");
  // Inside the next header: the header is markup, no text.
  d = split(harmony(), kThink + "<|start|>assistant<|channel|>fin");
  EXPECT_EQ(d.reasoning, "The user greets me. I greet back.");
  EXPECT_EQ(d.content, "");
  // Inside a call's arguments: not a call, its text is content (streamed, its pieces went out).
  d = split(harmony(), "<|channel|>commentary to=functions.f<|message|>{\"city\": \"Pa", /*calls_complete=*/false);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "{\"city\": \"Pa");
  ReplyDelta streamed = run(harmony(), "<|channel|>commentary to=functions.f<|message|>{\"city\": \"Pa", 3, true);
  EXPECT_EQ(streamed.calls, std::vector<ToolCallPiece>{call(0, "f", R"({"city":"Pa)")});
}

TEST(HarmonyReply, AReplyThatIsNotHarmonyIsContent) {
  for (const std::string reply : {"Hello there.", "<think>hi</think>", "to be or not<|message|>x", ""}) {
    ReplyDelta d = split(harmony(), reply);
    EXPECT_EQ(d.content, reply);
    EXPECT_EQ(d.reasoning, "");
  }
  // A header that never ends is not one.
  const std::string rambling = "<|channel|>" + std::string(600, 'a') + "<|message|>x";
  EXPECT_EQ(split(harmony(), rambling).content, rambling);
  // Text where the next message should open: the model left the format; content.
  ReplyDelta d = split(harmony(), kThink + "Sure: 42");
  EXPECT_EQ(d.content, "Sure: 42");
}

TEST(HarmonyReply, StreamedCallsGoOutAsWritten) {
  const std::string reply = kThink +
                            "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
                            "<|message|>{\"city\": \"Paris\"}";
  auto parser = harmony().make(/*streaming=*/true);
  std::vector<ToolCallPiece> pieces;
  for (size_t i = 0; i < reply.size(); i += 4) {
    for (ToolCallPiece& p : parser->feed(std::string_view(reply).substr(i, 4)).calls) pieces.push_back(p);
  }
  for (ToolCallPiece& p : parser->finish().calls) pieces.push_back(p);
  ASSERT_GE(pieces.size(), 3u);
  EXPECT_EQ(pieces[0], call(0, "get_weather", ""));  // the name as soon as the body opens
  std::string arguments;
  for (size_t i = 1; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].index, 0);
    EXPECT_EQ(pieces[i].name, "");
    arguments += pieces[i].arguments;
  }
  EXPECT_EQ(arguments, R"({"city":"Paris"})");
}

TEST(HarmonyReply, TheServerPicksItFromTheTemplate) {
  const std::string gpt_oss = "{{- '<|start|>assistant<|channel|>final<|message|>' }}";
  EXPECT_TRUE(is_harmony_template(gpt_oss));
  EXPECT_EQ(pick_tool_parser("GptOssForCausalLM", gpt_oss), ToolParserKind::kOpenAi);
  EXPECT_FALSE(is_harmony_template("<|im_start|>assistant<tool_call>"));
  EXPECT_EQ(tool_parser_from_name("openai"), ToolParserKind::kOpenAi);
  EXPECT_STREQ(tool_parser_name(ToolParserKind::kOpenAi), "openai");
}

}  // namespace
}  // namespace minivllm::server
