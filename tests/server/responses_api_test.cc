// /v1/responses as a chat request and back (server/responses_api.h): input items and instructions
// into messages, the flat function tools and text.format into chat's fields, the chat parser then
// accepting the result; a chat completion's reply, thoughts and calls as output items, whole or as
// a stream's typed events; what the server cannot do refused naming the field.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/json_body.h"
#include "server/openai_request.h"
#include "server/response_store.h"
#include "server/responses_api.h"
#include "server/responses_stream.h"

namespace minivllm::server {
namespace {

using nlohmann::json;

std::string refused_param(const json& body) {
  try {
    parse_chat_request(responses_to_chat_body(body));
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e.param();
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return "";
}

TEST(ResponsesApi, InputAndInstructionsBecomeMessages) {
  const json chat = responses_to_chat_body(
      {{"model", "m"}, {"input", "Hi"}, {"instructions", "Be brief."}, {"max_output_tokens", 7}, {"top_k", 3}});
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": "Hi"}])"));
  EXPECT_EQ(chat["max_completion_tokens"], 7);
  const GenerationRequest g = parse_chat_request(chat);
  EXPECT_EQ(g.model, "m");
  EXPECT_EQ(g.max_tokens, 7);
  EXPECT_EQ(g.params.top_k, 3);  // vLLM's sampling keys pass through

  // Items: developer is the system turn, text parts join, an earlier call and its output become
  // chat's assistant tool_calls and tool message, thoughts are left to the template.
  const json items = json::parse(R"([
    {"role": "developer", "content": "sys"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\": 1}"},
    {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "one"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]}])");
  const json m = responses_to_chat_body({{"input", items}})["messages"];
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], json::parse(R"({"role": "system", "content": "sys"})"));
  EXPECT_EQ(m[1]["content"], "ab");
  EXPECT_EQ(m[2]["role"], "assistant");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[2]["tool_calls"][1]["function"]["name"], "g");
  EXPECT_EQ(m[4], json::parse(R"({"role": "tool", "tool_call_id": "c2", "content": "two"})"));
  EXPECT_NO_THROW(parse_chat_request(responses_to_chat_body({{"input", items}})));
}

TEST(ResponsesApi, ToolsAndTextFormatBecomeChatFields) {
  const json body = json::parse(R"({"input": "w?", "parallel_tool_calls": false,
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
    "tool_choice": {"type": "function", "name": "get_weather"}})");
  const json chat = responses_to_chat_body(body);
  EXPECT_EQ(chat["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(chat["tool_choice"], json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  const GenerationRequest g = parse_chat_request(chat);
  EXPECT_TRUE(g.tools.forces_calls());
  EXPECT_FALSE(g.tools.parallel);
  EXPECT_EQ(responses_tools_in_order(body.dump())[0]["function"]["parameters"]["required"][0], "city");

  const json schema = json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  const json fmt = responses_to_chat_body(
      {{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "n"}, {"schema", schema}}}}}});
  EXPECT_EQ(fmt["response_format"]["json_schema"]["schema"], schema);
  EXPECT_FALSE(parse_chat_request(fmt).params.structured_outputs.empty());
  const json plain = responses_to_chat_body({{"input", "x"}, {"text", {{"format", {{"type", "text"}}}}}});
  EXPECT_TRUE(parse_chat_request(plain).params.structured_outputs.empty());
  // reasoning.effort is chat's reasoning_effort (the server refuses it, as "reasoning", for a
  // template without one).
  const json effort = responses_to_chat_body({{"input", "x"}, {"reasoning", {{"effort", "high"}}}});
  EXPECT_EQ(parse_chat_request(effort).reasoning_effort, "high");
}

