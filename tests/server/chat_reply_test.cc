// A chat reply split into reasoning_content, content and tool calls (src/server/chat_reply.h and
// reasoning/): Qwen3's <think> block, with and without thinking, whole and streamed.
#include <gtest/gtest.h>

#include "server/chat_reply.h"
#include "server/reasoning/qwen3_reasoning.h"

namespace minivllm::server {
namespace {

ReplyDelta run(const ReplyParsing& parsing, const std::string& reply, size_t piece) {
  auto parser = parsing.make();
  ReplyDelta out;
  for (size_t i = 0; i < reply.size(); i += piece) out.append(parser->feed(std::string_view(reply).substr(i, piece)));
  out.append(parser->finish());
  return out;
}

// Whole and in pieces of 1, 2, 5 bytes: the same split.
ReplyDelta split(const ReplyParsing& parsing, const std::string& reply) {
  ReplyDelta whole = run(parsing, reply, reply.size() + 1);
  for (size_t piece : {1, 2, 5}) {
    ReplyDelta d = run(parsing, reply, piece);
    EXPECT_EQ(d.reasoning, whole.reasoning) << "piece " << piece << ": " << reply;
    EXPECT_EQ(d.content, whole.content) << "piece " << piece << ": " << reply;
    EXPECT_EQ(d.calls, whole.calls) << "piece " << piece << ": " << reply;
  }
  return whole;
}

ReplyParsing qwen3() {
  ReplyParsing p;
  p.reasoning = true;
  return p;
}

TEST(Qwen3Reasoning, ThoughtsApartFromTheAnswer) {
  ReplyDelta d = split(qwen3(), "<think>\nThe user greets me.\nI greet back.\n</think>\n\nHello! How can I help?");
  EXPECT_EQ(d.reasoning, "The user greets me.\nI greet back.");
  EXPECT_EQ(d.content, "Hello! How can I help?");
  // enable_thinking false: the template wrote the empty block, the reply is all answer.
  d = split(qwen3(), "Hello! <think> is a tag.");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Hello! <think> is a tag.");
  // Cut by max_tokens while thinking: all reasoning, as it streamed.
  d = split(qwen3(), "<think>\nLet me count: 1, 2");
  EXPECT_EQ(d.reasoning, "Let me count: 1, 2");
  EXPECT_EQ(d.content, "");
  d = split(qwen3(), "<think>\n\n</think>\n\nShort.");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Short.");
}

// A prompt that opened the block (DeepSeek-R1's distills, QwQ, Qwen3's thinking-only models end
// the generation prompt with <think>): the reply reasons from its start until </think>, a <think>
// it writes anyway is dropped, and a reply that never closes the block is all reasoning (vLLM's
// deepseek_r1 parser).
TEST(Qwen3Reasoning, APromptThatOpenedTheBlock) {
  ReplyParsing open = qwen3();
  open.thinking_open = true;
  ReplyDelta d = split(open, "The user greets me.\n</think>\n\nHello!");
  EXPECT_EQ(d.reasoning, "The user greets me.");
  EXPECT_EQ(d.content, "Hello!");
  d = split(open, "<think>\nHmm.\n</think>\n\nHi.");
  EXPECT_EQ(d.reasoning, "Hmm.");
  EXPECT_EQ(d.content, "Hi.");
  d = split(open, "Hello! <think> is a tag, no answer yet");
  EXPECT_EQ(d.reasoning, "Hello! <think> is a tag, no answer yet");
  EXPECT_EQ(d.content, "");
  d = split(open, "</think>\n\nJust the answer.");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Just the answer.");
  // The tail of a rendered prompt says which: an open block (whitespace after it allowed), or not.
  EXPECT_TRUE(prompt_opens_think("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(prompt_opens_think("<｜Assistant｜><think>"));
  EXPECT_FALSE(prompt_opens_think("<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_opens_think("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_think(""));
}

// Thinking is on unless the request turns it off as Qwen3's template reads it (`is false`).
TEST(Qwen3Reasoning, ThinkingEnabledUnlessTurnedOff) {
  EXPECT_TRUE(qwen3_thinking_enabled(nlohmann::json::object()));
  EXPECT_TRUE(qwen3_thinking_enabled({{"enable_thinking", true}}));
  EXPECT_TRUE(qwen3_thinking_enabled({{"enable_thinking", 0}}));  // not `false` to the template
  EXPECT_FALSE(qwen3_thinking_enabled({{"enable_thinking", false}}));
}

TEST(Qwen3Reasoning, StreamsThoughtsAsTheyCome) {
  Qwen3ReasoningStream s;
  EXPECT_EQ(s.feed("<thi").reasoning, "");
  EXPECT_EQ(s.feed("nk>\nStep one").reasoning, "Step one");
  ReasoningDelta d = s.feed(".\nStep two.\n</th");
  EXPECT_EQ(d.reasoning, ".\nStep two.");  // the newline before </think> is held, then dropped
  d = s.feed("ink>\n\nDone");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Done");
}

// Seed-OSS thinks inside <seed:think>...</seed:think> (vLLM's seed_oss parser): the same split by
// its own tags; Qwen3's tag in its reply is answer text.
TEST(Qwen3Reasoning, SeedOssTags) {
  ReplyParsing seed = qwen3();
  seed.think_tags = kSeedThinkTags;
  ReplyDelta d = split(seed, "<seed:think>\nThe user asks for a sum.\n</seed:think>\n2 + 2 = 4, <think> aside.");
  EXPECT_EQ(d.reasoning, "The user asks for a sum.");
  EXPECT_EQ(d.content, "2 + 2 = 4, <think> aside.");
  d = split(seed, "<think>x</think>y");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "<think>x</think>y");
  seed.thinking_open = true;
  d = split(seed, "Still thinking.</seed:think>Answer.");
  EXPECT_EQ(d.reasoning, "Still thinking.");
  EXPECT_EQ(d.content, "Answer.");
  EXPECT_TRUE(prompt_opens_think("<seed:bos>assistant\n<seed:think>\n", kSeedThinkTags));
  EXPECT_FALSE(prompt_opens_think("<seed:bos>assistant\n<seed:think>\n"));
}

TEST(ChatReply, ReasoningThenToolCalls) {
  ReplyParsing p = qwen3();
  p.choice = ToolChoice::kAuto;
  p.syntax = ToolParserKind::kHermes;
  ReplyDelta d = split(p, "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
                          "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  EXPECT_EQ(d.reasoning, "I need the weather.");
  EXPECT_EQ(d.content, "");
  EXPECT_EQ(d.calls, (std::vector<ToolCallPiece>{{0, "get_weather", R"({"city":"Paris"})"}}));
  // tool_choice none: no parsing at all.
  ReplyParsing none;
  none.syntax = ToolParserKind::kHermes;
  EXPECT_FALSE(none.active());
}

}  // namespace
}  // namespace minivllm::server
