#include "api/async_engine.h"

#include <sstream>

#include "common/check.h"

namespace minivllm {

using Clock = AsyncEngine::Clock;

// What the engine thread and every handle share. Handles keep it alive, so a handle that outlives
// the AsyncEngine (an HTTP thread finishing during shutdown) can still abort harmlessly.
struct RequestHandle::Core {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> commands;  // run on the engine thread, in order
  std::vector<int64_t> aborts;
  bool stopping = false;
  bool paused = false;  // pause_generation(): commands are still run, no step is taken

  // False once the engine thread has stopped taking work.
  bool push(std::function<void()> command) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) return false;
      commands.push_back(std::move(command));
    }
    cv.notify_one();
    return true;
  }
  void push_abort(int64_t id) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) return;
      aborts.push_back(id);
    }
    cv.notify_one();
  }
};

// One request as the engine thread follows it, for its stream and its latencies.
struct AsyncEngine::Tracked {
  std::shared_ptr<RequestStream> stream;
  Clock::time_point arrival;
  Clock::time_point deadline = AsyncEngine::kNoDeadline;
  std::vector<Clock::time_point> last_token_at;  // per choice
  std::vector<bool> got_first_token;             // per choice
};

// ---------------------------------------------------------------------------------------------
// RequestHandle

RequestHandle::RequestHandle(std::shared_ptr<Core> core, int64_t id, std::shared_ptr<RequestStream> stream,
                             std::vector<int32_t> prompt_token_ids)
    : core_(std::move(core)), id_(id), stream_(std::move(stream)), prompt_token_ids_(std::move(prompt_token_ids)) {}

RequestHandle::~RequestHandle() {
  if (!stream_->ended()) abort();
}

std::vector<StreamEvent> RequestHandle::next(std::chrono::milliseconds timeout) { return stream_->pop(timeout); }

void RequestHandle::abort() { core_->push_abort(id_); }

std::vector<RequestOutput> RequestHandle::wait() {
  outputs_.resize(num_choices());
  while (!finished()) {
    for (StreamEvent& e : next(std::chrono::milliseconds(1000))) {
      if (e.final && e.index >= 0 && e.index < num_choices()) outputs_[e.index] = std::move(*e.final);
    }
  }
  return outputs_;
}

// ---------------------------------------------------------------------------------------------
// AsyncEngine: construction and shutdown

AsyncEngine::AsyncEngine(EngineConfig config) : core_(std::make_shared<RequestHandle::Core>()) {
  std::promise<void> ready;
  std::future<void> built = ready.get_future();
  thread_ = std::thread(&AsyncEngine::run_engine_thread, this, std::move(config), std::move(ready));
  try {
    built.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

AsyncEngine::~AsyncEngine() { shutdown(); }

void AsyncEngine::pause_generation() {
  std::lock_guard<std::mutex> lock(core_->mutex);
  core_->paused = true;
}

void AsyncEngine::resume_generation() {
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    core_->paused = false;
  }
  core_->cv.notify_all();
}

void AsyncEngine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    core_->stopping = true;
  }
  core_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
  // Submissions that raced the shutdown: dropping their promises makes their submitters throw.
  std::lock_guard<std::mutex> lock(core_->mutex);
  core_->commands.clear();
  core_->aborts.clear();
}

void AsyncEngine::run_engine_thread(EngineConfig config, std::promise<void> ready) {
  try {
    engine_ = std::make_unique<LLMEngine>(std::move(config));
    config_ = engine_->config();
    model_config_ = engine_->model_config();
    generation_defaults_ = engine_->generation_defaults();
    tokenizer_ = engine_->tokenizer();
    publish_stats();
  } catch (...) {
    engine_.reset();
    ready.set_exception(std::current_exception());
    return;
  }
  ready.set_value();
  while (true) {
    process_commands();
    {
      std::unique_lock<std::mutex> lock(core_->mutex);
      if (core_->stopping) break;
      if (engine_->is_finished() || core_->paused) {
        core_->cv.wait(lock, [&] {
          return core_->stopping || !core_->commands.empty() || !core_->aborts.empty() ||
                 (!core_->paused && !engine_->is_finished());
        });
        continue;
      }
    }
    end_expired(Clock::now());
    step_once();
    check_alive();
  }
  for (auto& [id, t] : tracked_) t.stream->end_all("abort", "the server is shutting down");
  tracked_.clear();
  // The runner and its worker processes stop here, on the thread that stepped them. The object
  // itself (its tokenizer and chat template) lives as long as the AsyncEngine, so tokenizing in
  // other threads stays safe after a shutdown.
  engine_->exit();
}

