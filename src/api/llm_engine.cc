#include "api/llm_engine.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "api/choice_output.h"
#include "api/logit_rules.h"
#include "common/check.h"
#include "common/config_key.h"
#include "common/host_profile.h"
#include "common/tuning.h"
#include "engine/allowed_tokens.h"
#include "loader/online_fp8.h"
#include "runtime/step_profiler.h"

namespace minivllm {

// A step handed to the runners: what resolving it needs that the scheduler's advance() changes.
struct LLMEngine::InFlight {
  ScheduledBatch batch;
  int num_tokens = 0;                     // StepResult::num_tokens
  std::vector<Sequence*> completed_prefill;  // rows that complete a prefill (choice 0 admits the others)
  // No row has penalties or asks for logprobs: the next step may be launched before this one is
  // collected (penalties count each input token on the host; logprobs read this step's logits).
  bool overlappable = false;
  std::string error;  // the launch failed: the batch fails when the step is resolved
  int64_t number = 0;  // launches before it (StepEvent)
  // Launched with its grammars' masks deferred (overlap_grammar_masks): its sampling rows in order,
  // until sample_with_masks fills them. mask_error: that failed; the step fails once collected.
  std::vector<Sequence*> mask_rows;
  bool awaiting_masks = false;
  std::string mask_error;
  // The sequence of each prompt logprob row (StepInput::prompt_logprob_seqs), for the results; of
  // each pooled row (StepInput::pool_seqs) likewise.
  std::vector<Sequence*> prompt_logprob_seqs, pool_seqs;
};

// One request in flight: its n choices, each a sequence and its output state.
struct LLMEngine::Request {
  int64_t id = -1;
  std::vector<ChoiceOutput> choices;
  int num_admitted = 0;    // choices handed to the scheduler (0 first, the rest after its prefill)
  int num_unfinished = 0;  // choices not yet handed out as finished
};

namespace {

// Choice i's seed: the request's own for choice 0 (n = 1 samples as before), a splitmix64 mix of
// (seed, i) for the others, so that one seed gives the same n outputs and the choices differ.
uint64_t choice_seed(uint64_t seed, int index) {
  if (index == 0) return seed;
  uint64_t z = seed + static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

LLMEngine::LLMEngine(EngineConfig config) {
  config.validate();
  // The profiling switches, read here first: a bad value stops the engine before any worker starts
  // or any step runs (HostProfile is next read inside the steps' timed scopes).
  (void)HostProfile::enabled();
  (void)StepProfiler::enabled();
  warn_unknown_knob_variables();  // a mistyped MINIVLLM_* knob would otherwise change nothing, silently
  source_ = open_model(config.model, /*with_weights=*/true, LoadOptions{config.load_format, config.dummy_seed,
                                                                      config.hf_overrides});
  replace_chat_template(source_, config.chat_template);
  generation_defaults_ = read_generation_defaults(config.generation_config, source_.path);
  if (!generation_defaults_.keys.empty()) {  // as vLLM says it: a request's defaults are the model's now
    std::fprintf(stderr, "minivllm: sampling defaults from %s: %s (--generation-config vllm: the engine's own)\n",
                 generation_defaults_.source.c_str(), generation_defaults_.keys.dump().c_str());
  }
  // Refused here, before any worker starts; each runner checks again as it loads.
  check_online_quantization(config.quantization, source_.config, *source_.weights);
  ResolvedConfig resolved = resolve_config(config, source_.config, source_.tokenizer.get());
  runners_ = std::make_unique<RunnerGroup>(resolved.runner_config(), source_.config, *source_.weights, source_.path);
  resolved.num_kvcache_blocks = runners_->runner().num_kvcache_blocks();
  resolved.kv_cache_element = runners_->runner().kv_cache_dtype();
  config_ = std::move(resolved);  // read-only from here on
#if defined(__GLIBC__)
  // Loading staged every weight through host buffers that are freed by now, but glibc keeps the
  // freed pages of its heap resident: give them back, or the CPU engine holds them all its life
  // (docs/PERFORMANCE.md, peak RSS).
  malloc_trim(0);
#endif
  scheduler_ = std::make_unique<Scheduler>(config_.scheduler_config());
  overlap_grammar_masks_ = config.overlap_grammar_masks;
  // auto: where the device works while the host does not, i.e. CUDA; not while the step profiler
  // times synchronous steps.
  async_scheduling_ = config.async_scheduling == "on" ||
                      (config.async_scheduling == "auto" && !StepProfiler::enabled() &&
                       runners_->runner().backend().device() == DeviceKind::kCuda);
}

LLMEngine::~LLMEngine() { exit(); }

void LLMEngine::exit() {
  if (exited_) return;
  exited_ = true;
  std::vector<int64_t> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  for (int64_t id : ids) abort(id);
  drain();
  if (runners_) runners_->exit();
}

void LLMEngine::drain() {
  if (!inflight_) return;
  std::unique_ptr<InFlight> step = std::move(inflight_);
  if (!step->error.empty()) return;  // never reached the runners
  try {
    if (step->awaiting_masks) sample_with_masks(*step);
    runners_->collect();
  } catch (const std::exception&) {  // its sequences are finished: nobody is owed the error
  }
}

void LLMEngine::check_prompt(const std::vector<int32_t>& ids) const {
  MINIVLLM_CHECK(!ids.empty()) << "the prompt is empty";
  MINIVLLM_CHECK(static_cast<int>(ids.size()) < config_.max_model_length)
      << "the prompt has " << ids.size() << " tokens; max_model_length is " << config_.max_model_length
      << ", which leaves no room to generate";
  const int64_t vocab = source_.config.vocab_size;
  for (size_t i = 0; i < ids.size(); ++i) {
    MINIVLLM_CHECK(ids[i] >= 0 && ids[i] < vocab)
        << "prompt token " << ids[i] << " at position " << i << " is outside the vocabulary [0, " << vocab << ")";
  }
}

StructuredOutputEngine& LLMEngine::structured() {
  std::lock_guard<std::mutex> lock(structured_mutex_);
  if (!structured_) {
    MINIVLLM_CHECK(source_.tokenizer) << "structured outputs need a tokenizer, and the model has none";
    structured_ = std::make_unique<StructuredOutputEngine>(*source_.tokenizer, source_.config.vocab_size,
                                                           config_.eos_token_ids);
  }
  return *structured_;
}

void LLMEngine::compile_structured_outputs(const SamplingParams& params) {
  if (params.structured_outputs.empty()) return;
  structured().compile(params.structured_outputs, "structured_outputs");
}

int64_t LLMEngine::add_request(std::vector<int32_t> prompt_token_ids, const SamplingParams& given) {
  MINIVLLM_CHECK(!exited_) << "the engine has exited";
  given.validate();
  truncate_prompt(prompt_token_ids, given.truncate_prompt_tokens, config_.max_model_length);
  check_prompt(prompt_token_ids);
  const SamplingParams params =
      resolve_logit_rules(given, source_.tokenizer.get(), source_.config.vocab_size, config_.eos_token_ids);
  MINIVLLM_CHECK(params.stop.empty() || source_.tokenizer) << "stop strings need a tokenizer, and the model has none";
  auto r = std::make_unique<Request>();
  std::vector<std::shared_ptr<Sequence>> seqs;
  const StructuredOutputs& so = params.structured_outputs;
  // Their bans could leave a grammar's row no token at all (its stop token held back by
  // min_tokens, say): refused together rather than failing mid-generation.
  if (!so.empty() && (params.min_tokens > 0 || !params.bad_words.empty())) {
    throw ConfigKeyError("", params.min_tokens > 0 ? "min_tokens" : "bad_words",
                         "cannot be combined with structured_outputs (its bans could leave the grammar no token)");
  }
  // allowed_token_ids is a mask of its own (engine/allowed_tokens.h): one mask a row, and no ban
  // that could leave it no token.
  const bool allowed = !params.allowed_token_ids.empty();
  if (allowed && (!so.empty() || params.min_tokens > 0 || !params.bad_words.empty())) {
    throw ConfigKeyError("", "allowed_token_ids",
                         std::string("cannot be combined with ") +
                             (!so.empty() ? "structured_outputs" : params.min_tokens > 0 ? "min_tokens" : "bad_words") +
                             " (both restrict the next token; together they could leave none)");
  }
  for (int i = 0; i < params.n; ++i) {
    SamplingParams p = params;
    if (params.seed) p.seed = choice_seed(*params.seed, i);
    seqs.push_back(std::make_shared<Sequence>(next_seq_id_++, prompt_token_ids, std::move(p), config_.block_size));
    // One grammar state per choice; a grammar that does not compile refuses the request here.
    if (!so.empty()) seqs.back()->constraint = structured().make_constraint(so, "structured_outputs");
    if (allowed) seqs.back()->constraint = make_allowed_tokens(params.allowed_token_ids, source_.config.vocab_size);
    r->choices.emplace_back(seqs.back(), source_.tokenizer.get(), config_.eos_token_ids);
  }
  seqs[0]->prompt_logprobs_top = params.prompt_logprobs;
  scheduler_->add(seqs[0]);  // throws when the sequence can never fit
  r->id = next_id_++;
  r->num_admitted = 1;
  r->num_unfinished = params.n;
  for (int i = 0; i < params.n; ++i) choice_of_seq_[seqs[i]->seq_id()] = {r.get(), i};
  const int64_t id = r->id;
  requests_[id] = std::move(r);
  return id;
}

int64_t LLMEngine::add_request(const std::string& prompt, const SamplingParams& params) {
  MINIVLLM_CHECK(source_.tokenizer) << "model '" << source_.path << "' has no tokenizer: pass token ids";
  return add_request(source_.tokenizer->encode(prompt, /*add_special_tokens=*/true), params);
}

std::string LLMEngine::apply_chat_template(const nlohmann::json& messages, bool add_generation_prompt,
                                           const nlohmann::json& template_vars) const {
  return apply_chat_template(messages, ChatRender{.add_generation_prompt = add_generation_prompt}, template_vars);
}

std::string LLMEngine::apply_chat_template(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                           const nlohmann::ordered_json& template_vars) const {
  return apply_chat_template(messages, ChatRender{.add_generation_prompt = add_generation_prompt}, template_vars);
}

std::string LLMEngine::apply_chat_template(const nlohmann::json& messages, const ChatRender& how,
                                           const nlohmann::json& template_vars) const {
  MINIVLLM_CHECK(messages.is_array() && !messages.empty()) << "a chat must be a non-empty JSON array of messages";
  nlohmann::json vars = template_vars.is_object() ? template_vars : nlohmann::json::object();
  add_special_token_vars(source_, vars);
  return source_.require_chat_template().render(messages, how, vars);
}

std::string LLMEngine::apply_chat_template(const nlohmann::ordered_json& messages, const ChatRender& how,
                                           const nlohmann::ordered_json& template_vars) const {
  MINIVLLM_CHECK(messages.is_array() && !messages.empty()) << "a chat must be a non-empty JSON array of messages";
  nlohmann::ordered_json vars = template_vars.is_object() ? template_vars : nlohmann::ordered_json::object();
  add_special_token_vars(source_, vars);
  return source_.require_chat_template().render(messages, how, vars);
}

int64_t LLMEngine::add_chat_request(const nlohmann::json& messages, const SamplingParams& params,
                                    const nlohmann::json& template_vars, const ChatRender& how) {
  MINIVLLM_CHECK(source_.tokenizer) << "model '" << source_.path << "' has no tokenizer";
  const std::string prompt = apply_chat_template(messages, how, template_vars);
  // The template writes the special tokens (bos included) itself.
  return add_request(source_.tokenizer->encode(prompt, /*add_special_tokens=*/false), params);
}

bool LLMEngine::is_finished() const { return scheduler_->is_finished(); }

bool LLMEngine::reset_prefix_cache() {
  if (!scheduler_->is_finished()) return false;
  drain();  // a step still in flight holds hashes of blocks it wrote
  return scheduler_->block_manager().reset_prefix_cache();
}

bool LLMEngine::abort(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  Request& r = *it->second;
  for (int i = 0; i < static_cast<int>(r.choices.size()); ++i) {
    const int64_t seq_id = r.choices[i].seq().seq_id();
    if (i < r.num_admitted) scheduler_->abort(seq_id);
    choice_of_seq_.erase(seq_id);
  }
  requests_.erase(it);
  return true;
}

// Hands out choice `index`'s delta, and its output when it finished (forgetting it then; the
// request goes with its last choice).
void LLMEngine::emit(Request& r, int index, StepResult& out, bool want_deltas) {
  ChoiceOutput& c = r.choices[index];
  const bool finished = c.seq().is_finished();
  if (!want_deltas && !finished) return;  // the text and tokens wait in the ChoiceOutput
  RequestDelta d;
  d.request_id = r.id;
  d.index = index;
  if (c.take_delta(d) && want_deltas) out.deltas.push_back(std::move(d));  // take_delta flushes the text
  if (!finished) return;
  RequestOutput o;
  o.request_id = r.id;
  o.index = index;
  c.fill_output(o);
  // Choice 0 computed them for every choice (the others reuse its prompt's blocks).
  if (c.seq().params().prompt_logprobs >= 0) o.prompt_logprobs = r.choices[0].seq().prompt_logprobs;
  o.embedding = std::move(c.seq().embedding);
  out.finished.push_back(std::move(o));
  choice_of_seq_.erase(c.seq().seq_id());
  if (--r.num_unfinished == 0) requests_.erase(r.id);  // r dies here
}

void LLMEngine::finish_with_error(Request& r, int index, const std::string& error, StepResult& out) {
  ChoiceOutput& c = r.choices[index];
  RequestOutput o;
  o.request_id = r.id;
  o.index = index;
  c.fill_output(o);
  o.finish_reason = finish_reason_name(FinishReason::kError);
  o.error = error;
  out.finished.push_back(std::move(o));
  choice_of_seq_.erase(c.seq().seq_id());
  if (--r.num_unfinished == 0) requests_.erase(r.id);  // r dies here
}

void LLMEngine::admit_other_choices(Request& r) {
  const int n = static_cast<int>(r.choices.size());
  for (int i = r.num_admitted; i < n; ++i) scheduler_->add(r.choices[i].shared_seq());
  r.num_admitted = n;
}

// The batch's sequences finish with the error; choices of theirs not yet admitted fail with them
// (their prompt never made it into the cache).
void LLMEngine::fail_batch(const ScheduledBatch& batch, const std::string& error, StepResult& out) {
  for (const std::shared_ptr<Sequence>& seq : scheduler_->fail(batch.seqs)) {
    auto it = choice_of_seq_.find(seq->seq_id());
    if (it == choice_of_seq_.end()) continue;
    auto [r, index] = it->second;
    const int n = static_cast<int>(r->choices.size());
    const int first_unadmitted = r->num_admitted;
    r->num_admitted = n;
    for (int i = first_unadmitted; i < n; ++i) {
      r->choices[i].seq().status = SequenceStatus::kFinished;
      r->choices[i].seq().finish_reason = FinishReason::kError;
    }
    const int remaining = r->num_unfinished;
    finish_with_error(*r, index, error, out);
    // r may be gone now: only when this was its last unfinished choice, so none is left to fail.
    for (int i = first_unadmitted; i < n && remaining > 1; ++i) finish_with_error(*r, i, error, out);
  }
}

void LLMEngine::note_prefill(const ScheduledBatch& batch) {
  for (const Sequence* s : batch.seqs) {
    if (!s->samples() || s->prefilled) continue;  // only the step that completes a prefill
    totals_.prefix_cache_queried_tokens += s->num_tokens();
    totals_.prefix_cache_hit_tokens += s->num_cached_tokens;
    auto it = choice_of_seq_.find(s->seq_id());
    if (it == choice_of_seq_.end()) continue;
    auto [r, index] = it->second;
    r->choices[index].note_prefill(s->num_cached_tokens);
    if (index == 0 && s->num_completion_tokens() == 0) totals_.prompt_tokens_total += s->num_prompt_tokens();
  }
}

StepResult LLMEngine::step() { return run_step(/*want_deltas=*/true); }

std::unique_ptr<LLMEngine::InFlight> LLMEngine::launch(ScheduledBatch batch, bool grammars_current) {
  auto step = std::make_unique<InFlight>();
  step->num_tokens = batch.is_prefill ? batch.num_tokens : -static_cast<int>(batch.seqs.size());
  step->overlappable = true;
  step->number = num_launched_++;
  for (Sequence* s : batch.seqs) {
    if (!s->samples()) continue;
    if (!s->prefilled) step->completed_prefill.push_back(s);
    // Penalties count, bad_words match, and grammars take the tokens before the next step's: they
    // must be on the host.
    const SamplingParams& p = s->params();
    // A grammar's next mask needs this step's token accepted first: with the masks deferred, the
    // next step is launched anyway and its masks wait for this one's resolution.
    if (p.has_penalties() || p.logprobs >= 0 || !p.bad_words_token_ids.empty() ||
        (s->constraint && !overlap_grammar_masks_)) {
      step->overlappable = false;
    }
  }
  try {
    StepInput in = [&] {
      HostScope t("engine.build_input");
      return build_step_input(batch.seqs, batch.is_prefill, runners_->runner().max_blocks_per_seq(),
                              /*draw_samples=*/true, /*defer_bitmask=*/overlap_grammar_masks_);
    }();
    for (int32_t i : in.prompt_logprob_seqs) step->prompt_logprob_seqs.push_back(batch.seqs[static_cast<size_t>(i)]);
    for (int32_t i : in.pool_seqs) step->pool_seqs.push_back(batch.seqs[static_cast<size_t>(i)]);
    if (in.defer_bitmask) {
      for (Sequence* s : batch.seqs) {
        if (s->samples()) step->mask_rows.push_back(s);
      }
    }
    {
      HostScope t("engine.launch");
      runners_->launch(in);
    }
    if (observer_) observer_(StepEvent::kLaunch, step->number);
    note_prefill(batch);  // reads which rows complete a prefill: before the scheduler advances them
    step->awaiting_masks = in.defer_bitmask;
    // The forward is in flight (on the CPU: done): the host fills the masks beside it.
    if (step->awaiting_masks && grammars_current) sample_with_masks(*step);
  } catch (const std::exception& e) {
    step->error = e.what();
  }
  step->batch = std::move(batch);
  return step;
}

void LLMEngine::sample_with_masks(InFlight& step) {
  step.awaiting_masks = false;
  int words = 0;
  std::vector<int32_t> mask;
  try {
    HostScope t("engine.fill_masks");
    mask = fill_token_bitmask(step.mask_rows, words);
  } catch (const std::exception& e) {
    step.mask_error = e.what();
  }
  if (mask.empty()) {  // failed: every row allowed (the step fails when collected)
    if (step.mask_error.empty()) step.mask_error = "a step launched for grammar masks has no grammar row";
    words = std::max(words, 1);
    mask.assign(step.mask_rows.size() * static_cast<size_t>(words), -1);
  }
  if (observer_) observer_(StepEvent::kFillMasks, step.number);
  try {
    runners_->sample_deferred(std::move(mask), words);
  } catch (const std::exception& e) {
    if (step.mask_error.empty()) step.mask_error = e.what();
  }
}

// One call resolves one step. Synchronously: schedule, launch, collect, resolve. With async
// scheduling, once the step is launched and advanced the next one is scheduled and launched too
// (the device runs it while the host collects and resolves this one, and the caller works), and
// stays in flight until the next call; a sequence that finishes here wastes its row there.
StepResult LLMEngine::run_step(bool want_deltas) {
  StepResult out;
  if (!inflight_) {
    if (scheduler_->is_finished()) return out;
    ScheduledBatch batch = scheduler_->schedule();
    if (batch.seqs.empty()) return out;
    inflight_ = launch(std::move(batch), /*grammars_current=*/true);
  }
  std::unique_ptr<InFlight> step = std::move(inflight_);
  if (step->error.empty()) {
    HostScope t("engine.advance");
    scheduler_->advance(step->batch);
  }
  if (async_scheduling_ && step->error.empty() && step->overlappable && !scheduler_->is_finished()) {
    ScheduledBatch next = [&] {
      HostScope t("engine.schedule");
      return scheduler_->schedule();
    }();
    // Its grammars have not taken this step's tokens yet: its masks wait for finish_step.
    if (!next.seqs.empty()) inflight_ = launch(std::move(next), /*grammars_current=*/false);
  }
  finish_step(*step, out, want_deltas);
  // The step launched on this one's tokens: its grammars have taken them now, and its forward has
  // run on the device meanwhile.
  if (inflight_ && inflight_->awaiting_masks) sample_with_masks(*inflight_);
  return out;
}

void LLMEngine::finish_step(InFlight& step, StepResult& out, bool want_deltas) {
  const ScheduledBatch& batch = step.batch;
  if (!step.error.empty()) {
    fail_batch(batch, step.error, out);
    return;
  }
  SampledTokens sampled;
  try {
    {
      HostScope t("engine.collect");
      sampled = runners_->collect();
    }
    if (observer_) observer_(StepEvent::kCollect, step.number);
    MINIVLLM_CHECK(step.mask_error.empty()) << "grammar masks: " << step.mask_error;
    MINIVLLM_CHECK_EQ(sampled.prompt_logprobs.size(), step.prompt_logprob_seqs.size())
        << "prompt logprobs returned by the step, against its rows";
    MINIVLLM_CHECK_EQ(sampled.pooled.size(), step.pool_seqs.size()) << "pooled rows returned by the step";
  } catch (const std::exception& e) {
    fail_batch(batch, e.what(), out);
    if (inflight_) {  // launched on this step's tokens: it fails with it
      std::unique_ptr<InFlight> next = std::move(inflight_);
      if (next->error.empty()) {
        try {
          if (next->awaiting_masks) sample_with_masks(*next);
          runners_->collect();
        } catch (const std::exception&) {
        }
      }
      fail_batch(next->batch, e.what(), out);
    }
    return;
  }
  out.num_tokens = step.num_tokens;
  HostScope resolve_scope("engine.resolve");
  for (size_t i = 0; i < sampled.prompt_logprobs.size(); ++i) {
    step.prompt_logprob_seqs[i]->prompt_logprobs.push_back(std::move(sampled.prompt_logprobs[i]));
  }
  for (size_t i = 0; i < sampled.pooled.size(); ++i) step.pool_seqs[i]->embedding = std::move(sampled.pooled[i]);
  std::unordered_map<const Sequence*, size_t> row;  // sampled row of each sequence, for its logprobs
  if (!sampled.logprobs.empty()) {
    size_t num_rows = 0;
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      if (batch.sampled[i]) row[batch.seqs[i]] = num_rows++;
    }
  }
  // The one finish decision is the scheduler's; the text side only reports stop strings.
  scheduler_->resolve(batch, sampled.token_ids, [&](Sequence& seq) {
    ++totals_.generation_tokens_total;
    auto it = choice_of_seq_.find(seq.seq_id());
    if (it == choice_of_seq_.end()) return false;
    auto [r, index] = it->second;
    const TokenLogprob* lp = nullptr;
    if (seq.params().logprobs >= 0 && !sampled.logprobs.empty()) {
      const size_t i = row.at(&seq);
      if (i < sampled.logprobs.size()) lp = &sampled.logprobs[i];
    }
    return r->choices[index].append(lp);
  });
  for (Sequence* s : step.completed_prefill) {  // choice 0's prompt blocks are in the cache now
    auto it = choice_of_seq_.find(s->seq_id());
    if (it == choice_of_seq_.end() || it->second.second != 0) continue;
    Request& r = *it->second.first;
    if (r.num_admitted < static_cast<int>(r.choices.size())) admit_other_choices(r);
  }
  for (Sequence* s : batch.seqs) {
    auto it = choice_of_seq_.find(s->seq_id());
    if (it == choice_of_seq_.end()) continue;  // aborted
    emit(*it->second.first, it->second.second, out, want_deltas);
  }
}

EngineStats LLMEngine::stats() const {
  EngineStats s = totals_;
  s.num_running = scheduler_->num_running();
  s.num_waiting = scheduler_->num_waiting();
  s.kv_blocks_total = scheduler_->block_manager().num_blocks();
  s.kv_blocks_free = scheduler_->block_manager().num_free_blocks();
  s.num_preemptions = scheduler_->num_preemptions();
  return s;
}

std::vector<RequestOutput> LLMEngine::run_to_completion(std::vector<RequestOutput> outputs,
                                                        const std::vector<int64_t>& ids, int choices) {
  const size_t n = static_cast<size_t>(choices);
  std::map<int64_t, size_t> first_slot;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0) first_slot[ids[i]] = i * n;
  }
  size_t pending = first_slot.size() * n;
  while (pending > 0 && !scheduler_->is_finished()) {
    for (RequestOutput& o : run_step(/*want_deltas=*/false).finished) {  // nobody reads the deltas here
      auto it = first_slot.find(o.request_id);
      if (it == first_slot.end() || o.index < 0 || o.index >= choices) continue;  // someone else's request
      outputs[it->second + static_cast<size_t>(o.index)] = std::move(o);
      --pending;
    }
  }
  return outputs;
}

