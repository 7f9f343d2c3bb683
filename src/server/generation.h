// POST /v1/completions and /v1/chat/completions once the body is parsed: prompts -> token ids
// (checked against the model), one AsyncEngine request per prompt, then either one JSON response
// or a server-sent-event stream of chunks. A client that goes away aborts its requests: a stream
// notices at a failed write, a whole response by watching the connection (ClientWatch).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <httplib.h>

#include "api/async_engine.h"
#include "server/client_watch.h"
#include "server/openai_request.h"
#include "server/reasoning/qwen3_reasoning.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {

// How long a handler waits on the engine between looks at the server's state and its client.
inline constexpr std::chrono::milliseconds kPollInterval{200};
// A stream with nothing to send writes an SSE comment this often: it keeps proxies from timing
// out, and a failed write is how a client that went away is noticed (httplib 0.11 does not tell).
// A whole response first watches its client once it has waited this long.
inline constexpr std::chrono::milliseconds kKeepAliveInterval{1000};
// What a refused client is told to wait (Retry-After, seconds): a few steps' worth, long enough for
// the queue to move.
inline constexpr int kRetryAfterS = 1;

struct ServingContext {
  AsyncEngine& engine;
  std::string model_name;            // what /v1/models lists and requests must name
  const std::atomic<bool>& stopping;  // the server is shutting down: end streams now
  double request_timeout_s = 0;      // a request's deadline when it sets none; <= 0: none
  std::atomic<int> num_active{0};    // generation calls not yet answered (a graceful stop waits)
  bool reasoning_parser = false;     // thoughts into reasoning_content (--reasoning-parser)
  // Replies are in OpenAI's harmony format (gpt-oss): detokenized with their special tokens, read
  // by HarmonyReplyStream (--reasoning-parser openai_gptoss, --tool-call-parser openai).
  bool harmony = false;
  // The chat template reads reasoning_effort (gpt-oss's): else a request's reasoning_effort is refused.
  bool template_reasoning_effort = false;
  // The chat template writes </think> (Qwen3's does): with the reasoning parser on, a constrained
  // reply may begin with its thoughts (StructuredOutputs::think_first).
  bool model_thinks = false;
  ThinkTags think_tags = {};  // the template's: Seed-OSS's <seed:think>, else <think>
  std::optional<ToolParserKind> tool_parser = std::nullopt;  // tool_choice auto's syntax; none: auto is refused
};

// Counts one generation call in ServingContext::num_active while it lives; a stream's state holds
// it, so a call counts until its last event was written.
class ActiveCall {
 public:
  explicit ActiveCall(std::atomic<int>& n) : n_(n) { ++n_; }
  ~ActiveCall() { --n_; }
  ActiveCall(const ActiveCall&) = delete;
  ActiveCall& operator=(const ActiveCall&) = delete;

 private:
  std::atomic<int>& n_;
};

// Throws ApiError for what is wrong before generation starts (unknown model: 404; a prompt that
// does not fit or is not in the vocabulary: 400; the waiting queue full: 503 with Retry-After). A
// failure during generation, a deadline passed included, is a 500 (whole response) or an error
// event (stream).
// A prompt's token ids against the model (inside the vocabulary, not empty, shorter than
// max_model_len); a 400 naming `param` otherwise.
void check_prompt_ids(const ServingContext& ctx, const std::vector<int32_t>& ids, const char* param);
// A 400 naming `param` when the request asks for a reasoning effort the model's template cannot take.
void check_reasoning_effort(const ServingContext& ctx, const GenerationRequest& req, const char* param);
// A text or token-id prompt's checked ids (text tokenized with the model's special tokens); a 400
// naming `param` when it cannot be tokenized or fails check_prompt_ids.
std::vector<int32_t> prompt_input_ids(const ServingContext& ctx, const PromptInput& p, const char* param);

// rewrite_sse: a stream's events pass through it before they are written (/v1/responses rewrites the
// chat chunks as its own events); none: written as they are.
using SseRewriter = std::function<std::string(std::string_view)>;
void serve_generation(const ServingContext& ctx, const GenerationRequest& req, AsyncEngine::Clock::time_point deadline,
                      std::shared_ptr<ActiveCall> active, ClientWatch& client, httplib::Response& res,
                      SseRewriter rewrite_sse = nullptr);

}  // namespace minivllm::server