void AsyncEngine::process_commands() {
  std::deque<std::function<void()>> commands;
  std::vector<int64_t> aborts;
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    commands.swap(core_->commands);
    aborts.swap(core_->aborts);
  }
  for (auto& c : commands) c();
  for (int64_t id : aborts) end_request(id, "abort", "");
  if (!commands.empty() || !aborts.empty()) publish_stats();
}

// ---------------------------------------------------------------------------------------------
// Submitting

std::vector<int32_t> AsyncEngine::tokenize_text(const std::string& prompt, bool add_special_tokens) const {
  MINIVLLM_CHECK(tokenizer_) << "model '" << config_.model << "' has no tokenizer: pass token ids";
  return tokenizer_->encode(prompt, add_special_tokens);
}

std::vector<int32_t> AsyncEngine::tokenize_chat(const nlohmann::json& messages, const nlohmann::json& template_vars,
                                                const ChatRender& how) const {
  MINIVLLM_CHECK(tokenizer_) << "model '" << config_.model << "' has no tokenizer";
  // apply_chat_template is const and the template immutable: safe beside the stepping thread.
  const std::string prompt = engine_->apply_chat_template(messages, how, template_vars);
  return tokenizer_->encode(prompt, /*add_special_tokens=*/false);  // the template wrote them
}

std::vector<int32_t> AsyncEngine::tokenize_chat(const nlohmann::ordered_json& messages,
                                                const nlohmann::ordered_json& template_vars,
                                                const ChatRender& how) const {
  MINIVLLM_CHECK(tokenizer_) << "model '" << config_.model << "' has no tokenizer";
  const std::string prompt = engine_->apply_chat_template(messages, how, template_vars);
  return tokenizer_->encode(prompt, /*add_special_tokens=*/false);  // the template wrote them
}

std::string AsyncEngine::chat_template_source() const {
  const ChatTemplate* t = engine_->chat_template();
  return t ? t->source() : "";
}

std::string AsyncEngine::detokenize(const std::vector<int32_t>& ids) const {
  MINIVLLM_CHECK(tokenizer_) << "model '" << config_.model << "' has no tokenizer";
  return tokenizer_->decode(ids, /*skip_special_tokens=*/true);
}

std::unique_ptr<RequestHandle> AsyncEngine::submit_text(const std::string& prompt, const SamplingParams& params) {
  return submit_tokens(tokenize_text(prompt), params);
}

std::unique_ptr<RequestHandle> AsyncEngine::submit_chat(const nlohmann::json& messages, const SamplingParams& params,
                                                        const nlohmann::json& template_vars) {
  return submit_tokens(tokenize_chat(messages, template_vars), params);
}

int64_t AsyncEngine::add_tracked(std::vector<int32_t> ids, const SamplingParams& params,
                                 std::shared_ptr<RequestStream> stream, Clock::time_point deadline) {
  MINIVLLM_CHECK(!dead_.load()) << "the engine died (" << death() << ") and takes no requests";
  refuse_when_full(stream->num_choices());
  const int64_t id = engine_->add_request(std::move(ids), params);
  Tracked& t = tracked_[id];
  t.arrival = Clock::now();
  t.deadline = deadline;
  t.last_token_at.assign(stream->num_choices(), t.arrival);
  t.got_first_token.assign(stream->num_choices(), false);
  t.stream = std::move(stream);
  return id;
}

