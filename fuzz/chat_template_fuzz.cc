// Fuzzes the chat-template interpreter. The input is the template's text, then optionally a NUL
// byte and a JSON object of variables:
//
//   <template source> \0 {"messages": [...], "add_generation_prompt": true, "<extra>": ...}
//
// "messages" (an array) and "add_generation_prompt" (a bool) are taken out; the other keys are the
// extra variables (bos_token, enable_thinking, tools, ...). Without a NUL, or when the JSON is not
// an object, a fixed conversation is used. The template is parsed, then rendered with both JSON
// flavours (key order kept and sorted), as apply_chat_template would.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "template/chat_template.h"

namespace {

using minivllm::fuzz::expect_ok_or_error;
using nlohmann::ordered_json;

const char* const kDefaultMessages = R"([
  {"role": "system", "content": "You are a helpful assistant."},
  {"role": "user", "content": "What is 2+2?"},
  {"role": "assistant", "content": "<think>\nsimple\n</think>\n\n4", "reasoning_content": "simple"},
  {"role": "user", "content": "Call a tool."},
  {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
     "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]},
  {"role": "tool", "content": "3"}
])";

const char* const kDefaultExtra = R"({
  "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false,
  "tools": [{"type": "function", "function": {"name": "add", "description": "Adds.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]
})";

// messages, add_generation_prompt and extra from the JSON part (either flavour of nlohmann's JSON).
template <typename Json>
const Json& default_messages() {
  static const Json j = Json::parse(kDefaultMessages);
  return j;
}

template <typename Json>
const Json& default_extra() {
  static const Json j = Json::parse(kDefaultExtra);
  return j;
}

template <typename Json>
struct Vars {
  Json messages = default_messages<Json>();
  Json extra = default_extra<Json>();
  bool add_generation_prompt = true;

  void parse(const char* begin, const char* end) {
    Json vars = Json::parse(begin, end, /*cb=*/nullptr, /*allow_exceptions=*/false);
    if (!vars.is_object()) return;
    if (auto it = vars.find("messages"); it != vars.end() && it->is_array()) {
      messages = std::move(*it);
      vars.erase("messages");
    }
    if (auto it = vars.find("add_generation_prompt"); it != vars.end() && it->is_boolean()) {
      add_generation_prompt = it->template get<bool>();
      vars.erase("add_generation_prompt");
    }
    extra = std::move(vars);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(text, '\0', size));
  const std::string source(text, nul ? static_cast<size_t>(nul - text) : size);
  // Parsed in both flavours from the bytes (not converted: nlohmann's dump recurses, and a deep
  // document must reach the interpreter, not crash the harness).
  Vars<ordered_json> ordered;
  Vars<nlohmann::json> sorted;
  if (nul) {
    ordered.parse(nul + 1, text + size);
    sorted.parse(nul + 1, text + size);
  }

  expect_ok_or_error([&] {
    const minivllm::ChatTemplate tmpl(source);
    expect_ok_or_error([&] { (void)tmpl.render(ordered.messages, ordered.add_generation_prompt, ordered.extra); });
    expect_ok_or_error([&] { (void)tmpl.render(sorted.messages, !sorted.add_generation_prompt, sorted.extra); });
  });
  return 0;
}