std::vector<RequestOutput> LLMEngine::submit_all(size_t count, int choices,
                                                 const std::function<int64_t(size_t)>& add) {
  const size_t n = static_cast<size_t>(choices);
  std::vector<RequestOutput> outputs(count * n);
  std::vector<int64_t> ids(count, -1);
  for (size_t i = 0; i < count; ++i) {
    try {
      ids[i] = add(i);
    } catch (const Error& e) {
      for (size_t c = 0; c < n; ++c) {
        RequestOutput& o = outputs[i * n + c];
        o.index = static_cast<int>(c);
        o.finish_reason = "error";
        o.error = e.what();
      }
    }
  }
  return run_to_completion(std::move(outputs), ids, choices);
}

std::vector<RequestOutput> LLMEngine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                               const SamplingParams& params) {
  const int choices = std::max(params.n, 1);
  std::vector<RequestOutput> outputs =
      submit_all(prompts.size(), choices, [&](size_t i) { return add_request(prompts[i], params); });
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].prompt_token_ids.empty()) outputs[i].prompt_token_ids = prompts[i / static_cast<size_t>(choices)];
  }
  return outputs;
}

std::vector<RequestOutput> LLMEngine::generate(const std::vector<std::string>& prompts, const SamplingParams& params) {
  return submit_all(prompts.size(), std::max(params.n, 1), [&](size_t i) { return add_request(prompts[i], params); });
}