TEST(ResponsesApi, WhatCannotBeServedIsRefusedNamingTheField) {
  EXPECT_EQ(refused_param({{"input", "x"}, {"stream", "yes"}}), "stream");
  EXPECT_EQ(refused_param({{"input", "x"}, {"previous_response_id", 7}}), "previous_response_id");
  EXPECT_EQ(refused_param({{"input", "x"}, {"store", "yes"}}), "store");
  EXPECT_EQ(refused_param({{"input", "x"}, {"conversation", "conv_1"}}), "conversation");
  EXPECT_EQ(refused_param({{"input", "x"}, {"reasoning", {{"summary", "auto"}}}}), "reasoning");
  EXPECT_EQ(refused_param({{"input", "x"}, {"reasoning", "high"}}), "reasoning");
  EXPECT_EQ(refused_param({{"input", "x"}, {"n", 2}}), "n");
  EXPECT_EQ(refused_param({{"input", "x"}, {"frobnicate", 1}}), "frobnicate");
  EXPECT_EQ(refused_param({{"model", "m"}}), "input");
  EXPECT_EQ(refused_param({{"input", json::array()}}), "input");
  EXPECT_EQ(refused_param({{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}}}}}}}}),
            "input[0].content");
  EXPECT_EQ(refused_param({{"input", {{{"type", "item_reference"}, {"id", "x"}}}}}), "input[0]");  // unresolved
  EXPECT_EQ(refused_param({{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}), "tools[0]");
  EXPECT_EQ(refused_param({{"input", "x"}, {"text", {{"format", {{"type", "yaml"}}}}}}), "text.format.type");
  EXPECT_EQ(refused_param({{"input", "x"}, {"max_output_tokens", -1}}), "max_completion_tokens");
  // Bookkeeping that changes no token is accepted, as in chat.
  EXPECT_NO_THROW(parse_chat_request(responses_to_chat_body(
      {{"input", "x"}, {"store", true}, {"metadata", {{"k", "v"}}}, {"user", "u"}, {"truncation", "disabled"}})));
}

TEST(ResponsesApi, ChatCompletionBecomesAResponse) {
  const json completion = json::parse(R"({"id": "chatcmpl-abc", "object": "chat.completion", "created": 5, "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Let me look.",
      "reasoning_content": "thinking", "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
              "prompt_tokens_details": {"cached_tokens": 2}}})");
  const json r = chat_completion_to_response(completion, {{"input", "x"}, {"max_output_tokens", 9}});
  EXPECT_EQ(r["id"], "resp_abc");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["max_output_tokens"], 9);
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "thinking");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Let me look.");
  EXPECT_EQ(r["output"][2], json::parse(R"({"type": "function_call", "id": "fc_call_1", "call_id": "call_1",
                                           "name": "f", "arguments": "{}", "status": "completed"})"));
  EXPECT_EQ(r["usage"]["input_tokens"], 10);
  EXPECT_EQ(r["usage"]["output_tokens"], 4);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(r["store"], true);  // kept for a previous_response_id, unless the request says store: false
  EXPECT_EQ(r["previous_response_id"], nullptr);
  const json next = chat_completion_to_response(
      completion, {{"input", "x"}, {"previous_response_id", "resp_0"}, {"store", false}});
  EXPECT_EQ(next["previous_response_id"], "resp_0");
  EXPECT_EQ(next["store"], false);

  json cut = completion;
  cut["choices"][0]["finish_reason"] = "length";
  cut["choices"][0]["message"] = {{"role", "assistant"}, {"content", "Par"}};
  const json c = chat_completion_to_response(cut, {{"input", "x"}});
  EXPECT_EQ(c["status"], "incomplete");
  EXPECT_EQ(c["incomplete_details"]["reason"], "max_output_tokens");
  ASSERT_EQ(c["output"].size(), 1u);
  EXPECT_EQ(c["output"][0]["status"], "incomplete");
}

// previous_response_id: the stored conversation goes after the new instructions (the previous ones do
// not carry over) and before the new input; the conversation stored next is the previous one, the
// input and the reply's items as they would come back as input (its reasoning left out).
TEST(ResponsesApi, APreviousResponsesConversationComesBeforeTheInput) {
  const json previous = json::parse(R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}])");
  const json body = json::parse(R"({"previous_response_id": "resp_1", "instructions": "Be brief.",
    "input": [{"type": "function_call_output", "call_id": "call_1", "output": "22 C"}]})");
  const json chat = responses_to_chat_body(body, previous);
  ASSERT_EQ(chat["messages"].size(), 4u);
  EXPECT_EQ(chat["messages"][0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(chat["messages"][1], previous[0]);
  EXPECT_EQ(chat["messages"][2], previous[1]);
  EXPECT_EQ(chat["messages"][3]["role"], "tool");
  EXPECT_EQ(chat["messages"][3]["tool_call_id"], "call_1");
  EXPECT_NO_THROW(parse_chat_request(chat));

  const json response = json::parse(R"({"id": "resp_2", "output": [
    {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "hmm"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "22 C in Paris."}]},
    {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"}]})");
  const json stored = conversation_after(previous, body, response);
  ASSERT_EQ(stored.size(), 5u);  // no instructions: the next request brings its own
  EXPECT_EQ(stored[0], previous[0]);
  EXPECT_EQ(stored[2]["role"], "tool");
  // The reply as its items would come back as input: the text, then the call.
  EXPECT_EQ(stored[3], json({{"role", "assistant"}, {"content", "22 C in Paris."}}));
  EXPECT_EQ(stored[4], json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
    {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]})"));
  // Chained: the stored conversation serves the next request as any other.
  EXPECT_NO_THROW(parse_chat_request(responses_to_chat_body({{"input", "And Rome?"}}, stored)));
}

