// The request parser on its own (no engine, no sockets): every parameter of issue 9 read with its
// type and range, and every bad value a 400 naming the parameter.
#include <gtest/gtest.h>

#include "engine/sampling_keys.h"
#include "server/api_error.h"
#include "server/json_body.h"
#include "server/openai_request.h"

namespace minivllm::server {
namespace {

using nlohmann::json;

// to_json() is an ordered_json (table order); compared as text-equal plain JSON.
json plain(const nlohmann::ordered_json& o) { return json::parse(o.dump()); }

// The status and parameter of the ApiError that `f` throws.
template <class F>
std::pair<int, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return {e.status(), e.param()};
  }
  return {0, "no error"};
}

GenerationRequest completion(const std::string& body) { return parse_completion_request(parse_json_body(body)); }
GenerationRequest chat(const std::string& body) { return parse_chat_request(parse_json_body(body)); }

TEST(OpenAiRequest, CompletionPromptShapes) {
  auto one = completion(R"({"model": "m", "prompt": "Hello"})");
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_TRUE(one.prompts[0].is_text);
  EXPECT_EQ(one.prompts[0].text, "Hello");
  EXPECT_EQ(one.model, "m");
  EXPECT_EQ(*one.max_tokens, kDefaultCompletionMaxTokens);

  auto many = completion(R"({"prompt": ["a", "b", "c"]})");
  ASSERT_EQ(many.prompts.size(), 3u);
  EXPECT_EQ(many.prompts[2].text, "c");

  auto ids = completion(R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_FALSE(ids.prompts[0].is_text);
  EXPECT_EQ(ids.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));

  auto id_lists = completion(R"({"prompt": [[1, 2], [3]]})");
  ASSERT_EQ(id_lists.prompts.size(), 2u);
  EXPECT_EQ(id_lists.prompts[1].token_ids, (std::vector<int32_t>{3}));
}

TEST(OpenAiRequest, BadPromptsNameThePrompt) {
  for (const char* body : {R"({})", R"({"prompt": ""})", R"({"prompt": []})", R"({"prompt": 5})",
                           R"({"prompt": [1, "a"]})", R"({"prompt": [[1], 2]})", R"({"prompt": [-1]})",
                           R"({"prompt": [4294967297]})", R"({"prompt": [1.5]})", R"({"prompt": [[]]})",
                           R"({"prompt": [{"a": 1}]})"}) {
    EXPECT_EQ(error_of([&] { completion(body); }), std::make_pair(400, std::string("prompt"))) << body;
  }
}

TEST(OpenAiRequest, SamplingParameters) {
  auto r = completion(R"({"prompt": "x", "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 40,
                          "min_p": 0.1, "seed": 42, "stop": ["a", "bc"], "stop_token_ids": [5, 6],
                          "ignore_eos": true, "echo": true, "stream": true,
                          "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.5f);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_FLOAT_EQ(r.params.min_p, 0.1f);
  ASSERT_TRUE(r.params.seed.has_value());
  EXPECT_EQ(*r.params.seed, 42u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int64_t>{5, 6}));
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(completion(R"({"prompt": "x", "stop": "end"})").params.stop, (std::vector<std::string>{"end"}));
  // null means "not set", as clients send it.
  EXPECT_EQ(completion(R"({"prompt": "x", "temperature": null})").params.temperature, 1.0f);
}