std::unique_ptr<RequestHandle> AsyncEngine::submit_tokens(std::vector<int32_t> prompt_token_ids,
                                                          const SamplingParams& params, Clock::time_point deadline) {
  std::vector<std::vector<int32_t>> one;
  one.push_back(std::move(prompt_token_ids));
  return std::move(submit_tokens_batch(std::move(one), {params}, deadline).at(0));
}

std::vector<std::unique_ptr<RequestHandle>> AsyncEngine::submit_tokens_batch(std::vector<std::vector<int32_t>> prompts,
                                                                             const std::vector<SamplingParams>& params,
                                                                             Clock::time_point deadline) {
  MINIVLLM_CHECK_EQ(prompts.size(), params.size()) << "submit_tokens_batch: prompts and params";
  // A new schema compiles here, on the submitter's thread, not on the engine's between two steps.
  for (const SamplingParams& p : params) engine_->compile_structured_outputs(p);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const SamplingParams& p : params) streams.push_back(std::make_shared<RequestStream>(std::max(1, p.n)));
  auto added = std::make_shared<std::promise<std::vector<int64_t>>>();
  std::future<std::vector<int64_t>> ids_future = added->get_future();
  const bool queued = core_->push([this, prompts, params, streams, added, deadline]() mutable {
    std::vector<int64_t> ids;
    try {
      for (size_t i = 0; i < prompts.size(); ++i) {
        ids.push_back(add_tracked(std::move(prompts[i]), params[i], streams[i], deadline));
      }
    } catch (...) {
      for (int64_t id : ids) end_request(id, "abort", "");  // all or none: those added before go
      added->set_exception(std::current_exception());
      return;
    }
    {  // counted before the submitter returns (publish_stats comes after the whole batch of commands)
      std::lock_guard<std::mutex> lock(stats_mutex_);
      stats_.num_requests_in_flight = static_cast<int>(tracked_.size());
    }
    added->set_value(std::move(ids));
  });
  MINIVLLM_CHECK(queued) << "the engine has shut down";
  std::vector<int64_t> ids;
  try {
    ids = ids_future.get();
  } catch (const std::future_error&) {
    MINIVLLM_FAIL() << "the engine shut down before the request was added";
  }
  std::vector<std::unique_ptr<RequestHandle>> handles;
  for (size_t i = 0; i < ids.size(); ++i) {
    handles.push_back(std::unique_ptr<RequestHandle>(
        new RequestHandle(core_, ids[i], std::move(streams[i]), std::move(prompts[i]))));
  }
  return handles;
}

void AsyncEngine::abort(int64_t id) { core_->push_abort(id); }

void AsyncEngine::abort_all(const std::string& finish_reason, const std::string& error) {
  core_->push([this, finish_reason, error] {
    std::vector<int64_t> ids;
    for (const auto& [id, t] : tracked_) ids.push_back(id);
    for (int64_t id : ids) end_request(id, finish_reason, error);
  });
}

// Engine thread. The engine's own count (preempted sequences included) decides, so the bound holds
// for a burst of submits handled in one batch of commands too. An empty queue takes any request,
// so a request of more choices than the bound is not refused forever.
void AsyncEngine::refuse_when_full(int num_choices) {
  const int waiting = engine_->stats().num_waiting;
  if (waiting == 0 || waiting + num_choices <= config_.max_waiting_requests) return;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.num_requests_rejected;
  }
  std::ostringstream os;
  os << "the server is overloaded: " << waiting << " sequences wait to be scheduled and max_waiting_requests is "
     << config_.max_waiting_requests << "; retry later";
  throw QueueFullError(os.str());
}

// Engine thread, before each step: a request past its deadline ends with an error, and its blocks
// are freed before the step that would have used them.
void AsyncEngine::end_expired(Clock::time_point now) {
  std::vector<std::pair<int64_t, double>> expired;  // id, its timeout in seconds
  for (const auto& [id, t] : tracked_) {
    if (t.deadline <= now) expired.emplace_back(id, std::chrono::duration<double>(t.deadline - t.arrival).count());
  }
  for (const auto& [id, seconds] : expired) {
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      ++stats_.num_requests_timed_out;
    }
    std::ostringstream os;
    os.precision(3);
    os << "the request ran past its deadline (" << seconds << " s after it was queued) and was ended";
    end_request(id, "error", os.str());
  }
}

