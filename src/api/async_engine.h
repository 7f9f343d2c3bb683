// AsyncEngine: an LLMEngine served to many threads. One engine thread owns the LLMEngine (it is
// built, stepped and exited there, so the device work never changes thread) and steps while there
// is work. Any thread submits a request and gets a RequestHandle: a stream of deltas and the
// final outputs. Dropping a handle before its request ended aborts the request (a client that went
// away); its KV blocks are freed before the next step.
//
// Submitting goes through the engine thread's command queue and waits for the add to be done
// there, so a rejected request (add_request's checks: prompt length, vocabulary, sampling values)
// throws its Error to the submitter synchronously and the HTTP layer can answer 400. Validating in
// the caller instead would copy add_request's checks and still race with the engine's state. The
// wait is at most one step, which the request would have waited anyway before its prefill. Text is
// tokenized and chat templates rendered in the caller's thread (both are thread-safe), so a long
// prompt never stalls the step loop.
//
// A dead engine (a tensor-parallel worker died) cannot step again: the engine thread ends every
// request with an error and refuses new ones, and healthy() turns false so the server can exit
// and be restarted.
//
// Overload is an answer, not a wait: a submit that would queue more than max_waiting_requests
// sequences throws QueueFullError (the server's 503). A request may carry a deadline; past it the
// engine thread ends it with finish_reason "error" and frees its blocks (checked before each step).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/engine_config.h"
#include "api/resolved_config.h"
#include "api/llm_engine.h"
#include "api/request_stream.h"
#include "api/serving_stats.h"

namespace minivllm {

class AsyncEngine;

// The waiting queue is full: the request was not taken; the same request may be sent again later.
class QueueFullError : public Error {
 public:
  using Error::Error;
};

// The submitter's end of one request (all its choices when n > 1). Not thread-safe itself: one
// thread consumes it; abort() and the destructor may race the engine thread safely.
class RequestHandle {
 public:
  ~RequestHandle();
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;

  int64_t id() const { return id_; }
  int num_choices() const { return stream_->num_choices(); }
  const std::vector<int32_t>& prompt_token_ids() const { return prompt_token_ids_; }

  // The events that arrived, waiting up to `timeout` when there are none yet (empty: none came).
  std::vector<StreamEvent> next(std::chrono::milliseconds timeout);
  // Every choice ended and every event was taken.
  bool finished() const { return stream_->drained(); }
  // Blocks until every choice ended; their outputs by choice index.
  std::vector<RequestOutput> wait();
  // Aborts the request (every choice); the stream then ends with finish_reason "abort".
  void abort();

 private:
  friend class AsyncEngine;
  struct Core;
  RequestHandle(std::shared_ptr<Core> core, int64_t id, std::shared_ptr<RequestStream> stream,
                std::vector<int32_t> prompt_token_ids);

  std::shared_ptr<Core> core_;
  int64_t id_;
  std::shared_ptr<RequestStream> stream_;
  std::vector<int32_t> prompt_token_ids_;
  std::vector<RequestOutput> outputs_;  // filled by wait()
};

class AsyncEngine {
 public:
  // Builds the LLMEngine on the engine thread; throws its Error (bad model, config) here.
  explicit AsyncEngine(EngineConfig config);
  // shutdown().
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  using Clock = std::chrono::steady_clock;
  static constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

  // Each throws an Error naming the problem when the engine rejects the request, or when the
  // engine has shut down; QueueFullError when the waiting queue is full. Past `deadline` the
  // request ends with finish_reason "error". Thread-safe.
  std::unique_ptr<RequestHandle> submit_tokens(std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
                                               Clock::time_point deadline = kNoDeadline);
  // Several requests (one HTTP call's prompts or inputs) added between the same two steps, so that
  // they are scheduled together; submitted one by one, each would wait for the step in progress.
  // All or none: when one is refused, those added before it are aborted and its error thrown.
  // prompts and params have the same length.
  std::vector<std::unique_ptr<RequestHandle>> submit_tokens_batch(std::vector<std::vector<int32_t>> prompts,
                                                                  const std::vector<SamplingParams>& params,
                                                                  Clock::time_point deadline = kNoDeadline);
  std::unique_ptr<RequestHandle> submit_text(const std::string& prompt, const SamplingParams& params);
  std::unique_ptr<RequestHandle> submit_chat(const nlohmann::json& messages, const SamplingParams& params,
                                             const nlohmann::json& template_vars = nlohmann::json::object());

