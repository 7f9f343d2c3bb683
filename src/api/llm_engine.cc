#include "api/llm_engine.h"

#include <algorithm>
#include <set>

#include "common/check.h"

namespace minivllm {

// One request in flight: its sequence and, in text mode, its streaming detokenizer.
struct LLMEngine::Request {
  std::shared_ptr<Sequence> seq;
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::string text;      // completion text so far (stop strings cut off)
  size_t streamed = 0;   // bytes of `text` already handed out as deltas
  size_t tokens_seen = 0;
};

LLMEngine::LLMEngine(EngineConfig config) : config_(std::move(config)) {
  config_.validate();
  source_ = open_model(config_.model, /*with_weights=*/true);
  const ModelConfig& mc = source_.config;
  config_.max_model_length = static_cast<int>(std::min<int64_t>(config_.max_model_length, mc.max_position_embeddings));
  config_.max_num_batched_tokens = std::max(config_.max_num_batched_tokens, config_.max_model_length);
  runners_ = std::make_unique<RunnerGroup>(config_.runner_config(), mc, *source_.weights, source_.path);
  config_.num_kvcache_blocks = runners_->runner().num_kvcache_blocks();

  SchedulerConfig sc;
  sc.max_num_seqs = config_.max_num_seqs;
  sc.max_num_batched_tokens = config_.max_num_batched_tokens;
  sc.num_kvcache_blocks = config_.num_kvcache_blocks;
  sc.block_size = config_.block_size;
  sc.max_model_length = config_.max_model_length;
  if (config_.eos >= 0) {
    sc.eos_token_ids = {config_.eos};
  } else {
    std::set<int64_t> eos(mc.eos_token_ids.begin(), mc.eos_token_ids.end());
    if (source_.tokenizer && source_.tokenizer->eos_token_id() >= 0) eos.insert(source_.tokenizer->eos_token_id());
    sc.eos_token_ids.assign(eos.begin(), eos.end());
  }
  scheduler_ = std::make_unique<Scheduler>(sc);
}

LLMEngine::~LLMEngine() { exit(); }

void LLMEngine::exit() {
  if (exited_) return;
  exited_ = true;
  std::vector<int64_t> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  for (int64_t id : ids) abort(id);
  if (runners_) runners_->exit();
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

int64_t LLMEngine::add_request(std::vector<int32_t> prompt_token_ids, const SamplingParams& params) {
  MINIVLLM_CHECK(!exited_) << "the engine has exited";
  params.validate();
  MINIVLLM_CHECK(params.n == 1) << "n > 1 is not implemented yet";
  MINIVLLM_CHECK(params.logprobs < 0) << "logprobs are not implemented yet";
  MINIVLLM_CHECK(!params.has_penalties()) << "penalties are not implemented yet";
  check_prompt(prompt_token_ids);
  MINIVLLM_CHECK(params.stop.empty() || source_.tokenizer) << "stop strings need a tokenizer, and the model has none";
  const int64_t id = next_id_++;
  auto r = std::make_unique<Request>();
  r->seq = std::make_shared<Sequence>(id, std::move(prompt_token_ids), params, config_.block_size);
  if (source_.tokenizer) r->detok = std::make_unique<IncrementalDetokenizer>(*source_.tokenizer, /*skip_special=*/true);
  scheduler_->add(r->seq);  // throws when the sequence can never fit
  requests_[id] = std::move(r);
  return id;
}

int64_t LLMEngine::add_request(const std::string& prompt, const SamplingParams& params) {
  MINIVLLM_CHECK(source_.tokenizer) << "model '" << source_.path << "' has no tokenizer: pass token ids";
  return add_request(source_.tokenizer->encode(prompt, /*add_special_tokens=*/true), params);
}

std::string LLMEngine::apply_chat_template(const nlohmann::json& messages, bool add_generation_prompt,
                                           const nlohmann::json& template_vars) const {
  MINIVLLM_CHECK(messages.is_array() && !messages.empty()) << "a chat must be a non-empty JSON array of messages";
  nlohmann::json vars = template_vars.is_object() ? template_vars : nlohmann::json::object();
  add_special_token_vars(source_, vars);
  return source_.require_chat_template().render(messages, add_generation_prompt, vars);
}

int64_t LLMEngine::add_chat_request(const nlohmann::json& messages, const SamplingParams& params,
                                    const nlohmann::json& template_vars) {
  MINIVLLM_CHECK(source_.tokenizer) << "model '" << source_.path << "' has no tokenizer";
  const std::string prompt = apply_chat_template(messages, true, template_vars);
  // The template writes the special tokens (bos included) itself.
  return add_request(source_.tokenizer->encode(prompt, /*add_special_tokens=*/false), params);
}

bool LLMEngine::is_finished() const { return scheduler_->is_finished(); }

bool LLMEngine::abort(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  scheduler_->abort(request_id);
  requests_.erase(it);
  return true;
}

// Appends the new tokens' text, cuts at the first stop string (which is not returned), and hands
// out what can no longer be part of a stop string.
void LLMEngine::update_text(Request& r, StepResult& out) {
  const auto& toks = r.seq->token_ids();
  RequestDelta d;
  d.request_id = r.seq->seq_id();
  const size_t begin = r.seq->num_prompt_tokens() + r.tokens_seen;
  bool stopped = false;
  const auto& stops = r.seq->params().stop;
  for (size_t i = begin; i < toks.size() && !stopped; ++i) {
    d.token_ids.push_back(toks[i]);
    if (!r.detok) continue;
    const size_t search_from = r.text.size();
    r.text += r.detok->push(toks[i]);
    for (const std::string& s : stops) {
      if (s.empty()) continue;
      const size_t from = search_from >= s.size() ? search_from - s.size() + 1 : 0;
      const size_t pos = r.text.find(s, from);
      if (pos != std::string::npos) {
        r.text.resize(pos);
        stopped = true;
        break;
      }
    }
  }
  r.tokens_seen = toks.size() - r.seq->num_prompt_tokens();
  if (stopped && !r.seq->is_finished()) scheduler_->finish(r.seq.get(), FinishReason::kStop);
  if (r.detok && r.seq->is_finished() && !stopped) r.text += r.detok->flush();
  size_t hold = 0;
  if (!r.seq->is_finished()) {
    for (const std::string& s : stops) hold = std::max(hold, s.empty() ? 0 : s.size() - 1);
  }
  const size_t ready = r.text.size() > hold ? r.text.size() - hold : 0;
  if (ready > r.streamed) {
    d.text = r.text.substr(r.streamed, ready - r.streamed);
    r.streamed = ready;
  }
  if (!d.token_ids.empty() || !d.text.empty()) out.deltas.push_back(std::move(d));
}

RequestOutput LLMEngine::make_output(const Request& r) const {
  RequestOutput o;
  o.request_id = r.seq->seq_id();
  const auto& toks = r.seq->token_ids();
  o.prompt_token_ids.assign(toks.begin(), toks.begin() + r.seq->num_prompt_tokens());
  o.token_ids = r.seq->completion_token_ids();
  o.text = r.text;
  o.finish_reason = finish_reason_name(r.seq->finish_reason);
  return o;
}

StepResult LLMEngine::step() {
  StepResult out;
  if (scheduler_->is_finished()) return out;
  ScheduledBatch batch = scheduler_->schedule();
  if (batch.seqs.empty()) return out;
  const std::vector<int32_t> tokens =
      runners_->run(build_step_input(batch.seqs, batch.is_prefill, runners_->runner().max_blocks_per_seq()));
  if (batch.is_prefill) {
    for (const Sequence* s : batch.seqs) {
      out.num_tokens += s->num_tokens() - s->num_cached_tokens;
      totals_.prefix_cache_queried_tokens += s->num_tokens();
      totals_.prefix_cache_hit_tokens += s->num_cached_tokens;
      if (s->num_completion_tokens() == 0) totals_.prompt_tokens_total += s->num_prompt_tokens();
    }
  } else {
    out.num_tokens = -static_cast<int>(batch.seqs.size());
  }
  scheduler_->postprocess(batch.seqs, tokens);
  totals_.generation_tokens_total += static_cast<int64_t>(tokens.size());
  for (Sequence* s : batch.seqs) {
    auto it = requests_.find(s->seq_id());
    if (it == requests_.end()) continue;
    Request& r = *it->second;
    update_text(r, out);
    if (r.seq->is_finished()) {
      out.finished.push_back(make_output(r));
      requests_.erase(it);
    }
  }
  return out;
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
                                                        const std::vector<int64_t>& ids) {
  std::map<int64_t, size_t> slot;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0) slot[ids[i]] = i;
  }
  size_t pending = slot.size();
  while (pending > 0 && !scheduler_->is_finished()) {
    for (RequestOutput& o : step().finished) {
      auto it = slot.find(o.request_id);
      if (it == slot.end()) continue;  // someone else's request
      outputs[it->second] = std::move(o);
      --pending;
    }
  }
  return outputs;
}

