// OpenAI request bodies -> what the engine runs: the prompts (or chat messages) and the
// SamplingParams, with every parameter checked for type and range. Pure: no engine, no sockets, so
// it is unit-tested and fuzzed on its own. Errors are ApiError 400 naming the parameter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/generation_defaults.h"
#include "template/chat_template.h"
#include "engine/sampling_params.h"
#include "server/tool_request.h"

namespace minivllm::server {

// One prompt of /v1/completions: text, or token ids.
struct PromptInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> token_ids;
};

struct GenerationRequest {
  bool chat = false;
  std::string model;                  // "" when the body has none
  std::vector<PromptInput> prompts;   // completions: one or more
  nlohmann::json messages;            // chat: the conversation, contents flattened to strings
  nlohmann::json chat_template_kwargs = nlohmann::json::object();
  ChatRender render;                  // chat: add_generation_prompt, continue_final_message (vLLM's)
  ToolRequest tools;                  // chat: tools, tool_choice, parallel_tool_calls
  std::string reasoning_effort;       // chat: low, medium or high ("" when not given), a template variable
  SamplingParams params;              // n, logprobs and penalties included
  std::optional<int> max_tokens;      // as given; unset: the handler fills in the default
  std::optional<int> default_max_tokens;  // the model's max_new_tokens (generation_config.json), if any
  int n = 1;
  int logprobs = -1;                  // -1: none; else how many top entries (completions' logprobs,
                                      // chat's top_logprobs when logprobs is true)
  bool echo = false;                  // completions: the prompt text before the completion (with
                                      // logprobs: the prompt tokens' logprobs before the completion's)
  int prompt_logprobs = -1;           // vLLM's prompt_logprobs as asked (params.prompt_logprobs may be
                                      // raised to logprobs for echo)
  bool tokens_as_ids = false;         // vLLM's return_tokens_as_token_ids: logprob tokens as
                                      // "token_id:N", so a client can feed them back exactly
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
};

// Limits that keep one request from monopolising the server (n and logprobs: SamplingParams').
inline constexpr int kMaxPrompts = 256;  // prompts x n in one completions request
inline constexpr int kMaxStopStrings = 16;
inline constexpr int kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions

// The prompts under `key` (completions' "prompt", embeddings' "input"): a string, strings, token ids
// or lists of them, at most kMaxPrompts; a 400 naming `key` otherwise.
std::vector<PromptInput> read_prompts(const nlohmann::json& body, const char* key);

// Each request's sampling parameters start from `defaults` (the model's generation_config.json,
// api/generation_defaults.h); the keys the body sets replace them. max_tokens, when the body has
// none: completions min(16, the model's max_new_tokens), chat the handler's (the room left, capped
// by max_new_tokens).
GenerationRequest parse_completion_request(const nlohmann::json& body, const GenerationDefaults& defaults = {});
GenerationRequest parse_chat_request(const nlohmann::json& body, const GenerationDefaults& defaults = {});

// POST /tokenize: a "prompt" string, or chat "messages"; POST /detokenize: "tokens".
struct TokenizeRequest {
  bool chat = false;
  std::string prompt;
  nlohmann::json messages;
  nlohmann::json chat_template_kwargs = nlohmann::json::object();  // with "tools" when given
  ChatRender render;  // chat: add_generation_prompt, continue_final_message (vLLM's)
  bool add_special_tokens = true;
  bool return_token_strs = false;  // vLLM's: each token as the vocabulary spells it, beside the ids
};
TokenizeRequest parse_tokenize_request(const nlohmann::json& body);
std::vector<int32_t> parse_detokenize_request(const nlohmann::json& body);

}  // namespace minivllm::server