// The store keeps the newest `capacity` conversations; the oldest goes first, a rewrite keeps its place.
TEST(ResponsesApi, TheStoreForgetsTheOldestPastItsCapacity) {
  ResponseStore store(2);
  auto kept = [&](const char* id) { return store.find(id) ? store.find(id)->conversation : json(); };
  store.put("a", {{{"id", "a"}}, json::array({1}), json::array()});
  store.put("b", {{{"id", "b"}}, json::array({2}), json::array()});
  store.put("a", {{{"id", "a"}}, json::array({3}), json::array()});
  EXPECT_EQ(kept("a"), json::array({3}));
  EXPECT_EQ(store.find("a")->response, json({{"id", "a"}}));
  store.put("c", {{{"id", "c"}}, json::array({4}), json::array()});
  EXPECT_FALSE(store.find("a").has_value());
  EXPECT_EQ(kept("b"), json::array({2}));
  EXPECT_EQ(kept("c"), json::array({4}));
  EXPECT_TRUE(store.erase("b"));
  EXPECT_FALSE(store.erase("b"));
  EXPECT_FALSE(store.find("b").has_value());
  store.put("d", {{{"id", "d"}}, json::array({5}), json::array()});  // "b"'s erasure left room: "c" stays
  EXPECT_EQ(kept("c"), json::array({4}));
  EXPECT_FALSE(ResponseStore(0).find("a").has_value());
}

// item_reference: the store finds a kept response's input and output items by id (the newest response's
// first); resolve_item_references puts them in place, and the request runs as if they were sent. An id
// the store does not keep is a 404, a missing or non-string id a 400, each naming input[i].id.
TEST(ResponsesApi, ItemReferencesAreAKeptResponsesItems) {
  ResponseStore store;
  const json asked = json::parse(R"([{"type": "message", "id": "msg_r1_0", "role": "user",
                                      "content": [{"type": "input_text", "text": "Weather in Paris?"}]}])");
  const json response = json::parse(R"({"id": "resp_r1", "output": [
    {"type": "function_call", "id": "fc_r1", "call_id": "call_1", "name": "get_weather",
     "arguments": "{\"city\": \"Paris\"}", "status": "completed"},
    {"type": "message", "id": "msg_r1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]}]})");
  store.put("resp_r1", {response, json::array(), asked});
  store.put("resp_r0", {{{"id", "resp_r0"}, {"output", json::array()}}, json::array(), json::array()});
  EXPECT_EQ(store.find_item("msg_r1_0"), asked[0]);
  EXPECT_EQ(store.find_item("fc_r1"), response["output"][0]);
  EXPECT_FALSE(store.find_item("fc_none").has_value());
  auto find = [&](const std::string& id) { return store.find_item(id); };
  const json body = resolve_item_references(
      json::parse(R"({"input": [{"type": "item_reference", "id": "msg_r1_0"}, {"type": "item_reference", "id": "fc_r1"},
                                {"type": "function_call_output", "call_id": "call_1", "output": "22 C"},
                                {"type": "item_reference", "id": "msg_r1"}]})"),
      find);
  EXPECT_EQ(body["input"][0], asked[0]);
  EXPECT_EQ(body["input"][3], response["output"][1]);
  const json messages = responses_to_chat_body(body)["messages"];
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[0], json({{"role", "user"}, {"content", "Weather in Paris?"}}));
  EXPECT_EQ(messages[1]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(messages[2]["role"], "tool");
  EXPECT_EQ(messages[3], json({{"role", "assistant"}, {"content", "Checking."}}));
  auto status_and_param = [&](const json& input) -> std::pair<int, std::string> {
    try {
      resolve_item_references({{"input", input}}, find);
    } catch (const ApiError& e) {
      return {e.status(), e.param()};
    }
    return {200, ""};
  };
  EXPECT_EQ(status_and_param(json::parse(R"(["hi", {"type": "item_reference", "id": "fc_gone"}])")),
            (std::pair<int, std::string>{404, "input[1].id"}));
  EXPECT_EQ(status_and_param(json::parse(R"([{"type": "item_reference", "id": 7}])")),
            (std::pair<int, std::string>{400, "input[0].id"}));
  EXPECT_EQ(status_and_param(json::parse(R"([{"type": "item_reference"}])")),
            (std::pair<int, std::string>{400, "input[0].id"}));
}

