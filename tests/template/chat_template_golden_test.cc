// Chat templates against real references: transformers' apply_chat_template renders of the Qwen3
// and Llama 3.2 templates (hf_goldens.json), jinja2 renders of their tool-calling paths, and a
// hand-checked SmolLM2 (ChatML) render.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "template/chat_template.h"

namespace minivllm {
namespace {

const std::string kShared = MINIVLLM_SHARED_DIR;
const std::string kQwenConfig = kShared + "/models/qwen3-0.6b/tokenizer_config.json";
const std::string kLlamaConfig = kShared + "/models/llama-3.2-1b-instruct/tokenizer_config.json";

nlohmann::json load_chat_goldens() {
  std::ifstream in(kShared + "/tokenizer-vectors/hf_goldens.json");
  EXPECT_TRUE(in) << "missing hf_goldens.json";
  return nlohmann::json::parse(in)["chat"];
}

TEST(ChatTemplateGolden, ReadsTokensFromTokenizerConfig) {
  ChatTemplate qwen = ChatTemplate::from_tokenizer_config(kQwenConfig);
  EXPECT_EQ(qwen.bos_token(), "");  // null in the config
  EXPECT_EQ(qwen.eos_token(), "<|im_end|>");
  ChatTemplate llama = ChatTemplate::from_tokenizer_config(kLlamaConfig);
  EXPECT_EQ(llama.bos_token(), "<|begin_of_text|>");
  EXPECT_EQ(llama.eos_token(), "<|eot_id|>");
}

TEST(ChatTemplateGolden, Qwen3MatchesTransformers) {
  nlohmann::json chat = load_chat_goldens();
  ChatTemplate tmpl = ChatTemplate::from_tokenizer_config(kQwenConfig);
  ASSERT_EQ(chat["conversations"].size(), chat["qwen3"].size());
  for (size_t i = 0; i < chat["conversations"].size(); ++i) {
    const nlohmann::json& conv = chat["conversations"][i];
    const nlohmann::json& want = chat["qwen3"][i];
    EXPECT_EQ(tmpl.render(conv, true), want["prompt"].get<std::string>()) << "conversation " << i;
    EXPECT_EQ(tmpl.render(conv, false), want["no_generation_prompt"].get<std::string>()) << "conversation " << i;
    EXPECT_EQ(tmpl.render(conv, true, {{"enable_thinking", false}}), want["enable_thinking_false"].get<std::string>())
        << "conversation " << i;
    // enable_thinking=true is the default behaviour.
    EXPECT_EQ(tmpl.render(conv, true, {{"enable_thinking", true}}), want["prompt"].get<std::string>());
  }
}

TEST(ChatTemplateGolden, Llama32MatchesTransformers) {
  nlohmann::json chat = load_chat_goldens();
  ChatTemplate tmpl = ChatTemplate::from_tokenizer_config(kLlamaConfig);
  ASSERT_EQ(chat["conversations"].size(), chat["llama32"].size());
  for (size_t i = 0; i < chat["conversations"].size(); ++i) {
    const nlohmann::json& conv = chat["conversations"][i];
    const nlohmann::json& want = chat["llama32"][i];
    nlohmann::json extra = {{"date_string", "26 Jul 2024"}};
    EXPECT_EQ(tmpl.render(conv, true, extra), want["prompt"].get<std::string>()) << "conversation " << i;
    EXPECT_EQ(tmpl.render(conv, false, extra), want["no_generation_prompt"].get<std::string>())
        << "conversation " << i;
  }
}

TEST(ChatTemplateGolden, LlamaWithoutDateStringUsesStrftimeNow) {
  ChatTemplate tmpl = ChatTemplate::from_tokenizer_config(kLlamaConfig);
  std::string out = tmpl.render(nlohmann::json::parse(R"([{"role":"user","content":"Hi"}])"), true);
  char buf[64];
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(buf, sizeof(buf), "Today Date: %d %b %Y\n", &local);
  EXPECT_NE(out.find(buf), std::string::npos) << out;
}

// A tool-calling conversation; key order matters for tojson, hence ordered_json.
const char* kToolConversation = R"([
  {"role": "system", "content": "sys"},
  {"role": "user", "content": "weather in Paris?"},
  {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
  {"role": "tool", "content": "22C"},
  {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nIt is 22C."},
  {"role": "user", "content": "thanks"}])";
const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

// Rendered by jinja2 3.1.6 in transformers' environment (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson).
const char* kQwenToolRender = R"EXP(<|im_start|>system
sys

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
<|im_start|>user
weather in Paris?<|im_end|>
<|im_start|>assistant
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
22C
</tool_response><|im_end|>
<|im_start|>assistant
It is 22C.<|im_end|>
<|im_start|>user
thanks<|im_end|>
<|im_start|>assistant
)EXP";

const char* kLlamaToolRender = R"EXP(<|begin_of_text|><|start_header_id|>system<|end_header_id|>

Environment: ipython
Cutting Knowledge Date: December 2023
Today Date: 26 Jul 2024

sys<|eot_id|><|start_header_id|>user<|end_header_id|>

Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.

Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.

{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {
                    "type": "string"
                }
            },
            "required": [
                "city"
            ]
        }
    }
}

weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>

