#include "server/generation.h"

#include <memory>
#include <vector>

#include "common/config_key.h"
#include "server/api_error.h"
#include "server/openai_response.h"
#include "server/reasoning/qwen3_reasoning.h"
#include "tokenizer/tokenizer.h"

namespace minivllm::server {

using nlohmann::json;

namespace {

// Every request of one HTTP call: one per prompt, each with n choices.
struct Submitted {
  ResponseHeader header;
  std::vector<std::unique_ptr<RequestHandle>> handles;
  std::vector<std::string> echo_texts;  // per prompt, when echo
  int n = 1;
  bool include_usage = false;
  int logprobs = -1;
  int prompt_logprobs = -1;  // vLLM's field, as asked
  TokenNamer name_token;
  ReplyParsing parsing;  // chat: how each choice's text is split (reasoning, tool calls)
};

const char* prompt_param(const GenerationRequest& req) { return req.chat ? "messages" : "prompt"; }

std::vector<int32_t> prompt_ids(const ServingContext& ctx, const GenerationRequest& req, const PromptInput* p) {
  if (!req.chat) return prompt_input_ids(ctx, *p, "prompt");
  std::vector<int32_t> ids;
  try {
    if (!req.tools.tools_in_order.is_null()) {  // the template shows the tools to the model, as written
      nlohmann::ordered_json vars = nlohmann::ordered_json::parse(req.chat_template_kwargs.dump());
      vars["tools"] = req.tools.tools_in_order;
      ids = ctx.engine.tokenize_chat(nlohmann::ordered_json::parse(req.messages.dump()), vars, req.render);
    } else {
      nlohmann::json vars = req.chat_template_kwargs;
      if (!req.tools.tools.is_null()) vars["tools"] = req.tools.tools;
      ids = ctx.engine.tokenize_chat(req.messages, vars, req.render);
    }
  } catch (const ApiError&) {
    throw;
  } catch (const std::exception& e) {
    throw bad_param("messages", public_message(e));
  }
  check_prompt_ids(ctx, ids, "messages");
  return ids;
}

// Whether a chat prompt ends inside a think block its template opened (the reply then starts
// with thoughts): the text of its last few tokens.
bool chat_prompt_opens_think(const ServingContext& ctx, const GenerationRequest& req, const std::vector<int32_t>& ids) {
  if (!req.chat || !ctx.reasoning_parser || ctx.engine.tokenizer() == nullptr) return false;
  constexpr size_t kTail = 12;  // "<seed:think>" and the newlines after it, in any tokenizer's pieces
  const size_t from = ids.size() > kTail ? ids.size() - kTail : 0;
  // Special tokens kept: a tokenizer may mark <think> special.
  return prompt_opens_think(
      ctx.engine.tokenizer()->decode(std::vector<int32_t>(ids.begin() + from, ids.end()), /*skip_special_tokens=*/false),
      ctx.think_tags);
}

// Parameters checked against the prompt: the default and the limit of max_tokens.
SamplingParams params_for(const ServingContext& ctx, const GenerationRequest& req, size_t num_prompt_tokens,
                          bool thinking_open) {
  SamplingParams p = req.params;
  // A harmony reply's channels and calls are marked by special tokens: the parser needs them.
  if (req.chat && ctx.harmony) p.skip_special_tokens = false;
  // A thinking model may think before a constrained reply (a forced tool call, response_format):
  // vLLM applies the grammar once reasoning ends; here the grammar allows one think block first,
  // or, when the prompt opened it, the rest of that block.
  if (req.chat && ctx.harmony && req.tools.forces_calls()) {
    // Not the calls' JSON of other models: a commentary message to the function (analysis first).
    p.structured_outputs = StructuredOutputs{};
    for (auto& [name, parameters] : forced_tool_functions(req.tools)) {
      p.structured_outputs.harmony_calls.push_back({std::move(name), std::move(parameters)});
    }
  } else if (req.chat && ctx.harmony && !p.structured_outputs.empty()) {
    p.structured_outputs.harmony_first = true;  // the grammar is the final message's; analysis may come first
  } else if (req.chat && ctx.reasoning_parser && ctx.think_tags == ThinkTags{} && !p.structured_outputs.empty()) {
    // (The grammar's think block spells <think>; Seed-OSS's constrained replies are the grammar's alone.)
    if (thinking_open) {
      p.structured_outputs.think_open = true;
    } else if (ctx.model_thinks && qwen3_thinking_enabled(req.chat_template_kwargs)) {
      p.structured_outputs.think_first = true;
    }
  }
  const int room = ctx.engine.config().max_model_length - static_cast<int>(num_prompt_tokens);
  if (!req.max_tokens) {
    // chat without a limit: up to the context length, as OpenAI, or the model's max_new_tokens
    p.max_tokens = std::min(room, req.default_max_tokens.value_or(room));
  } else if (*req.max_tokens > room) {
    throw bad_param("max_tokens",
                    "the prompt has " + std::to_string(num_prompt_tokens) + " tokens and max_tokens is " +
                        std::to_string(*req.max_tokens) + ", together more than max_model_len " +
                        std::to_string(ctx.engine.config().max_model_length));
  }
  return p;
}

}  // namespace

void check_reasoning_effort(const ServingContext& ctx, const GenerationRequest& req, const char* param) {
  if (!req.reasoning_effort.empty() && !ctx.template_reasoning_effort) {
    throw bad_param(param, "not supported: this model's chat template has no reasoning-effort control");
  }
}

namespace {

ReplyParsing reply_parsing(const ServingContext& ctx, const GenerationRequest& req) {
  ReplyParsing p;
  if (!req.chat) return p;
  check_reasoning_effort(ctx, req, "reasoning_effort");
  p.reasoning = ctx.reasoning_parser;
  p.think_tags = ctx.think_tags;
  p.harmony = ctx.harmony;
  p.choice = req.tools.choice;
  p.syntax = ctx.tool_parser;
  p.named_function = req.tools.named_function;
  p.tools = req.tools.tools;
  p.parallel = req.tools.parallel;
  if (p.choice == ToolChoice::kAuto && !p.syntax) {
    throw bad_param("tool_choice", "\"auto\" needs a tool-call parser, and this server runs with "
                                   "--tool-call-parser none; use \"required\", a named function or \"none\"");
  }
  return p;
}

Submitted submit(const ServingContext& ctx, const GenerationRequest& req, AsyncEngine::Clock::time_point deadline) {
  if (!req.model.empty() && req.model != ctx.model_name) {
    throw ApiError(404, "The model `" + req.model + "` does not exist; this server serves `" + ctx.model_name + "`",
                   "model");
  }
  Submitted s;
  s.header = make_header(req.chat, ctx.model_name);
  s.n = req.n;
  s.include_usage = req.include_usage;
  s.logprobs = req.logprobs;
  s.prompt_logprobs = req.prompt_logprobs;
  s.name_token = TokenNamer{ctx.engine.tokenizer(), req.tokens_as_ids};
  s.parsing = reply_parsing(ctx, req);
  const size_t num_prompts = req.chat ? 1 : req.prompts.size();
  // Tokenize and check every prompt before submitting any, so a bad one costs the others nothing.
  std::vector<std::vector<int32_t>> ids(num_prompts);
  std::vector<SamplingParams> params(num_prompts);
  for (size_t i = 0; i < num_prompts; ++i) {
    ids[i] = prompt_ids(ctx, req, req.chat ? nullptr : &req.prompts[i]);
    truncate_prompt(ids[i], req.params.truncate_prompt_tokens, ctx.engine.config().max_model_length);
    const bool thinking_open = chat_prompt_opens_think(ctx, req, ids[i]);
    if (thinking_open) s.parsing.thinking_open = true;  // chat: one prompt
    params[i] = params_for(ctx, req, ids[i].size(), thinking_open);
    if (req.echo) {
      const PromptInput& p = req.prompts[i];
      s.echo_texts.push_back(p.is_text ? p.text : ctx.engine.detokenize(p.token_ids));
    }
  }
  // All of them between the same two steps, so they are scheduled together (all or none).
  try {
    s.handles = ctx.engine.submit_tokens_batch(std::move(ids), params, deadline);
  } catch (const QueueFullError& e) {
    throw ApiError(503, public_message(e)).with_retry_after(kRetryAfterS);
  } catch (const ConfigKeyError& e) {  // a sampling key the model refuses (a logit_bias id past its vocabulary)
    if (req.tools.forces_calls() && e.key() == "structured_outputs") {  // the grammar made from the tools
      throw bad_param("tools", "the functions' parameters " + e.problem());
    }
    throw bad_param(e.key(), e.problem());
  } catch (const std::exception& e) {
    if (ctx.stopping.load()) throw ApiError(503, "the server is shutting down");
    throw ApiError(400, public_message(e), prompt_param(req));
  }
  return s;
}

// Events of any of the handles: what is there now, else waits up to `timeout` on one of them.
std::vector<std::pair<size_t, StreamEvent>> collect(Submitted& s, std::chrono::milliseconds timeout) {
  std::vector<std::pair<size_t, StreamEvent>> out;
  size_t first_open = s.handles.size();
  for (size_t i = 0; i < s.handles.size(); ++i) {
    if (s.handles[i]->finished()) continue;
    if (first_open == s.handles.size()) first_open = i;
    for (StreamEvent& e : s.handles[i]->next(std::chrono::milliseconds(0))) out.emplace_back(i, std::move(e));
  }
  if (out.empty() && first_open < s.handles.size()) {
    for (StreamEvent& e : s.handles[first_open]->next(timeout)) out.emplace_back(first_open, std::move(e));
  }
  return out;
}

bool all_finished(const Submitted& s) {
  for (const auto& h : s.handles) {
    if (!h->finished()) return false;
  }
  return true;
}

json usage_of(const Submitted& s, const std::vector<std::vector<RequestOutput>>& outputs) {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (size_t i = 0; i < s.handles.size(); ++i) {
    prompt += static_cast<int64_t>(s.handles[i]->prompt_token_ids().size());
    if (!outputs[i].empty()) cached += outputs[i][0].num_cached_tokens;
    for (const RequestOutput& o : outputs[i]) completion += static_cast<int64_t>(o.token_ids.size());
  }
  return usage_json(prompt, completion, cached);
}

// ---------------------------------------------------------------------------------------------
// A whole response

void respond_whole(const ServingContext& ctx, Submitted& s, ClientWatch& client, httplib::Response& res) {
  std::vector<std::vector<RequestOutput>> outputs(s.handles.size());
  std::vector<std::vector<std::vector<TokenLogprob>>> logprobs(s.handles.size());
  for (size_t i = 0; i < s.handles.size(); ++i) {
    outputs[i].resize(s.n);
    logprobs[i].resize(s.n);
  }
  const auto start = std::chrono::steady_clock::now();
  while (!all_finished(s)) {
    if (ctx.stopping.load()) throw ApiError(503, "the server is shutting down");
    // A short request never looks; a long one checks every poll whether anyone still waits for it.
    // Returning drops the handles, which aborts the requests and frees their blocks.
    if (std::chrono::steady_clock::now() - start >= kKeepAliveInterval && client.gone()) {
      res.status = 499;  // nginx's "client closed request": nobody reads it
      return;
    }
    for (auto& [i, e] : collect(s, kPollInterval)) {
      if (e.index < 0 || e.index >= s.n) continue;
      auto& lps = logprobs[i][e.index];
      lps.insert(lps.end(), e.logprobs.begin(), e.logprobs.end());
      if (e.final) outputs[i][e.index] = std::move(*e.final);
    }
  }
  json choices = json::array();
  for (size_t i = 0; i < s.handles.size(); ++i) {
    for (int c = 0; c < s.n; ++c) {
      const RequestOutput& o = outputs[i][c];
      if (o.finish_reason == "error") throw ApiError(500, "generation failed: " + o.error);
      json lp = nullptr;
      const int index = static_cast<int>(i) * s.n + c;
      if (s.header.chat) {
        if (s.logprobs >= 0) lp = chat_logprobs(s.name_token, logprobs[i][c]);
        if (s.parsing.active()) {
          auto parser = s.parsing.make();
          ReplyDelta reply = parser->feed(o.text);
          reply.append(parser->finish());
          const std::string reason = finish_reason_with_calls(o.finish_reason, parser->num_calls());
          choices.push_back(chat_choice(index, reply, s.parsing.reasoning, reason, std::move(lp)));
        } else {
          choices.push_back(chat_choice(index, o.text, o.finish_reason, std::move(lp)));
        }
      } else {
        const std::string echo = s.echo_texts.empty() ? "" : s.echo_texts[i];
        size_t offset = echo.size();
        if (s.logprobs >= 0) {
          lp = completion_logprobs(s.name_token, logprobs[i][c], offset);
          if (!s.echo_texts.empty()) {  // the prompt's tokens first
            json all = completion_prompt_logprobs(s.name_token, s.handles[i]->prompt_token_ids(), o.prompt_logprobs,
                                                  s.logprobs);
            append_completion_logprobs(all, lp);
            lp = std::move(all);
          }
        }
        choices.push_back(completion_choice(index, std::string(echo).append(o.text), o.finish_reason, std::move(lp)));
        if (s.prompt_logprobs >= 0) {
          choices.back()["prompt_logprobs"] = vllm_prompt_logprobs(s.name_token, o.prompt_logprobs, s.prompt_logprobs);
        }
      }
    }
  }
  json body = full_response(s.header, std::move(choices), usage_of(s, outputs));
  if (s.header.chat && s.prompt_logprobs >= 0) {  // vLLM's: beside the choices, for the one prompt
    body["prompt_logprobs"] = vllm_prompt_logprobs(s.name_token, outputs[0][0].prompt_logprobs, s.prompt_logprobs);
  }
  res.status = 200;
  res.set_content(dump_body(std::move(body)), "application/json");
}

// ---------------------------------------------------------------------------------------------
// A stream of server-sent events

// What the stream knows per choice between calls of the content provider.
struct StreamState {
  Submitted s;
  std::shared_ptr<ActiveCall> active;  // released with the state, once httplib drops the stream
  std::vector<std::vector<bool>> started;        // a first chunk was sent (chat: with the role)
  std::vector<std::vector<size_t>> text_offset;  // completions' logprobs text_offset
  std::vector<std::vector<RequestOutput>> outputs;
  std::vector<std::vector<std::unique_ptr<ChatReplyParser>>> parsers;  // chat with parsing: per choice
  SseRewriter rewrite;  // none: the events go out as written
  bool done = false;
};

// One event's chunks for a chat choice whose reply is parsed: the piece of reasoning, content or
// calls the text completed, then (at the end) the finish reason.
std::string parsed_chunks(StreamState& st, size_t i, StreamEvent& e, std::string text, bool first, json lp) {
  const Submitted& s = st.s;
  const int index = static_cast<int>(i) * s.n + e.index;
  ChatReplyParser& parser = *st.parsers[i][e.index];
  ReplyDelta piece = parser.feed(text);
  if (e.final) piece.append(parser.finish());
  std::string out;
  if (!piece.empty() || !e.logprobs.empty() || first) {
    json choices = json::array({chunk_choice(index, piece, "", std::move(lp), first)});
    out += sse_event(chunk(s.header, std::move(choices), nullptr, s.include_usage));
    st.started[i][e.index] = true;
  }
  if (e.final) {
    const std::string reason = finish_reason_with_calls(e.final->finish_reason, parser.num_calls());
    json choices = json::array({chunk_choice(index, ReplyDelta{}, reason, nullptr, false)});
    out += sse_event(chunk(s.header, std::move(choices), nullptr, s.include_usage));
    st.outputs[i][e.index] = std::move(*e.final);
  }
  return out;
}

// Chunks for the events that arrived; false when the client is gone.
bool write_events(const ServingContext& ctx, StreamState& st, std::vector<std::pair<size_t, StreamEvent>>& events,
                  httplib::DataSink& sink) {
  const Submitted& s = st.s;
  std::string out;
  for (auto& [i, e] : events) {
    if (e.index < 0 || e.index >= s.n) continue;
    const int index = static_cast<int>(i) * s.n + e.index;
    if (e.final && e.final->finish_reason == "error") {
      out += sse_event(error_json(500, "generation failed: " + e.final->error));
      out += kSseDone;
      st.done = true;
      break;
    }
    std::string text = std::move(e.text);
    bool first = !st.started[i][e.index];
    if (first && !s.echo_texts.empty()) text = std::string(s.echo_texts[i]).append(text);
    if (!st.parsers.empty()) {
      json lp = s.logprobs >= 0 ? chat_logprobs(s.name_token, e.logprobs) : json(nullptr);
      out += parsed_chunks(st, i, e, std::move(text), first, std::move(lp));
      continue;
    }
    if (!text.empty() || !e.logprobs.empty() || first) {
      json lp = nullptr;
      if (s.logprobs >= 0) {
        lp = s.header.chat ? chat_logprobs(s.name_token, e.logprobs)
                           : completion_logprobs(s.name_token, e.logprobs, st.text_offset[i][e.index]);
      }
      json choices = json::array({chunk_choice(s.header, index, text, "", std::move(lp), first)});
      out += sse_event(chunk(s.header, std::move(choices), nullptr, s.include_usage));
      st.started[i][e.index] = true;
      first = false;
    }
    if (e.final) {
      json choices = json::array({chunk_choice(s.header, index, "", e.final->finish_reason, nullptr, false)});
      out += sse_event(chunk(s.header, std::move(choices), nullptr, s.include_usage));
      st.outputs[i][e.index] = std::move(*e.final);
    }
  }
  if (!st.done && all_finished(st.s)) {
    if (s.include_usage) out += sse_event(chunk(s.header, json::array(), usage_of(s, st.outputs), true));
    out += kSseDone;
    st.done = true;
  }
  if (st.rewrite && !out.empty()) {
    try {  // (on httplib's thread: an exception here would end the process)
      out = st.rewrite(out);
    } catch (const std::exception& e) {
      out = sse_event(error_json(500, std::string("the stream could not be written: ") + e.what()));
      st.done = true;
    }
  }
  return out.empty() || sink.write(out.data(), out.size());
}

void respond_stream(const ServingContext& ctx, Submitted s, std::shared_ptr<ActiveCall> active, SseRewriter rewrite,
                    httplib::Response& res) {
  auto st = std::make_shared<StreamState>();
  st->s = std::move(s);
  st->active = std::move(active);
  st->rewrite = std::move(rewrite);
  const size_t num = st->s.handles.size();
  const size_t n = static_cast<size_t>(st->s.n);
  st->started.assign(num, std::vector<bool>(n, false));
  st->text_offset.assign(num, std::vector<size_t>(n, 0));
  st->outputs.assign(num, std::vector<RequestOutput>(n));
  if (st->s.parsing.active()) {
    st->parsers.resize(num);
    for (auto& row : st->parsers) {
      for (size_t c = 0; c < n; ++c) row.push_back(st->s.parsing.make(/*streaming=*/true));
    }
  }
  for (size_t i = 0; i < st->s.echo_texts.size(); ++i) {
    for (size_t c = 0; c < n; ++c) st->text_offset[i][c] = st->s.echo_texts[i].size();
  }
  res.set_header("Cache-Control", "no-cache");
  // The provider runs on this connection's thread until it calls done() or returns false; the
  // handles live in its closure, so when httplib drops it (a client gone) they abort their requests.
  res.set_chunked_content_provider("text/event-stream", [&ctx = ctx, st](size_t, httplib::DataSink& sink) {
    auto quiet_since = std::chrono::steady_clock::now();
    while (!st->done) {
      if (ctx.stopping.load()) return false;
      auto events = collect(st->s, kPollInterval);
      if (!events.empty() || all_finished(st->s)) {
        if (!write_events(ctx, *st, events, sink)) return false;
        quiet_since = std::chrono::steady_clock::now();
        if (!st->done) return true;  // back to httplib between writes
      } else if (std::chrono::steady_clock::now() - quiet_since >= kKeepAliveInterval) {
        static const std::string kComment = ": keep-alive\n\n";
        if (!sink.write(kComment.data(), kComment.size())) return false;
        quiet_since = std::chrono::steady_clock::now();
      }
    }
    sink.done();
    return true;
  });
}

}  // namespace

std::vector<int32_t> prompt_input_ids(const ServingContext& ctx, const PromptInput& p, const char* param) {
  std::vector<int32_t> ids;
  try {
    ids = p.is_text ? ctx.engine.tokenize_text(p.text) : p.token_ids;
  } catch (const ApiError&) {
    throw;
  } catch (const std::exception& e) {
    throw bad_param(param, public_message(e));
  }
  check_prompt_ids(ctx, ids, param);
  return ids;
}

void check_prompt_ids(const ServingContext& ctx, const std::vector<int32_t>& ids, const char* param) {
  const int64_t vocab = ctx.engine.model_config().vocab_size;
  for (int32_t id : ids) {
    if (id >= vocab) {
      throw bad_param(param, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                 std::to_string(vocab) + ")");
    }
  }
  const int max_len = ctx.engine.config().max_model_length;
  if (ids.empty()) throw bad_param(param, "the prompt has no tokens");
  if (static_cast<int>(ids.size()) >= max_len) {
    throw bad_param(param, "the prompt has " + std::to_string(ids.size()) + " tokens; max_model_len is " +
                               std::to_string(max_len) + ", which leaves no room to generate");
  }
}

void serve_generation(const ServingContext& ctx, const GenerationRequest& req, AsyncEngine::Clock::time_point deadline,
                      std::shared_ptr<ActiveCall> active, ClientWatch& client, httplib::Response& res,
                      SseRewriter rewrite_sse) {
  Submitted s = submit(ctx, req, deadline);
  if (req.stream) {
    respond_stream(ctx, std::move(s), std::move(active), std::move(rewrite_sse), res);
  } else {
    respond_whole(ctx, s, client, res);
  }
}

}  // namespace minivllm::server