// The events of a stream, parsed back: (type, data).
std::vector<std::pair<std::string, json>> events_of(const std::string& sse) {
  std::vector<std::pair<std::string, json>> out;
  size_t at = 0, end;
  while ((end = sse.find("\n\n", at)) != std::string::npos) {
    const std::string ev = sse.substr(at, end - at);
    at = end + 2;
    const size_t nl = ev.find('\n');
    EXPECT_TRUE(ev.starts_with("event: ") && nl != std::string::npos) << ev;
    const json data = json::parse(ev.substr(nl + 7));
    EXPECT_EQ(data["type"], ev.substr(7, nl - 7));
    out.emplace_back(ev.substr(7, nl - 7), data);
  }
  return out;
}

std::string sse(const std::string& data) { return "data: " + data + "\n\n"; }

TEST(ResponsesApi, StreamedChunksBecomeTypedEvents) {
  const json body = {{"input", "x"}, {"stream", true}};
  EXPECT_EQ(responses_to_chat_body(body)["stream_options"]["include_usage"], true);
  ResponsesStream stream(body);
  const std::string head = R"({"id": "chatcmpl-s1", "created": 3, "model": "m", "choices": [)";
  // Thoughts, an answer in two pieces (the second arriving split in two writes), a call, the end.
  std::string out = stream.rewrite(sse(head + R"({"index": 0, "delta": {"role": "assistant", "content": ""}}]})"));
  out += stream.rewrite(sse(head + R"({"index": 0, "delta": {"reasoning_content": "hm"}}]})"));
  out += stream.rewrite(sse(head + R"({"index": 0, "delta": {"content": "Le"}}]})"));
  const std::string piece = sse(head + R"({"index": 0, "delta": {"content": "t me"}}]})");
  out += stream.rewrite(piece.substr(0, 20));
  out += stream.rewrite(piece.substr(20));
  out += stream.rewrite(": keep-alive\n\n");
  out += stream.rewrite(sse(head + R"({"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
    "type": "function", "function": {"name": "f", "arguments": "{\"a\""}}]}}]})"));
  out += stream.rewrite(sse(head + R"({"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}]})"));
  out += stream.rewrite(sse(head + R"({"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})"));
  out += stream.rewrite(sse(R"({"id": "chatcmpl-s1", "created": 3, "model": "m", "choices": [],
    "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}})"));
  out += stream.rewrite("data: [DONE]\n\n");
  EXPECT_NE(out.find(": keep-alive\n\n"), std::string::npos);
  out.erase(out.find(": keep-alive\n\n"), 14);
  const auto events = events_of(out);
  std::vector<std::string> types;
  for (const auto& [type, data] : events) types.push_back(type);
  EXPECT_EQ(types, (std::vector<std::string>{
                       "response.created", "response.in_progress",
                       "response.output_item.added", "response.reasoning_text.delta",  // the thoughts
                       "response.reasoning_text.done", "response.output_item.done",
                       "response.output_item.added", "response.content_part.added",  // the answer
                       "response.output_text.delta", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done", "response.output_item.done",
                       "response.output_item.added", "response.function_call_arguments.delta",  // the call
                       "response.function_call_arguments.delta", "response.function_call_arguments.done",
                       "response.output_item.done", "response.completed"}));
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].second["sequence_number"], i);
  EXPECT_EQ(events[10].second["text"], "Let me");
  EXPECT_EQ(events[16].second["arguments"], "{\"a\": 1}");
  const json& r = events.back().second["response"];
  EXPECT_EQ(r["id"], "resp_s1");
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Let me");
  EXPECT_EQ(r["output"][2]["call_id"], "call_1");
  EXPECT_EQ(r["output"][2]["id"], events[13].second["item"]["id"]);  // the ids the events used
  EXPECT_EQ(r["usage"]["total_tokens"], 10);
  EXPECT_EQ(stream.rewrite(sse(head + R"({"index": 0, "delta": {"content": "late"}}]})")), "");  // after the end

  // An error event ends the stream as Responses' error; a reply cut at max_output_tokens is incomplete.
  ResponsesStream failing(body);
  const auto error = events_of(failing.rewrite(sse(R"({"error": {"message": "boom", "code": 500}})")));
  ASSERT_EQ(error.size(), 1u);
  EXPECT_EQ(error[0].second["message"], "boom");
  ResponsesStream cut(body);
  std::string c = cut.rewrite(sse(head + R"({"index": 0, "delta": {"content": "Par"}, "finish_reason": "length"}]})"));
  c += cut.rewrite("data: [DONE]\n\n");
  const auto cut_events = events_of(c);
  EXPECT_EQ(cut_events.back().first, "response.incomplete");
  EXPECT_EQ(cut_events.back().second["response"]["incomplete_details"]["reason"], "max_output_tokens");
}

}  // namespace
}  // namespace minivllm::server