"22C"<|eot_id|><|start_header_id|>assistant<|end_header_id|>

<think>
hmm
</think>

It is 22C.<|eot_id|><|start_header_id|>user<|end_header_id|>

thanks<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)EXP";

TEST(ChatTemplateGolden, Qwen3ToolCallsMatchJinja2) {
  ChatTemplate tmpl = ChatTemplate::from_tokenizer_config(kQwenConfig);
  nlohmann::ordered_json extra = {{"tools", nlohmann::ordered_json::parse(kTools)}};
  EXPECT_EQ(tmpl.render(nlohmann::ordered_json::parse(kToolConversation), true, extra), kQwenToolRender);
}

TEST(ChatTemplateGolden, Llama32ToolCallsMatchJinja2) {
  ChatTemplate tmpl = ChatTemplate::from_tokenizer_config(kLlamaConfig);
  nlohmann::ordered_json extra = {{"tools", nlohmann::ordered_json::parse(kTools)}, {"date_string", "26 Jul 2024"}};
  EXPECT_EQ(tmpl.render(nlohmann::ordered_json::parse(kToolConversation), true, extra), kLlamaToolRender);
}

TEST(ChatTemplateGolden, LlamaRaisesOnParallelToolCalls) {
  ChatTemplate tmpl = ChatTemplate::from_tokenizer_config(kLlamaConfig);
  auto conv = nlohmann::json::parse(R"([{"role":"user","content":"x"},{"role":"assistant","content":"",
      "tool_calls":[{"function":{"name":"a","arguments":{}}},{"function":{"name":"b","arguments":{}}}]}])");
  try {
    tmpl.render(conv, false);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("This model only supports single tool-calls at once!"), std::string::npos)
        << e.what();
  }
}

// SmolLM2-135M-Instruct's ChatML template, expected output checked by hand.
const char* kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' "
    "}}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST(ChatTemplateGolden, SmolLM2ChatML) {
  ChatTemplate tmpl(kSmolLM2Template);
  auto user_only = nlohmann::json::parse(R"([{"role":"user","content":"What is 2+2?"}])");
  EXPECT_EQ(tmpl.render(user_only, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto with_system = nlohmann::json::parse(
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."}])");
  EXPECT_EQ(tmpl.render(with_system, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n");
}

TEST(ChatTemplateGolden, ConfigErrorsNameTheFile) {
  try {
    ChatTemplate::from_tokenizer_config("/nonexistent/tokenizer_config.json");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer_config.json"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplateGolden, TemplateListPicksDefault) {
  std::string path = std::string(MINIVLLM_BINARY_DIR) + "/template_list_tokenizer_config.json";
  {
    std::ofstream out(path);
    out << R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ bos_token }}"}],
               "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"})";
  }
  ChatTemplate tmpl = ChatTemplate::from_tokenizer_config(path);
  EXPECT_EQ(tmpl.bos_token(), "<s>");
  EXPECT_EQ(tmpl.eos_token(), "</s>");
  EXPECT_EQ(tmpl.render(nlohmann::json::array(), false), "D<s>");
}

// continue_final_message against transformers 5.17's apply_chat_template(messages,
// add_generation_prompt=False, continue_final_message=True) on the same files (Llama's date is a
// template variable, given here as transformers rendered it).
TEST(ChatTemplateGolden, ContinueFinalMessageAsTransformers) {
  const nlohmann::json msgs = nlohmann::json::parse(R"([{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Name a color."}, {"role": "assistant", "content": "The color is"}])");
  const ChatRender open{.add_generation_prompt = false, .continue_final_message = true};
  const ChatTemplate qwen = ChatTemplate::from_tokenizer_config(kQwenConfig);
  EXPECT_EQ(qwen.render(msgs, open, nlohmann::json::object()),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nName a color.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nThe color is");
  const ChatTemplate llama = ChatTemplate::from_tokenizer_config(kLlamaConfig);
  EXPECT_EQ(llama.render(msgs, open, nlohmann::json{{"date_string", "07 Dec 2026"}, {"bos_token", "<|begin_of_text|>"}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 07 Dec 2026\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nName a color."
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nThe color is");
  // Parts: the last text part is what is continued.
  nlohmann::json parts = msgs;
  parts.back()["content"] = nlohmann::json::parse(R"([{"type": "text", "text": "The color is"}])");
  const ChatTemplate simple(
      "{% for m in messages %}<{{ m.role }}>{% if m.content is string %}{{ m.content }}{% else %}"
      "{{ m.content[-1].text }}{% endif %}</{{ m.role }}>{% endfor %}");
  EXPECT_EQ(simple.render(parts, open, nlohmann::json::object()),
            "<system>Be brief.</system><user>Name a color.</user><assistant>The color is");
  // Errors: with add_generation_prompt; a final message the template does not show.
  EXPECT_THROW(qwen.render(msgs, ChatRender{.add_generation_prompt = true, .continue_final_message = true},
                           nlohmann::json::object()),
               Error);
  const ChatTemplate blind("{% for m in messages %}[{{ m.role }}]{% endfor %}");
  EXPECT_THROW(blind.render(msgs, open, nlohmann::json::object()), Error);
}

}  // namespace
}  // namespace minivllm