std::vector<RequestOutput> LLMEngine::submit_all(size_t n, const std::function<int64_t(size_t)>& add) {
  std::vector<RequestOutput> outputs(n);
  std::vector<int64_t> ids(n, -1);
  for (size_t i = 0; i < n; ++i) {
    try {
      ids[i] = add(i);
    } catch (const Error& e) {
      outputs[i].finish_reason = "error";
      outputs[i].error = e.what();
    }
  }
  return run_to_completion(std::move(outputs), ids);
}

std::vector<RequestOutput> LLMEngine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                               const SamplingParams& params) {
  std::vector<RequestOutput> outputs = submit_all(prompts.size(), [&](size_t i) { return add_request(prompts[i], params); });
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (outputs[i].prompt_token_ids.empty()) outputs[i].prompt_token_ids = prompts[i];
  }
  return outputs;
}

std::vector<RequestOutput> LLMEngine::generate(const std::vector<std::string>& prompts, const SamplingParams& params) {
  return submit_all(prompts.size(), [&](size_t i) { return add_request(prompts[i], params); });
}

std::vector<RequestOutput> LLMEngine::chat(const std::vector<nlohmann::json>& conversations,
                                           const SamplingParams& params, const nlohmann::json& template_vars) {
  return submit_all(conversations.size(),
                    [&](size_t i) { return add_chat_request(conversations[i], params, template_vars); });
}

