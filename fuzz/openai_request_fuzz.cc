// Fuzzes the HTTP request handlers' parsing, the part of the server a remote client reaches with
// arbitrary bytes: the body through parse_json_body (size, nesting and syntax checks), then every
// request kind's parser (completions, chat, tokenize, detokenize, embeddings), which turn the JSON
// into prompts and SamplingParams. The only allowed rejection is ApiError (or the engine's Error); whatever a
// parser accepts must also pass SamplingParams::validate, so the engine never sees a bad value.
// The first input byte picks the request kind (so every kind gets the whole corpus); the rest is
// the body. A first byte of 0xF0-0xFF instead feeds the rest, as a model's reply, to the chat
// reply parsers (tool calls, reasoning; the low bits pick which): fed whole and in pieces, it
// must split the same way; 0xD0-0xD7 does the same with the reply read as harmony (gpt-oss's
// channels), 0xD8-0xDF with GLM-4.5's or Qwen3-Coder's call syntax. A first byte of 0xE0-0xEF
// feeds the body to /v1/responses' translation into a chat request, which the chat parser must
// then accept or refuse with an ApiError.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "server/api_error.h"
#include "server/chat_reply.h"
#include "server/embedding_request.h"
#include "server/json_body.h"
#include "server/openai_request.h"
#include "server/responses_api.h"

namespace {

namespace server = minivllm::server;

void check_accepted(const server::GenerationRequest& r) {
  r.params.validate();  // throws Error (a crash here: the parser let an invalid value through)
  if (!r.chat && r.prompts.empty()) __builtin_trap();
  if (r.prompts.size() > static_cast<size_t>(server::kMaxPrompts)) __builtin_trap();
}

void run(uint8_t kind, std::string_view body) {
  nlohmann::json j;
  try {
    j = server::parse_json_body(body);
  } catch (const server::ApiError& e) {
    if (e.status() != 400 && e.status() != 413) __builtin_trap();
    return;
  }
  try {
    if (kind >= 0xE0) {  // /v1/responses: translated, then the chat path's parser, as the server does
      const nlohmann::json chat = server::responses_to_chat_body(j);
      check_accepted(server::parse_chat_request(chat));
      (void)server::responses_tools_in_order(body);
      return;
    }
    switch (kind % 5) {
      case 0: check_accepted(server::parse_completion_request(j)); break;
      case 1: check_accepted(server::parse_chat_request(j)); break;
      case 2: (void)server::parse_tokenize_request(j); break;
      case 3: (void)server::parse_detokenize_request(j); break;
      default: {
        const server::EmbeddingRequest e = server::parse_embedding_request(j, 1024);
        if (e.inputs.empty() || e.inputs.size() > static_cast<size_t>(server::kMaxPrompts)) __builtin_trap();
        break;
      }
    }
  } catch (const server::ApiError& e) {
    if (e.status() < 400 || e.status() >= 500) __builtin_trap();
    (void)server::error_json(e).dump();  // what the client gets must serialise
  }
}

// The reply's split when fed in pieces of `piece` bytes.
server::ReplyDelta split_reply(const server::ReplyParsing& parsing, std::string_view text, size_t piece) {
  auto parser = parsing.make();
  server::ReplyDelta out;
  for (size_t i = 0; i < text.size(); i += piece) out.append(parser->feed(text.substr(i, piece)));
  out.append(parser->finish());
  if (parser->num_calls() != static_cast<int>(out.calls.size())) __builtin_trap();
  return out;
}

void run_reply(uint8_t mode, std::string_view text, bool harmony,
               std::optional<server::ToolParserKind> syntax = std::nullopt) {
  server::ReplyParsing p;
  p.harmony = harmony;
  p.reasoning = mode & 1;
  const int tools = syntax ? ((mode & 2) ? 1 : 6) : (mode >> 1) & 7;
  if (tools == 1 || tools == 6) p.syntax = server::ToolParserKind::kHermes;
  if (tools == 2) p.syntax = server::ToolParserKind::kLlama3Json;
  if (tools == 3) p.syntax = server::ToolParserKind::kMistral;
  p.choice = tools == 0 ? server::ToolChoice::kNone
             : tools == 4 || tools == 7 ? server::ToolChoice::kRequired
             : tools == 5 ? server::ToolChoice::kNamed
                          : server::ToolChoice::kAuto;
  p.named_function = "f";
  p.parallel = tools < 6;
  if (syntax) p.syntax = syntax;
  if (!p.active()) return;
  const server::ReplyDelta whole = split_reply(p, text, text.size() + 1);
  for (size_t piece : {size_t{1}, size_t{3}}) {
    const server::ReplyDelta d = split_reply(p, text, piece);
    if (d.reasoning != whole.reasoning || d.content != whole.content || d.calls != whole.calls) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  // SamplingParams::validate throws minivllm::Error for values a parser let through: not caught,
  // so libFuzzer keeps such an input.
  if (data[0] >= 0xF0) {
    run_reply(data[0] & 0x0F, body, /*harmony=*/false);
    return 0;
  }
  if (data[0] >= 0xD8 && data[0] < 0xE0) {  // GLM-4.5's or (bit 2) Qwen3-Coder's syntax; reasoning, parallel
    run_reply(data[0] & 0x07, body, /*harmony=*/false,
              (data[0] & 4) ? server::ToolParserKind::kQwen3Coder : server::ToolParserKind::kGlm45);
    return 0;
  }
  if (data[0] >= 0xD0 && data[0] < 0xD8) {
    run_reply(data[0] & 0x07, body, /*harmony=*/true);
    return 0;
  }
  run(data[0], body);
  return 0;
}