TEST(OpenAiRequest, BadValuesNameTheirParameter) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("temperature": -1)", "temperature"},      {R"("temperature": "hot")", "temperature"},
      {R"("top_p": 0)", "top_p"},                   {R"("top_p": 1.5)", "top_p"},
      {R"("min_p": 2)", "min_p"},                   {R"("top_k": -2)", "top_k"},
      {R"("top_k": 1.5)", "top_k"},                 {R"("max_tokens": 0)", "max_tokens"},
      {R"("max_tokens": "9")", "max_tokens"},       {R"("seed": "s")", "seed"},
      {R"("stop": 3)", "stop"},                     {R"("stop": [""])", "stop"},
      {R"("stop": ["a", 1])", "stop"},              {R"("stop_token_ids": [-1])", "stop_token_ids"},
      {R"("stop_token_ids": 3)", "stop_token_ids"}, {R"("n": 0)", "n"},
      {R"("n": 100000)", "n"},                      {R"("logprobs": 21)", "logprobs"},
      {R"("logprobs": -1)", "logprobs"},            {R"("presence_penalty": 3)", "presence_penalty"},
      {R"("frequency_penalty": -2.5)", "frequency_penalty"}, {R"("repetition_penalty": 0)", "repetition_penalty"},
      {R"("ignore_eos": 1)", "ignore_eos"},         {R"("echo": "yes")", "echo"},
      {R"("stream": 1)", "stream"},                 {R"("stream_options": {"include_usage": true})", "stream_options"},
      {R"("model": 5)", "model"},
  };
  for (const auto& [field, param] : cases) {
    const std::string body = std::string(R"({"prompt": "x", )").append(field).append("}");
    EXPECT_EQ(error_of([&] { completion(body); }), std::make_pair(400, param)) << body;
  }
}

// Every sampling key is an OpenAI parameter of the same name, read with the table's type and
// range (max_tokens and logprobs differ per endpoint and are tested above and below).
TEST(OpenAiRequest, EverySamplingKeyIsAParameter) {
  const json sample = {{"temperature", 0.5},       {"top_k", 40},
                       {"top_p", 0.75},            {"min_p", 0.125},
                       {"seed", 42},               {"ignore_eos", true},
                       {"stop", {"a", "bc"}},      {"stop_token_ids", {5, 6}},
                       {"presence_penalty", 0.5},  {"frequency_penalty", -0.25},
                       {"repetition_penalty", 1.5}, {"n", 3},
                       {"logit_bias", {{"5", 1.5}}}, {"min_tokens", 2},
                       {"bad_words", {"x"}}, {"structured_outputs", {{"regex", "a+"}}},
                       {"prompt_logprobs", 2},     {"include_stop_str_in_output", true},
                       {"skip_special_tokens", false},  {"truncate_prompt_tokens", 7},
                       {"allowed_token_ids", {7, 8}}};
  for (const ConfigKey& k : sampling_keys()) {
    const std::string name(k.spec.name);
    if (name == "max_tokens" || name == "logprobs") continue;
    ASSERT_TRUE(sample.contains(name)) << "give " << name << " a sample value here";
    json body = {{"prompt", "x"}, {name, sample[name]}};
    EXPECT_EQ(plain(parse_completion_request(body).params.to_json()[name]), sample[name]) << name;
    body[name] = json::array({json::object()});  // the wrong type for every key
    EXPECT_EQ(error_of([&] { parse_completion_request(body); }), std::make_pair(400, name)) << name;
  }
  // The table's ranges, not the server's own: a temperature above OpenAI's 2 is the engine's to take.
  EXPECT_FLOAT_EQ(completion(R"({"prompt": "x", "temperature": 7.5})").params.temperature, 7.5f);
  EXPECT_EQ(error_of([] { completion(R"({"prompt": "x", "top_p": 1e300})"); }), std::make_pair(400, std::string("top_p")));
}

TEST(OpenAiRequest, ChatMessagesAndTemplateKwargs) {
  auto r = chat(R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]}],
                    "max_completion_tokens": 9, "max_tokens": 3,
                    "chat_template_kwargs": {"enable_thinking": false}})");
  EXPECT_TRUE(r.chat);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"], "Hi\nthere");
  EXPECT_EQ(r.params.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  // Chat without a limit: the handler fills in the room left in the context.
  EXPECT_FALSE(chat(R"({"messages": [{"role": "user", "content": "Hi"}]})").max_tokens.has_value());
  EXPECT_TRUE(r.render.add_generation_prompt);
  EXPECT_FALSE(r.render.continue_final_message);
  // vLLM's: a prefilled reply the model continues.
  const auto open = chat(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Well"}],
                             "add_generation_prompt": false, "continue_final_message": true})");
  EXPECT_FALSE(open.render.add_generation_prompt);
  EXPECT_TRUE(open.render.continue_final_message);
  EXPECT_EQ(error_of([] { chat(R"({"messages": [{"role": "user", "content": "Hi"}], "continue_final_message": true})"); }),
            std::make_pair(400, std::string("continue_final_message")));
  EXPECT_EQ(error_of([] { chat(R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": 1})"); }),
            std::make_pair(400, std::string("add_generation_prompt")));
  EXPECT_EQ(error_of([] { completion(R"({"prompt": "x", "continue_final_message": true})"); }),
            std::make_pair(400, std::string("continue_final_message")));  // a chat parameter
}

