// ToolCallSyntax: how one model family writes tool calls in its reply (vLLM's tool parsers, as
// `--tool-call-parser`): Hermes' <tool_call>{...}</tool_call> (Qwen2.5, Qwen3, ChatML models such
// as SmolLM2), Llama 3.x's bare JSON objects, Mistral's [TOOL_CALLS][...], GLM-4.5's
// <tool_call>name<arg_key>..</arg_key><arg_value>..</arg_value></tool_call>, Qwen3-Coder's and
// Seed-OSS's <function=name><parameter=key>..</parameter></function>; and the plain JSON that
// tool_choice "required" or a named function constrains the reply to. A syntax only says where the
// calls begin and reads them; ToolCallStream (tool_call_stream.h) does the streaming around it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace minivllm::server {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object as compact text, as OpenAI's function.arguments
  bool operator==(const ParsedToolCall&) const = default;
};

// The call being written after the complete ones: its name, and the text of its arguments object
// so far (from its '{', not past its '}'), as the model wrote it.
struct PartialToolCall {
  std::string name;
  std::string_view arguments;
};

class ToolCallSyntax {
 public:
  virtual ~ToolCallSyntax() = default;

  // Strings that open the tool calls wherever they appear ("<tool_call>", "[TOOL_CALLS]").
  virtual std::vector<std::string_view> markers() const = 0;
  // A character that opens them only as the reply's first non-space character ('{' for Llama's
  // bare JSON); 0 when none.
  virtual char leading_char() const { return 0; }
  // Reads the calls in `region` (from the opening marker or character to the end of the reply so
  // far). Not `final`: the calls complete so far, up to the first one that does not read; nullopt
  // when there are none. What a region gives must be a prefix of what any longer region gives, so
  // a stream hands out what a whole reply does (the fuzzer checks it). `final` (the reply ended):
  // every call, or nullopt when the region is not a well-formed list of calls; the reply past the
  // calls handed out is then dropped, or, when there were none, content.
  virtual std::optional<std::vector<ParsedToolCall>> parse_calls(std::string_view region, bool final) const = 0;
  // The call after the `num_complete` that parse_calls reads in `region` (not final), once its
  // name and the opening of its arguments object are written; nullopt before, or when this syntax
  // hands out calls whole only (Llama 3's: a call is prose until a ';' or the end follows it).
  virtual std::optional<PartialToolCall> partial_call(std::string_view region, size_t num_complete) const {
    return std::nullopt;
  }
};

// A call object being written from obj[0] ('{'): its name and arguments so far, when both have begun.
std::optional<PartialToolCall> partial_call_object(std::string_view obj);

// kOpenAi: gpt-oss's harmony format, whose calls are messages of their own; it has no
// ToolCallSyntax (reasoning/harmony_reply.h reads the whole reply).
enum class ToolParserKind { kHermes, kLlama3Json, kMistral, kOpenAi, kGlm45, kQwen3Coder, kSeedOss };

// `tools`: the request's (OpenAI's array), for a syntax that reads values by their parameters'
// types (glm45: a string parameter's value is text, not JSON).
std::unique_ptr<ToolCallSyntax> make_tool_call_syntax(ToolParserKind kind,
                                                      const nlohmann::json& tools = nlohmann::json());

// tool_choice "required": a JSON array of {"name", "parameters"}; a named function: its arguments
// object alone (the grammar built from the tools' schemas makes the reply exactly that:
// tool_schema.h).
std::unique_ptr<ToolCallSyntax> make_required_tools_syntax();
std::unique_ptr<ToolCallSyntax> make_named_tool_syntax(std::string function_name);

// --tool-call-parser's names: hermes, llama3_json, mistral, glm45, qwen3_coder, seed_oss, openai.
// nullopt for any other.
std::optional<ToolParserKind> tool_parser_from_name(std::string_view name);
const char* tool_parser_name(ToolParserKind kind);
// The model's own syntax, from its chat template (what it was shown to write) and else its
// architecture: harmony's <|channel|> -> openai; <seed:tool_call> -> seed_oss; <arg_key> -> glm45;
// <function= beside <tool_call> -> qwen3_coder; <tool_call> -> hermes; [TOOL_CALLS] -> mistral;
// Llama 3's ipython / <|python_tag|> -> llama3_json; else Mistral architectures -> mistral, and
// hermes for the rest (ChatML).
ToolParserKind pick_tool_parser(std::string_view architecture, std::string_view chat_template);
// Whether a chat template writes OpenAI's harmony format (gpt-oss's: <|channel|> and <|message|>).
bool is_harmony_template(std::string_view chat_template);

}  // namespace minivllm::server