// ---------------------------------------------------------------------------------------------
// Stepping

void AsyncEngine::step_once() {
  StepResult result;
  try {
    result = engine_->step();
  } catch (const std::exception& e) {
    // LLMEngine::step isolates a failing batch itself; reaching here means the engine's own
    // bookkeeping threw, and which requests were in the batch is unknown: fail them all (with the
    // reason) and free their blocks, and keep serving new requests.
    std::vector<int64_t> ids;
    for (const auto& [id, t] : tracked_) ids.push_back(id);
    for (int64_t id : ids) end_request(id, "error", std::string("engine step failed: ") + e.what());
  }
  dispatch(result);
}

// Under the stats lock from start to end: whoever is woken by an event and then reads stats()
// sees the counters of the step that produced it.
void AsyncEngine::dispatch(StepResult& result) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.engine = engine_->stats();
  for (RequestDelta& d : result.deltas) {
    auto it = tracked_.find(d.request_id);
    if (it == tracked_.end()) continue;
    Tracked& t = it->second;
    const int index = d.index;
    if (index < 0 || index >= t.stream->num_choices()) continue;
    if (!d.token_ids.empty()) {
      const double since = std::chrono::duration<double>(now - t.last_token_at[index]).count();
      if (!t.got_first_token[index]) {
        stats_.time_to_first_token.observe(since);
        t.got_first_token[index] = true;
      } else {
        stats_.inter_token_latency.observe(since);
      }
      t.last_token_at[index] = now;
    }
    StreamEvent e;
    e.index = index;
    e.logprobs = std::move(d.logprobs);
    e.token_ids = std::move(d.token_ids);
    e.text = std::move(d.text);
    t.stream->push(std::move(e));
  }
  for (RequestOutput& o : result.finished) {
    auto it = tracked_.find(o.request_id);
    if (it == tracked_.end()) continue;
    Tracked& t = it->second;
    StreamEvent e;
    e.index = o.index;
    ++stats_.finished_by_reason[o.finish_reason];
    e.final = std::move(o);
    t.stream->push(std::move(e));
    if (t.stream->ended()) {
      stats_.e2e_request_latency.observe(std::chrono::duration<double>(now - t.arrival).count());
      tracked_.erase(it);
    }
  }
  stats_.num_requests_in_flight = static_cast<int>(tracked_.size());
}

void AsyncEngine::end_request(int64_t id, const std::string& finish_reason, const std::string& error) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) return;
  try {
    engine_->abort(id);  // frees its blocks (those of a running batch once the batch is done)
  } catch (const std::exception&) {
    // The request is gone from the engine either way; its stream still has to end.
  }
  std::lock_guard<std::mutex> lock(stats_mutex_);  // as in dispatch: counters before the event
  ++stats_.finished_by_reason[finish_reason];
  std::shared_ptr<RequestStream> stream = std::move(it->second.stream);
  tracked_.erase(it);
  stats_.num_requests_in_flight = static_cast<int>(tracked_.size());
  stats_.engine = engine_->stats();
  stream->end_all(finish_reason, error);
}

void AsyncEngine::publish_stats() {
  const EngineStats c = engine_->stats();
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.engine = c;
  stats_.num_requests_in_flight = static_cast<int>(tracked_.size());
}

// Engine thread, after each step. A dead group fails every step from now on, so rather than let
// each request fail its own step, all of them end now, with the cause, and none is taken again.
void AsyncEngine::check_alive() {
  if (dead_.load()) return;
  const std::string why = engine_->runners().death();
  if (why.empty()) return;
  std::vector<int64_t> ids;
  for (const auto& [id, t] : tracked_) ids.push_back(id);
  for (int64_t id : ids) end_request(id, "error", "the engine died: " + why);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    death_ = why;
  }
  dead_.store(true);
}

std::string AsyncEngine::death() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return death_;
}

ServingStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

}  // namespace minivllm