std::vector<RequestOutput> LLMEngine::chat(const std::vector<nlohmann::json>& conversations,
                                           const SamplingParams& params, const nlohmann::json& template_vars,
                                           const ChatRender& how) {
  return submit_all(conversations.size(), std::max(params.n, 1),
                    [&](size_t i) { return add_chat_request(conversations[i], params, template_vars, how); });
}

std::vector<float> LLMEngine::score(const std::vector<int32_t>& token_ids) {
  check_prompt(token_ids);
  MINIVLLM_CHECK(scheduler_->is_finished()) << "score runs only while no request is in flight";
  drain();
  SamplingParams p;
  p.temperature = 0;
  Sequence seq(-1, token_ids, p, config_.block_size);
  // Blocks come from the block manager like any request's, so the prefix cache stays consistent;
  // every position is computed (a prefix hit would only rewrite identical K/V), in chunks of at
  // most max_num_batched_tokens, each attending over the KV the chunks before it wrote.
  BlockManager& blocks = scheduler_->block_manager();
  MINIVLLM_CHECK(blocks.can_allocate(seq)) << "sequence of " << token_ids.size() << " tokens does not fit the KV cache";
  blocks.allocate(seq);
  seq.num_cached_tokens = 0;
  std::vector<float> logits;
  try {
    for (int begin = 0; begin < seq.num_tokens(); begin += config_.max_num_batched_tokens) {
      seq.num_computed_tokens = begin;
      seq.num_new_tokens = std::min(config_.max_num_batched_tokens, seq.num_tokens() - begin);
      std::vector<float> chunk = runners_->prefill_all_logits(
          build_step_input({&seq}, /*is_prefill=*/true, runners_->runner().max_blocks_per_seq(), /*draw_samples=*/false));
      logits.insert(logits.end(), chunk.begin(), chunk.end());
    }
  } catch (...) {
    blocks.deallocate(seq);
    throw;
  }
  blocks.deallocate(seq);
  return logits;
}

}  // namespace minivllm
