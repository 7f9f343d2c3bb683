// LLMEngine (seeds: LLMEngine): the public API. Owns the model runner and the scheduler; turns text
// into token ids and back with the model's own tokenizer and chat template; applies stop strings.
// Bad requests are rejected one by one with an Error that names the problem; the others go on.
// A step that fails (the runner throws) fails only the requests of its batch, with the error.
// A request with n > 1 is n sequences (choices) under one request id.
// Logprobs are the log-softmax of the logits the sampler saw after the penalties, at temperature 1
// (sampling/sampler.h says why); without penalties they are the model's own distribution.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/engine_config.h"
#include "api/generation_defaults.h"
#include "api/resolved_config.h"
#include "api/model_source.h"
#include "engine/sampling_params.h"
#include "engine/scheduler.h"
#include "runtime/runner_group.h"
#include "structured/structured_output_engine.h"

namespace minivllm {

struct RequestOutput {
  int64_t request_id = -1;
  int index = 0;  // the choice (0..n-1) when the request asked for n > 1
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> token_ids;  // the completion
  std::string text;                // the completion as text (empty without a tokenizer)
  std::string finish_reason;       // "stop", "length", "abort", or "error"
  std::string error;               // why the request failed, when finish_reason is "error"
  std::vector<TokenLogprob> logprobs;  // one per completion token when params.logprobs >= 0
  // When params.prompt_logprobs >= 0: one per prompt token after the first (entry j - 1 scores
  // prompt token j), the same for every choice.
  std::vector<TokenLogprob> prompt_logprobs;
  // When params.pooling: the final-normed hidden state of the prompt's last token (f32, hidden_size
  // values, not normalised).
  std::vector<float> embedding;
  int num_cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
};

// What one step produced for one request still in flight or just finished (for streaming).
struct RequestDelta {
  int64_t request_id = -1;
  int index = 0;                   // the choice (0..n-1)
  std::vector<int32_t> token_ids;  // new tokens
  std::string text;                // new text, safe to print (stop strings held back until decided)
  std::vector<TokenLogprob> logprobs;  // one per new token when params.logprobs >= 0
};

struct StepResult {
  std::vector<RequestOutput> finished;  // one per finished choice
  std::vector<RequestDelta> deltas;
  int num_tokens = 0;  // seeds: > 0 prefill tokens, < 0 decoded sequences, 0 idle
};

// Counters for monitoring (the server's /metrics). Totals count since the engine started.
struct EngineStats {
  int num_running = 0;  // sequences (choices) holding KV blocks
  int num_waiting = 0;  // sequences queued, preempted ones included
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_free = 0;
  int64_t prefix_cache_queried_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_cache_hit_tokens = 0;      // of those, found there
  int64_t prompt_tokens_total = 0;          // prompt tokens of the requests prefilled (once per request)
  int64_t generation_tokens_total = 0;      // tokens generated, all choices
  int64_t num_preemptions = 0;
};

class LLMEngine {
 public:
  explicit LLMEngine(EngineConfig config);
  ~LLMEngine();

  // Each returns the request id; throws an Error naming the problem (empty or over-long prompt,
  // ids outside the vocabulary, invalid sampling parameters, no tokenizer ...).
  int64_t add_request(std::vector<int32_t> prompt_token_ids, const SamplingParams& params);
  int64_t add_request(const std::string& prompt, const SamplingParams& params);
  // A chat conversation (JSON array of {role, content}) rendered with the model's chat template.
  int64_t add_chat_request(const nlohmann::json& messages, const SamplingParams& params,
                           const nlohmann::json& template_vars = nlohmann::json::object(),
                           const ChatRender& how = {});
  // Compiles `params`' grammar, if any, into the grammar cache, where add_request finds it; throws
  // as add_request would for a grammar that does not compile. The one member callable from any
  // thread, beside the engine's: AsyncEngine calls it on the submitter's thread, so that a schema's
  // compile does not stall every running sequence's step.
  void compile_structured_outputs(const SamplingParams& params);

  StepResult step();
  bool is_finished() const;
  bool abort(int64_t request_id);
  // Empties the prefix cache, so that prompts seen before are computed again (benchmark runs that
  // repeat a workload). Only between requests: false, changing nothing, while any is unfinished.
  bool reset_prefix_cache();
  // Stops accepting work and aborts what is in flight; the destructor calls it too.
  void exit();

  // Runs every prompt to completion; outputs in input order. A rejected prompt gets an output with
  // finish_reason "error" and the reason; the others run normally.
  std::vector<RequestOutput> generate(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& params);
  std::vector<RequestOutput> generate(const std::vector<std::string>& prompts, const SamplingParams& params);
  std::vector<RequestOutput> chat(const std::vector<nlohmann::json>& conversations, const SamplingParams& params,
                                  const nlohmann::json& template_vars = nlohmann::json::object(),
                                  const ChatRender& how = {});

  // Teacher forcing: f32 logits [len, V] for every position of `token_ids` (one prefill).
  std::vector<float> score(const std::vector<int32_t>& token_ids);