// /tokenize and /detokenize: vLLM's fields honoured (a chat's add_generation_prompt and
// continue_final_message), any other refused with a 400 naming it.
TEST(OpenAiRequest, TokenizeFields) {
  const TokenizeRequest t = parse_tokenize_request(json::parse(
      R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Well"}],
          "add_generation_prompt": false, "continue_final_message": true, "add_special_tokens": false})"));
  EXPECT_TRUE(t.chat);
  EXPECT_FALSE(t.render.add_generation_prompt);
  EXPECT_TRUE(t.render.continue_final_message);
  EXPECT_TRUE(parse_tokenize_request(json::parse(R"({"prompt": "x"})")).render.add_generation_prompt);
  EXPECT_TRUE(parse_tokenize_request(json::parse(R"({"prompt": "x", "return_token_strs": true})")).return_token_strs);
  EXPECT_EQ(error_of([] { parse_tokenize_request(json::parse(R"({"prompt": "x", "add_bos": true})")); }),
            std::make_pair(400, std::string("add_bos")));
  EXPECT_EQ(error_of([] {
              parse_tokenize_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}],
                                                     "continue_final_message": true})"));
            }),
            std::make_pair(400, std::string("continue_final_message")));
  EXPECT_EQ(parse_detokenize_request(json::parse(R"({"model": "m", "tokens": [1, 2]})")), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(error_of([] { parse_detokenize_request(json::parse(R"({"tokens": [1], "skip_special_tokens": false})")); }),
            std::make_pair(400, std::string("skip_special_tokens")));
}

TEST(OpenAiRequest, BadChatBodies) {
  for (const char* body : {R"({})", R"({"messages": []})", R"({"messages": "hi"})", R"({"messages": [1]})",
                           R"({"messages": [{"content": "x"}]})",
                           R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"}) {
    EXPECT_EQ(error_of([&] { chat(body); }).first, 400) << body;
  }
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(error_of([&] { chat("{" + msgs + R"(, "top_logprobs": 3})"); }), std::make_pair(400, std::string("top_logprobs")));
  EXPECT_EQ(error_of([&] { chat("{" + msgs + R"(, "logprobs": 2})"); }), std::make_pair(400, std::string("logprobs")));
  EXPECT_EQ(error_of([&] { chat("{" + msgs + R"(, "chat_template_kwargs": [1]})"); }),
            std::make_pair(400, std::string("chat_template_kwargs")));
}

TEST(OpenAiRequest, ChoicesLogprobsAndPenalties) {
  // n, logprobs and the penalties reach SamplingParams.
  const auto r = completion(R"({"prompt": "x", "n": 3, "logprobs": 5, "presence_penalty": 0.5,
                               "frequency_penalty": 0.25, "repetition_penalty": 1.2})");
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.logprobs, 5);
  EXPECT_EQ(r.params.n, 3);
  EXPECT_EQ(r.params.logprobs, 5);
  EXPECT_FLOAT_EQ(r.params.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.params.frequency_penalty, 0.25f);
  EXPECT_FLOAT_EQ(r.params.repetition_penalty, 1.2f);
  const auto c = chat(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 4})");
  EXPECT_EQ(c.logprobs, 4);
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})").logprobs, 0);
}

