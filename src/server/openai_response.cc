#include "server/openai_response.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

namespace minivllm::server {

using nlohmann::json;

namespace {

// Unique within a process and unlikely across restarts: a random 48-bit prefix and a counter.
std::string next_response_id(const char* prefix) {
  static const uint64_t salt = std::random_device{}() & 0xFFFFFFFFFFFFull;
  static std::atomic<uint64_t> counter{0};
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s-%012llx%08llx", prefix, static_cast<unsigned long long>(salt),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return buf;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json top_entries_chat(const TokenNamer& name, const std::vector<std::pair<int32_t, float>>& top) {
  json out = json::array();
  for (const auto& [id, lp] : top) {
    const std::string t = name(id);
    out.push_back({{"token", t}, {"logprob", lp}, {"bytes", bytes_of(t)}});
  }
  return out;
}

}  // namespace

ResponseHeader make_header(bool chat, const std::string& model) {
  ResponseHeader h;
  h.chat = chat;
  h.id = next_response_id(chat ? "chatcmpl" : "cmpl");
  h.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  h.model = model;
  return h;
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

std::string TokenNamer::operator()(int32_t id) const {
  if (as_ids || !tok || !tok->has_piece(id)) return "token_id:" + std::to_string(id);
  return std::string(tok->token_bytes(id));
}

json completion_logprobs(const TokenNamer& name, const std::vector<TokenLogprob>& lps, size_t& text_offset) {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string t = name(lp.token_id);
    tokens.push_back(t);
    token_logprobs.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, v] : lp.top) top[name(id)] = v;
    top_logprobs.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += t.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

json completion_prompt_logprobs(const TokenNamer& name, const std::vector<int32_t>& prompt,
                                const std::vector<TokenLogprob>& lps, int top) {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  size_t offset = 0;
  for (size_t j = 0; j < prompt.size(); ++j) {
    const std::string t = name(prompt[j]);
    tokens.push_back(t);
    offsets.push_back(offset);
    offset += t.size();
    if (j == 0 || j > lps.size()) {
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      continue;
    }
    const TokenLogprob& lp = lps[j - 1];
    token_logprobs.push_back(lp.logprob);
    json alternatives = json::object();
    for (size_t r = 0; r < lp.top.size() && r < static_cast<size_t>(std::max(top, 0)); ++r) {
      alternatives[name(lp.top[r].first)] = lp.top[r].second;
    }
    top_logprobs.push_back(std::move(alternatives));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

void append_completion_logprobs(json& a, const json& b) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    for (const json& v : b.at(key)) a.at(key).push_back(v);
  }
}

json vllm_prompt_logprobs(const TokenNamer& name, const std::vector<TokenLogprob>& lps, int top) {
  json out = json::array({nullptr});
  for (const TokenLogprob& lp : lps) {
    json entry = json::object();
    const size_t shown = std::min(lp.top.size(), static_cast<size_t>(std::max(top, 0)));
    json own_rank = nullptr;
    for (size_t r = 0; r < lp.top.size(); ++r) {
      if (lp.top[r].first == lp.token_id) own_rank = r + 1;
    }
    entry[std::to_string(lp.token_id)] = {{"logprob", lp.logprob}, {"rank", own_rank}, {"decoded_token", name(lp.token_id)}};
    for (size_t r = 0; r < shown; ++r) {
      const auto& [id, v] = lp.top[r];
      entry[std::to_string(id)] = {{"logprob", v}, {"rank", r + 1}, {"decoded_token", name(id)}};
    }
    out.push_back(std::move(entry));
  }
  return out;
}

json chat_logprobs(const TokenNamer& name, const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string t = name(lp.token_id);
    content.push_back(
        {{"token", t}, {"logprob", lp.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top_entries_chat(name, lp.top)}});
  }
  return {{"content", std::move(content)}};
}

json completion_choice(int index, const std::string& text, const std::string& finish_reason, json logprobs) {
  return {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish_reason}};
}

json chat_choice(int index, const std::string& text, const std::string& finish_reason, json logprobs) {
  return {{"index", index},
          {"message", {{"role", "assistant"}, {"content", text}}},
          {"logprobs", std::move(logprobs)},
          {"finish_reason", finish_reason}};
}

std::string new_tool_call_id() {
  static const uint64_t salt = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  char buf[64];
  std::snprintf(buf, sizeof(buf), "chatcmpl-tool-%016llx%016llx", static_cast<unsigned long long>(salt),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return buf;
}

std::string finish_reason_with_calls(const std::string& finish_reason, int num_calls) {
  return num_calls > 0 && finish_reason == "stop" ? "tool_calls" : finish_reason;
}

namespace {

bool is_blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

json tool_call_json(const ToolCallPiece& c) {
  return {{"id", new_tool_call_id()}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

}  // namespace

json chat_choice(int index, const ReplyDelta& reply, bool with_reasoning, const std::string& finish_reason,
                 json logprobs) {
  json message = {{"role", "assistant"}};
  message["content"] = reply.calls.empty() || !is_blank(reply.content) ? json(reply.content) : json(nullptr);
  if (with_reasoning) message["reasoning_content"] = reply.reasoning.empty() ? json(nullptr) : json(reply.reasoning);
  if (!reply.calls.empty()) {
    json calls = json::array();
    for (const ToolCallPiece& c : reply.calls) calls.push_back(tool_call_json(c));
    message["tool_calls"] = std::move(calls);
  }
  return {{"index", index}, {"message", std::move(message)}, {"logprobs", std::move(logprobs)},
          {"finish_reason", finish_reason}};
}

json chunk_choice(int index, const ReplyDelta& piece, const std::string& finish_reason, json logprobs, bool first) {
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (!piece.reasoning.empty()) delta["reasoning_content"] = piece.reasoning;
  if (!piece.content.empty() || (first && piece.reasoning.empty() && piece.calls.empty())) delta["content"] = piece.content;
  if (!piece.calls.empty()) {
    json calls = json::array();
    for (const ToolCallPiece& p : piece.calls) {
      json c = p.name.empty() ? json{{"function", {{"arguments", p.arguments}}}} : tool_call_json(p);
      c["index"] = p.index;
      calls.push_back(std::move(c));
    }
    delta["tool_calls"] = std::move(calls);
  }
  return {{"index", index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
          {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
}

json full_response(const ResponseHeader& h, json choices, json usage) {
  return {{"id", h.id},
          {"object", h.chat ? "chat.completion" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", std::move(choices)},
          {"usage", std::move(usage)}};
}

json chunk_choice(const ResponseHeader& h, int index, const std::string& text, const std::string& finish_reason,
                  json logprobs, bool first) {
  json c = {{"index", index}};
  if (h.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    c["delta"] = std::move(delta);
  } else {
    c["text"] = text;
  }
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  return c;
}

json chunk(const ResponseHeader& h, json choices, const json& usage, bool with_usage) {
  json j = {{"id", h.id},
            {"object", h.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", h.created},
            {"model", h.model},
            {"choices", std::move(choices)}};
  if (with_usage) j["usage"] = usage;
  return j;
}

std::string dump_body(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return std::string("data: ").append(dump_body(j)).append("\n\n"); }

}  // namespace minivllm::server