  // Renders a conversation with the chat template (errors name the template problem).
  // The same with the caller's key order kept (what tojson prints: a tool's schema as the client wrote it).
  std::string apply_chat_template(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                  const nlohmann::ordered_json& template_vars) const;
  std::string apply_chat_template(const nlohmann::json& messages, bool add_generation_prompt = true,
                                  const nlohmann::json& template_vars = nlohmann::json::object()) const;
  // The same as `how` says (add_generation_prompt, continue_final_message).
  std::string apply_chat_template(const nlohmann::json& messages, const ChatRender& how,
                                  const nlohmann::json& template_vars) const;
  std::string apply_chat_template(const nlohmann::ordered_json& messages, const ChatRender& how,
                                  const nlohmann::ordered_json& template_vars) const;

  // The config with its derived values resolved (resolved_config.h).
  const ResolvedConfig& config() const { return config_; }
  const ModelConfig& model_config() const { return source_.config; }
  // The model's sampling defaults (EngineConfig::generation_config): what a request that leaves a
  // key unset gets; default_sampling_params() is SamplingParams{} with them applied.
  const GenerationDefaults& generation_defaults() const { return generation_defaults_; }
  const SamplingParams& default_sampling_params() const { return generation_defaults_.params; }
  // The model's chat template, or null when it has none (or a broken one).
  const ChatTemplate* chat_template() const { return source_.chat_template ? &*source_.chat_template : nullptr; }
  const Tokenizer* tokenizer() const { return source_.tokenizer.get(); }
  const ModelRunner& runner() const { return runners_->runner(); }
  const RunnerGroup& runners() const { return *runners_; }
  int64_t num_preemptions() const { return scheduler_->num_preemptions(); }
  EngineStats stats() const;

  // Tests: what the engine asks of the runners, in order, each with the step's number (launches
  // counted from 0). A step launched with its grammars' masks deferred gets kFillMasks after
  // kLaunch; the overlap is that nothing waits for the step in between.
  enum class StepEvent { kLaunch, kFillMasks, kCollect };
  void set_step_observer(std::function<void(StepEvent, int64_t step)> observer) { observer_ = std::move(observer); }

 private:
  struct Request;
  void check_prompt(const std::vector<int32_t>& ids) const;
  // After choice 0's prefill step succeeded, the other choices join (they find its prompt blocks).
  void admit_other_choices(Request& r);
  // Hands out choice `index`'s delta, and its output when it finished (forgetting it then).
  // Without want_deltas an unfinished choice hands out nothing (generate() reads only outputs).
  void emit(Request& r, int index, StepResult& out, bool want_deltas);
  StepResult run_step(bool want_deltas);
  // A step handed to the runners and not yet resolved (async scheduling keeps one between calls).
  struct InFlight;
  // `grammars_current`: no step is in flight whose tokens the batch's grammars have not taken, so
  // deferred masks are filled at once (while the forward runs); else run_step fills them once the
  // step before is resolved.
  std::unique_ptr<InFlight> launch(ScheduledBatch batch, bool grammars_current);
  // A step launched with deferred masks: fills them from the grammars' current states and lets it
  // sample. A failure is kept for finish_step (the step still samples, unmasked, so that the
  // runner stays in step).
  void sample_with_masks(InFlight& step);
  // Collects `step`'s tokens and resolves it into `out`.
  void finish_step(InFlight& step, StepResult& out, bool want_deltas);
  // Waits for a step still in flight and drops it (its sequences have all finished).
  void drain();
  void finish_with_error(Request& r, int index, const std::string& error, StepResult& out);
  void fail_batch(const ScheduledBatch& batch, const std::string& error, StepResult& out);
  void note_prefill(const ScheduledBatch& batch);
  // Adds `count` prompts through `add(i)` (a rejected one gets `choices` "error" outputs) and runs
  // them all; `choices` outputs per prompt, in order.
  std::vector<RequestOutput> submit_all(size_t count, int choices, const std::function<int64_t(size_t)>& add);
  std::vector<RequestOutput> run_to_completion(std::vector<RequestOutput> outputs, const std::vector<int64_t>& ids,
                                               int choices);

  ResolvedConfig config_;  // set once by the constructor
  ModelSource source_;
  GenerationDefaults generation_defaults_;
  std::unique_ptr<RunnerGroup> runners_;  // rank 0 here, ranks 1..N-1 in worker processes
  std::unique_ptr<Scheduler> scheduler_;
  // Structured outputs: made by the first request that asks (it reads the whole vocabulary), on
  // whichever thread brings it (structured()).
  std::unique_ptr<StructuredOutputEngine> structured_;
  std::mutex structured_mutex_;
  StructuredOutputEngine& structured();
  std::map<int64_t, std::unique_ptr<Request>> requests_;
  std::unordered_map<int64_t, std::pair<Request*, int>> choice_of_seq_;  // sequence id -> (request, choice)
  int64_t next_id_ = 0;
  int64_t next_seq_id_ = 0;
  bool exited_ = false;
  bool async_scheduling_ = false;  // the key resolved: on, or auto on CUDA at world_size 1
  bool overlap_grammar_masks_ = true;
  int64_t num_launched_ = 0;  // steps launched, for the observer
  std::function<void(StepEvent, int64_t)> observer_;
  std::unique_ptr<InFlight> inflight_;
  EngineStats totals_;  // the counters stats() does not read from the scheduler
};

}  // namespace minivllm