TEST(JsonBody, MalformedDeepAndNonObjectBodiesAre400) {
  EXPECT_EQ(error_of([] { parse_json_body("{\"prompt\": "); }).first, 400);
  EXPECT_EQ(error_of([] { parse_json_body("[1, 2]"); }).first, 400);
  EXPECT_EQ(error_of([] { parse_json_body("\"\\xff\""); }).first, 400);
  const std::string deep = std::string("{\"a\":") + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(error_of([&] { parse_json_body(deep); }).first, 400);
  std::string ok = "{\"a\":";
  for (int i = 1; i < kMaxBodyDepth; ++i) ok += "[";
  for (int i = 1; i < kMaxBodyDepth; ++i) ok += "]";
  ok += "}";
  EXPECT_NO_THROW(parse_json_body(ok));
  EXPECT_EQ(error_of([&] { parse_json_body(std::string(ok).insert(5, "[").insert(ok.size(), "]")); }).first, 400);
  // Found by the openai_request fuzzer: a number too large for a double is nlohmann's out_of_range,
  // not a parse_error; it is a 400 too, and the message quotes only an excerpt of it.
  const std::string huge = "{\"temperature\": " + std::string(5000, '6') + "e666}";
  try {
    parse_json_body(huge);
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
  }
}

TEST(ApiErrorJson, OpenAiShape) {
  const json e = error_json(bad_param("temperature", "must be a number"));
  EXPECT_EQ(e["error"]["param"], "temperature");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["code"], 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("temperature"), std::string::npos);
  EXPECT_TRUE(error_json(404, "no such model")["error"]["param"].is_null());
  EXPECT_EQ(public_message(std::runtime_error("src/x.cc:3: check failed: a > b: a must exceed b")), "a must exceed b");
  // An Error wrapping another keeps no source path either.
  EXPECT_EQ(public_message(std::runtime_error("src/a.cc:1: check failed: x: malformed file F: src/b.cc:2: "
                                              "check failed: y: bad id")),
            "malformed file F: bad id");
}

// Issue 49: nothing is dropped. Unknown fields and fields the server cannot honour are 400s naming
// them (also the other endpoint's fields); the four bookkeeping fields are accepted; null is absent.
// OpenAI's reasoning_effort: a variable of the chat template (gpt-oss's); the server refuses it for
// a template without one (generation.cc), the parser checks its value.
TEST(OpenAiRequest, ReasoningEffortIsATemplateVariable) {
  const GenerationRequest r = chat(R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "low"})");
  EXPECT_EQ(r.reasoning_effort, "low");
  EXPECT_EQ(r.chat_template_kwargs["reasoning_effort"], "low");
  EXPECT_TRUE(chat(R"({"messages": [{"role": "user", "content": "x"}]})").reasoning_effort.empty());
  for (const char* bad : {R"("extreme")", "3", R"(["low"])"}) {
    const std::string body = std::string(R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": )");
    EXPECT_EQ(error_of([&] { chat(body + bad + "}"); }), std::make_pair(400, std::string("reasoning_effort"))) << bad;
  }
}

// An assistant turn's reasoning_content (or `reasoning`) passed back is also `thinking`, what
// gpt-oss's template reads; not beside a tool-call turn's content, which that template refuses.
TEST(OpenAiRequest, ReasoningPassedBackIsThinking) {
  const GenerationRequest r = chat(R"({"messages": [{"role": "user", "content": "w?"},
    {"role": "assistant", "content": "", "reasoning_content": "Need the weather.",
     "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "assistant", "content": "Checking.", "reasoning": "Hmm.",
     "tool_calls": [{"id": "d", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "assistant", "content": "Sunny.", "reasoning": "Said it."},
    {"role": "assistant", "content": "x", "reasoning_content": "a", "thinking": "b"},
    {"role": "user", "content": "ok", "reasoning_content": "not a turn of the model"}]})");
  EXPECT_EQ(r.messages[1]["thinking"], "Need the weather.");
  EXPECT_FALSE(r.messages[2].contains("thinking"));
  EXPECT_EQ(r.messages[3]["thinking"], "Said it.");
  EXPECT_EQ(r.messages[4]["thinking"], "b");
  EXPECT_FALSE(r.messages[5].contains("thinking"));
}

