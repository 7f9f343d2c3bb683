#include "server/request_fields.h"

#include <array>
#include <string>
#include <string_view>

#include "engine/sampling_keys.h"
#include "server/api_error.h"

namespace minivllm::server {
namespace {

// Read by openai_request.cc besides the sampling keys (which are all read under their own names),
// and request_timeout by request_deadline.cc.
constexpr std::array<std::string_view, 8> kCommonFields = {
    "model",      "stream",   "stream_options",  "return_tokens_as_token_ids",
    "max_tokens", "logprobs", "response_format", "request_timeout"};
constexpr std::array<std::string_view, 2> kCompletionFields = {"prompt", "echo"};
constexpr std::array<std::string_view, 10> kChatFields = {
    "messages",    "max_completion_tokens", "top_logprobs",          "chat_template_kwargs",   "tools",
    "tool_choice", "parallel_tool_calls",   "add_generation_prompt", "continue_final_message", "reasoning_effort"};

// Accepted and ignored. Each changes nothing about the tokens generated, so ignoring it misleads
// no client:
//   user          an end-user id for the provider's abuse monitoring; nothing is monitored here.
//   metadata      tags for the provider's stored-completions dashboard; nothing is stored.
//   store         whether the provider keeps the completion for distillation; nothing is kept.
//   service_tier  the provider's billing / priority tier; one engine serves every request alike.
// vLLM's /tokenize and /detokenize fields: these endpoints take no sampling keys.
constexpr std::array<std::string_view, 9> kTokenizeFields = {
    "model", "prompt",          "messages", "add_special_tokens", "chat_template_kwargs", "tools",
    "add_generation_prompt", "continue_final_message", "return_token_strs"};
constexpr std::array<std::string_view, 2> kDetokenizeFields = {"model", "tokens"};

constexpr std::array<std::string_view, 4> kIgnoredFields = {"user", "metadata", "store", "service_tier"};

struct Refusal {
  std::string_view field;
  std::string_view why;
};

// Known fields the server cannot honour yet: a 400 that says so, never a silent drop.
constexpr auto kRefused = std::to_array<Refusal>({
    {"guided_json", "vLLM's old form: use structured_outputs {\"json\": ...} or response_format"},
    {"guided_regex", "vLLM's old form: use structured_outputs {\"regex\": ...}"},
    {"guided_choice", "vLLM's old form: use structured_outputs {\"choice\": [...]}"},
    {"guided_grammar", "vLLM's old form: use structured_outputs {\"grammar\": ...}"},
    {"tools", "tools are a parameter of /v1/chat/completions"},
    {"tool_choice", "tool_choice is a parameter of /v1/chat/completions"},
    {"parallel_tool_calls", "parallel_tool_calls is a parameter of /v1/chat/completions"},
    {"functions", "function calling is not supported (and deprecated by OpenAI for tools)"},
    {"function_call", "function calling is not supported (and deprecated by OpenAI for tools)"},
    {"modalities", "only text output is supported"},
    {"audio", "only text output is supported"},
    {"prediction", "predicted outputs are not supported"},
    {"web_search_options", "web search is not supported"},
    {"suffix", "insertion (a suffix after the completion) is not supported"},
    {"best_of", "best_of is not supported; use n"},
});

template <size_t N>
bool listed(const std::array<std::string_view, N>& fields, std::string_view name) {
  for (std::string_view f : fields) {
    if (f == name) return true;
  }
  return false;
}

bool read_by(Endpoint endpoint, std::string_view name) {
  if (endpoint == Endpoint::kTokenize) return listed(kTokenizeFields, name);
  if (endpoint == Endpoint::kDetokenize) return listed(kDetokenizeFields, name);
  if (listed(kCommonFields, name)) return true;
  if (endpoint == Endpoint::kCompletions ? listed(kCompletionFields, name) : listed(kChatFields, name)) return true;
  return find_key(sampling_rows(), name) != nullptr;
}

}  // namespace

bool is_ignored_bookkeeping_field(std::string_view name) { return listed(kIgnoredFields, name); }

void check_request_fields(const nlohmann::json& body, Endpoint endpoint) {
  if (!body.is_object()) return;  // the parser names that problem
  for (const auto& [name, value] : body.items()) {
    // The ignored bookkeeping fields are OpenAI clients' (completions and chat), not vLLM's /tokenize.
    const bool openai = endpoint == Endpoint::kCompletions || endpoint == Endpoint::kChat;
    if (value.is_null() || read_by(endpoint, name) || (openai && is_ignored_bookkeeping_field(name))) continue;
    for (const Refusal& r : kRefused) {
      if (r.field == name) throw bad_param(name, "not supported: " + std::string(r.why));
    }
    const char* where = endpoint == Endpoint::kChat         ? "/v1/chat/completions"
                        : endpoint == Endpoint::kTokenize   ? "/tokenize"
                        : endpoint == Endpoint::kDetokenize ? "/detokenize"
                                                            : "/v1/completions";
    throw bad_param(name, std::string("unknown parameter of ") + where + " (refused rather than ignored)");
  }
}

}  // namespace minivllm::server