std::vector<float> LLMEngine::score(const std::vector<int32_t>& token_ids) {
  check_prompt(token_ids);
  MINIVLLM_CHECK(static_cast<int>(token_ids.size()) <= config_.max_num_batched_tokens)
      << "score takes at most max_num_batched_tokens tokens";
  MINIVLLM_CHECK(scheduler_->is_finished()) << "score runs only while no request is in flight";
  SamplingParams p;
  p.temperature = 0;
  Sequence seq(-1, token_ids, p, config_.block_size);
  // Blocks come from the block manager like any request's, so the prefix cache stays consistent;
  // every position is computed (a prefix hit would only rewrite identical K/V).
  BlockManager& blocks = scheduler_->block_manager();
  MINIVLLM_CHECK(blocks.can_allocate(seq)) << "sequence of " << token_ids.size() << " tokens does not fit the KV cache";
  blocks.allocate(seq);
  seq.num_cached_tokens = 0;
  std::vector<float> logits;
  try {
    logits = runners_->prefill_all_logits(
        build_step_input({&seq}, /*is_prefill=*/true, runners_->runner().max_blocks_per_seq(), /*draw_samples=*/false));
  } catch (...) {
    blocks.deallocate(seq);
    throw;
  }
  blocks.deallocate(seq);
  return logits;
}

}  // namespace minivllm