TEST(OpenAiRequest, EveryFieldIsHonouredOrRefused) {
  EXPECT_EQ(error_of([] { completion(R"({"prompt": "x", "foo": 1})"); }), std::make_pair(400, std::string("foo")));
  EXPECT_EQ(error_of([] { chat(R"({"messages": [{"role": "user", "content": "x"}], "foo": 1})"); }),
            std::make_pair(400, std::string("foo")));
  EXPECT_EQ(error_of([] { chat(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})"); }),
            std::make_pair(400, std::string("echo")));
  EXPECT_EQ(error_of([] { completion(R"({"prompt": "x", "top_logprobs": 2})"); }),
            std::make_pair(400, std::string("top_logprobs")));
  for (const char* f : {"suffix", "best_of", "guided_json", "functions"}) {
    const json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {f, "x"}};
    EXPECT_EQ(error_of([&] { parse_chat_request(body); }), std::make_pair(400, std::string(f))) << f;
    try {
      parse_chat_request(body);
    } catch (const ApiError& e) {
      EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
    }
  }
  // Tools are chat's (tool_request_test.cc); in completions they are refused by name.
  for (const char* f : {"tools", "tool_choice", "parallel_tool_calls"}) {
    EXPECT_EQ(error_of([&] { parse_completion_request({{"prompt", "x"}, {f, "x"}}); }),
              std::make_pair(400, std::string(f)))
        << f;
  }
  const GenerationRequest r = chat(R"({"messages": [{"role": "user", "content": "x"}], "user": "u", "store": false,
                                       "metadata": {"a": "b"}, "service_tier": "auto", "foo": null})");
  EXPECT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(completion(R"({"prompt": "x", "user": "u"})").prompts.size(), 1u);
  // The deadline is read by the server (request_deadline.h), not by this parser: known, not refused.
  EXPECT_EQ(completion(R"({"prompt": "x", "request_timeout": 5})").prompts.size(), 1u);
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "x"}], "request_timeout": 5})").messages.size(), 1u);
}

// Echo with logprobs asks the engine for the prompt's logprobs (as many alternatives as logprobs);
// vLLM's prompt_logprobs is a key of both endpoints; neither is streamed (vLLM refuses it too).
TEST(OpenAiRequest, EchoWithLogprobsAndPromptLogprobs) {
  const GenerationRequest echo = completion(R"({"prompt": "x", "echo": true, "logprobs": 3})");
  EXPECT_EQ(echo.params.prompt_logprobs, 3);
  EXPECT_EQ(echo.prompt_logprobs, -1) << "vLLM's field is not asked for";
  EXPECT_EQ(completion(R"({"prompt": "x", "echo": true})").params.prompt_logprobs, -1);
  EXPECT_EQ(completion(R"({"prompt": "x", "logprobs": 2})").params.prompt_logprobs, -1);
  const GenerationRequest both = completion(R"({"prompt": "x", "echo": true, "logprobs": 1, "prompt_logprobs": 4})");
  EXPECT_EQ(both.params.prompt_logprobs, 4);
  EXPECT_EQ(both.prompt_logprobs, 4);
  const GenerationRequest c = chat(R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 0})");
  EXPECT_EQ(c.params.prompt_logprobs, 0);
  EXPECT_EQ(c.prompt_logprobs, 0);
  EXPECT_EQ(error_of([] { completion(R"({"prompt": "x", "echo": true, "logprobs": 1, "stream": true})"); }),
            std::make_pair(400, std::string("echo")));
  EXPECT_EQ(error_of([] { completion(R"({"prompt": "x", "prompt_logprobs": 1, "stream": true})"); }),
            std::make_pair(400, std::string("prompt_logprobs")));
  EXPECT_EQ(error_of([] {
              chat(R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 1, "stream": true})");
            }),
            std::make_pair(400, std::string("prompt_logprobs")));
  EXPECT_EQ(error_of([] { completion(R"({"prompt": "x", "prompt_logprobs": 21})"); }),
            std::make_pair(400, std::string("prompt_logprobs")));
}

TEST(OpenAiRequest, LogitBiasMinTokensBadWords) {
  const GenerationRequest r =
      completion(R"({"prompt": "x", "logit_bias": {"7": -100, "9": 3}, "min_tokens": 2, "bad_words": ["a b"]})");
  EXPECT_EQ(r.params.logit_bias, (std::map<int32_t, float>{{7, -100.0f}, {9, 3.0f}}));
  EXPECT_EQ(r.params.min_tokens, 2);
  EXPECT_EQ(r.params.bad_words, (std::vector<std::string>{"a b"}));
  for (const char* body : {R"({"prompt": "x", "logit_bias": {"7": 100.5}})", R"({"prompt": "x", "logit_bias": {"y": 1}})",
                           R"({"prompt": "x", "logit_bias": [7]})"}) {
    EXPECT_EQ(error_of([&] { completion(body); }), std::make_pair(400, std::string("logit_bias"))) << body;
  }
  // min_tokens past max_tokens (16 by default in completions) is the engine's cross-key check.
  EXPECT_EQ(error_of([] { completion(R"({"prompt": "x", "min_tokens": 17})"); }),
            std::make_pair(400, std::string("min_tokens")));
}