  // What submit_text / submit_chat feed the engine; for callers that need the ids first (to count
  // or check them). Thread-safe.
  std::vector<int32_t> tokenize_text(const std::string& prompt, bool add_special_tokens = true) const;
  std::vector<int32_t> tokenize_chat(const nlohmann::json& messages, const nlohmann::json& template_vars,
                                     const ChatRender& how = {}) const;
  std::vector<int32_t> tokenize_chat(const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& template_vars,
                                     const ChatRender& how = {}) const;  // key order kept
  std::string detokenize(const std::vector<int32_t>& ids) const;

  // Aborts every choice of request `id`; unknown or finished ids are ignored. Thread-safe.
  void abort(int64_t id);
  // Ends every request in flight with `finish_reason` (and `error`): a server shutting down ends its
  // streams first. Thread-safe.
  void abort_all(const std::string& finish_reason = "abort", const std::string& error = "");
  // pause_generation(): no step is taken after the one in progress. Submits and aborts are still
  // handled, so requests queue (and a full queue refuses) while paused, as with vLLM's
  // pause_generation; deadlines are checked again once stepping resumes. resume_generation()
  // steps again. Thread-safe.
  void pause_generation();
  void resume_generation();
  // Ends every request in flight with finish_reason "abort", stops the engine thread and exits the
  // engine (its worker processes end). Idempotent; later submits throw, tokenizing still works.
  void shutdown();

  // False once the engine can no longer step (a tensor-parallel worker died); death() says why.
  // Thread-safe.
  bool healthy() const { return !dead_.load(); }
  std::string death() const;

  // A copy of the counters and histograms, as of the last step.
  ServingStats stats() const;
  // The engine's configuration after it was built (max_model_length capped by the model, the
  // measured number of KV blocks).
  const ResolvedConfig& config() const { return config_; }
  const ModelConfig& model_config() const { return model_config_; }
  // The model's sampling defaults (LLMEngine::generation_defaults): the server starts each request's
  // parameters from them.
  const GenerationDefaults& generation_defaults() const { return generation_defaults_; }
  const Tokenizer* tokenizer() const { return tokenizer_; }
  // The chat template's source, "" when the model has none (the server picks its parsers by it).
  std::string chat_template_source() const;

 private:
  struct Tracked;
  void run_engine_thread(EngineConfig config, std::promise<void> ready);
  void process_commands();
  void step_once();
  void refuse_when_full(int num_choices);
  // Engine thread: refuse_when_full, then the engine's add_request, then the request tracked.
  int64_t add_tracked(std::vector<int32_t> ids, const SamplingParams& params, std::shared_ptr<RequestStream> stream,
                      Clock::time_point deadline);
  void end_expired(Clock::time_point now);
  void check_alive();
  void dispatch(StepResult& result);
  void end_request(int64_t id, const std::string& finish_reason, const std::string& error);
  void publish_stats();

  std::shared_ptr<RequestHandle::Core> core_;
  std::unique_ptr<LLMEngine> engine_;  // stepped by the engine thread only; its const tokenizer and
                                       // template are shared
  ResolvedConfig config_;
  ModelConfig model_config_;
  GenerationDefaults generation_defaults_;
  const Tokenizer* tokenizer_ = nullptr;  // owned by engine_, immutable
  std::map<int64_t, Tracked> tracked_;   // engine thread only

  mutable std::mutex stats_mutex_;
  ServingStats stats_;
  std::string death_;  // under stats_mutex_, set before dead_
  std::atomic<bool> dead_{false};
  std::thread thread_;
};

}  // namespace minivllm
