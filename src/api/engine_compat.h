// Adapter between the serving layer (AsyncEngine, the HTTP server) and the engine fields of issue 9
// that land in separate commits: SamplingParams::{n, logprobs, *_penalty}, RequestDelta::{index,
// logprobs}, RequestOutput::{index, logprobs, num_cached_tokens}, LLMEngine::stats(). Each helper
// uses the field when the engine has it and a neutral value when it does not yet, so the server
// builds and runs against either. Once every field exists the helpers are plain accessors and the
// `else` branches can go.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/llm_engine.h"

namespace minivllm {

// One generated token's logprob and its top alternatives (the engine's TokenLogprob, copied so the
// server's types do not depend on when that struct lands).
struct ChoiceLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

// The engine's counters, or what the serving layer can count itself while stats() is missing
// (-1 marks "unknown").
struct EngineCounters {
  int num_running = 0;
  int num_waiting = 0;
  int64_t kv_blocks_total = -1;
  int64_t kv_blocks_free = -1;
  int64_t prefix_cache_queried_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t num_preemptions = 0;
  bool from_engine = false;  // false: the engine has no stats() yet
};

namespace compat {

template <class T>
int choice_index(const T& x) {
  if constexpr (requires { x.index; }) {
    return x.index;
  } else {
    return 0;
  }
}

template <class T>
std::vector<ChoiceLogprob> logprobs_of(const T& x) {
  std::vector<ChoiceLogprob> out;
  if constexpr (requires { x.logprobs; }) {
    out.reserve(x.logprobs.size());
    for (const auto& e : x.logprobs) {
      ChoiceLogprob c;
      c.token_id = e.token_id;
      c.logprob = e.logprob;
      c.top.assign(e.top.begin(), e.top.end());
      out.push_back(std::move(c));
    }
  }
  return out;
}

template <class T>
int num_cached_tokens(const T& out) {
  if constexpr (requires { out.num_cached_tokens; }) {
    return out.num_cached_tokens;
  } else {
    return 0;
  }
}

template <class P>
int num_choices(const P& params) {
  if constexpr (requires { params.n; }) {
    return params.n;
  } else {
    return 1;
  }
}

// Sets a SamplingParams field the engine may not have yet; returns false when it does not (the
// caller then rejects a non-default value instead of ignoring it silently).
template <class P>
bool set_n(P& p, int n) {
  if constexpr (requires { p.n; }) {
    p.n = n;
    return true;
  } else {
    return n == 1;
  }
}
template <class P>
bool set_logprobs(P& p, int k) {
  if constexpr (requires { p.logprobs; }) {
    p.logprobs = k;
    return true;
  } else {
    return k < 0;
  }
}
template <class P>
bool set_penalties(P& p, float presence, float frequency, float repetition) {
  if constexpr (requires { p.presence_penalty; p.frequency_penalty; p.repetition_penalty; }) {
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    p.repetition_penalty = repetition;
    return true;
  } else {
    return presence == 0.0f && frequency == 0.0f && repetition == 1.0f;
  }
}

template <class E>
EngineCounters counters_of(const E& engine) {
  EngineCounters c;
  if constexpr (requires { engine.stats(); }) {
    const auto s = engine.stats();
    c.num_running = s.num_running;
    c.num_waiting = s.num_waiting;
    c.kv_blocks_total = s.kv_blocks_total;
    c.kv_blocks_free = s.kv_blocks_free;
    c.prefix_cache_queried_tokens = s.prefix_cache_queried_tokens;
    c.prefix_cache_hit_tokens = s.prefix_cache_hit_tokens;
    c.prompt_tokens_total = s.prompt_tokens_total;
    c.generation_tokens_total = s.generation_tokens_total;
    c.num_preemptions = s.num_preemptions;
    c.from_engine = true;
  } else {
    c.num_preemptions = engine.num_preemptions();
  }
  return c;
}

}  // namespace compat
}  // namespace minivllm
