// The JSON that OpenAI's endpoints answer with: whole responses, stream chunks, usage and logprobs,
// shaped field for field as OpenAI sends them so that its clients parse them unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"
#include "server/chat_reply.h"
#include "tokenizer/tokenizer.h"

namespace minivllm::server {

// What every response and chunk of one request shares.
struct ResponseHeader {
  bool chat = false;
  std::string id;  // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;
  std::string model;
};
ResponseHeader make_header(bool chat, const std::string& model);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

// How logprob entries name their tokens: by text (the token's bytes; a piece of a UTF-8 character
// stays a piece), or as "token_id:N" (vLLM's return_tokens_as_token_ids).
struct TokenNamer {
  const Tokenizer* tok = nullptr;
  bool as_ids = false;
  std::string operator()(int32_t id) const;
};

// Completions' logprobs object {tokens, token_logprobs, top_logprobs, text_offset}; `text_offset`
// is where the first token's text starts in the choice's text, and moves past the tokens' text.
nlohmann::json completion_logprobs(const TokenNamer& name, const std::vector<TokenLogprob>& lps, size_t& text_offset);
// Echo with logprobs (completions): the same object for the prompt's tokens, as OpenAI's legacy API
// and vLLM give it: the first token's logprob and alternatives are null (nothing predicts it), each
// later token has at most `top` alternatives; text_offset counts from 0 through the tokens' text.
// `lps` holds prompt tokens 1.. (RequestOutput::prompt_logprobs).
nlohmann::json completion_prompt_logprobs(const TokenNamer& name, const std::vector<int32_t>& prompt,
                                          const std::vector<TokenLogprob>& lps, int top);
// b's four arrays after a's (the prompt's, then the completion's).
void append_completion_logprobs(nlohmann::json& a, const nlohmann::json& b);
// vLLM's prompt_logprobs: null for the first prompt token, then for each later one an object keyed
// by token id, {logprob, rank, decoded_token}, of the token itself and its `top` most likely
// alternatives; rank counts from 1 among those, and is null for a token outside them.
nlohmann::json vllm_prompt_logprobs(const TokenNamer& name, const std::vector<TokenLogprob>& lps, int top);
// Chat's logprobs object {content: [{token, logprob, bytes, top_logprobs: [...]}]}.
nlohmann::json chat_logprobs(const TokenNamer& name, const std::vector<TokenLogprob>& lps);

// One finished choice of a whole (non-streamed) response.
nlohmann::json completion_choice(int index, const std::string& text, const std::string& finish_reason,
                                 nlohmann::json logprobs);
nlohmann::json chat_choice(int index, const std::string& text, const std::string& finish_reason,
                           nlohmann::json logprobs);
// A chat choice whose reply was parsed: reasoning_content (when the reasoning parser is on; null
// when there was none), content (null when empty beside tool calls) and tool_calls (when any).
nlohmann::json chat_choice(int index, const ReplyDelta& reply, bool with_reasoning, const std::string& finish_reason,
                           nlohmann::json logprobs);

// OpenAI's tool call ids: "chatcmpl-tool-" and 32 hex digits, unique within the process.
std::string new_tool_call_id();
// A finish reason once the reply's calls are known: "tool_calls" for a reply that ended with calls.
std::string finish_reason_with_calls(const std::string& finish_reason, int num_calls);
nlohmann::json full_response(const ResponseHeader& h, nlohmann::json choices, nlohmann::json usage);

// One choice's piece of a stream chunk. `finish_reason` "" gives null; `first` (chat) adds the
// assistant role to the delta, as OpenAI's first chunk does.
nlohmann::json chunk_choice(const ResponseHeader& h, int index, const std::string& text,
                            const std::string& finish_reason, nlohmann::json logprobs, bool first);
// A chat chunk's choice for a parsed piece of the reply: delta.reasoning_content, delta.content and
// delta.tool_calls (a call's first piece with its id, type and name; later ones only its index and
// more function.arguments).
nlohmann::json chunk_choice(int index, const ReplyDelta& piece, const std::string& finish_reason,
                            nlohmann::json logprobs, bool first);
// A chunk object; `usage` null is written as null only when the stream reports usage at the end
// (OpenAI's include_usage shape), else left out.
nlohmann::json chunk(const ResponseHeader& h, nlohmann::json choices, const nlohmann::json& usage, bool with_usage);

// "data: <json>\n\n" and the terminator "data: [DONE]\n\n". Invalid UTF-8 in text (a partial
// character) is replaced by U+FFFD instead of failing the response.
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
std::string dump_body(const nlohmann::json& j);

}  // namespace minivllm::server