// OpenAI's response_format onto structured_outputs, in both endpoints; vLLM's structured_outputs
// as given; a malformed one, or both at once, is a 400 naming the parameter.
TEST(OpenAiRequest, ResponseFormatAndStructuredOutputs) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_TRUE(chat("{" + msgs + R"(, "response_format": {"type": "json_object"}})").params.structured_outputs.json_object);
  EXPECT_TRUE(chat("{" + msgs + R"(, "response_format": {"type": "text"}})").params.structured_outputs.empty());
  const GenerationRequest js = completion(
      R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": true,
          "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})");
  EXPECT_EQ(js.params.structured_outputs.json, R"({"properties":{"a":{"type":"integer"}},"type":"object"})");
  const GenerationRequest so = chat("{" + msgs + R"(, "structured_outputs": {"choice": ["yes", "no"]}})");
  EXPECT_EQ(so.params.structured_outputs.choice, (std::vector<std::string>{"yes", "no"}));
  EXPECT_EQ(completion(R"({"prompt": "x", "structured_outputs": {"json": "{\"type\": \"string\"}"}})")
                .params.structured_outputs.json,
            R"({"type":"string"})");
  for (const char* bad : {R"("response_format": {"type": "xml"})", R"("response_format": {"type": "json_schema"})",
                          R"("response_format": "json")"}) {
    EXPECT_EQ(error_of([&] { chat("{" + msgs + ", " + bad + "}"); }), std::make_pair(400, std::string("response_format")))
        << bad;
  }
  EXPECT_EQ(error_of([&] {
              chat("{" + msgs + R"(, "response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}})");
            }),
            std::make_pair(400, std::string("response_format")));
  for (const char* bad : {R"({"regex": "a", "choice": ["b"]})", R"({"choice": []})", R"({"json": "not json"})",
                          R"({"sql": "x"})", R"({"grammar": ""})"}) {
    EXPECT_EQ(error_of([&] { chat("{" + msgs + R"(, "structured_outputs": )" + bad + "}"); }),
              std::make_pair(400, std::string("structured_outputs")))
        << bad;
  }
}

}  // namespace
// A request starts from the model's defaults; what its body sets replaces them. max_tokens, unset:
// completions min(16, max_new_tokens), chat the handler's room capped by it.
TEST(GenerationDefaults, ServerRequestsStartFromThem) {
  GenerationDefaults g;
  g.keys = {{"temperature", 0.6}, {"top_k", 20}, {"max_tokens", 8}};
  g.params = g.apply(SamplingParams{});
  const GenerationRequest chat =
      parse_chat_request({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"top_k", 5}}, g);
  EXPECT_FLOAT_EQ(chat.params.temperature, 0.6f);
  EXPECT_EQ(chat.params.top_k, 5);
  EXPECT_FALSE(chat.max_tokens);
  EXPECT_EQ(chat.default_max_tokens, 8);
  const GenerationRequest done = parse_completion_request({{"prompt", "a"}, {"temperature", 0}}, g);
  EXPECT_FLOAT_EQ(done.params.temperature, 0.0f);
  EXPECT_EQ(done.params.top_k, 20);
  EXPECT_EQ(done.max_tokens, 8);  // min(16, 8)
  EXPECT_EQ(parse_completion_request({{"prompt", "a"}, {"max_tokens", 30}}, g).max_tokens, 30);
  const GenerationRequest plain = parse_completion_request({{"prompt", "a"}});
  EXPECT_FLOAT_EQ(plain.params.temperature, SamplingParams{}.temperature);
  EXPECT_EQ(plain.max_tokens, kDefaultCompletionMaxTokens);
}

}  // namespace minivllm::server
