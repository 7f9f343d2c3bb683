#include "server/openai_request.h"

#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace minivllm::server {

namespace {

using nlohmann::json;

// The value of `key`, or nullptr when absent or null (clients send null for "not set").
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

bool read_bool(const json& body, const char* key, bool fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw bad_param(key, "must be true or false");
  return v->get<bool>();
}

// A number in [lo, hi] (both finite bounds inclusive unless `lo_open`).
float read_float(const json& body, const char* key, float fallback, double lo, double hi, bool lo_open = false) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_number()) throw bad_param(key, "must be a number");
  const double x = v->get<double>();
  const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
  if (!ok) {
    std::string range = lo_open ? "(" : "[";
    range.append(std::to_string(lo)).append(", ").append(std::to_string(hi)).append("]");
    throw bad_param(key, "must be in " + range + ", got " + v->dump());
  }
  return static_cast<float>(x);
}

int64_t as_integer(const json& v, const char* key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) throw bad_param(key, "must be an integer, got " + v.dump().substr(0, 40));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    throw bad_param(key, "must be at most " + std::to_string(hi) + ", got " + v.dump());
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    throw bad_param(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x));
  }
  return x;
}

std::optional<int64_t> read_int(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  return as_integer(*v, key, lo, hi);
}

// A token id list: a non-empty array of integers in [0, 2^31).
std::vector<int32_t> token_ids(const json& v, const char* key) {
  if (!v.is_array() || v.empty()) throw bad_param(key, "a token id list must be a non-empty array of integers");
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& x : v) ids.push_back(static_cast<int32_t>(as_integer(x, key, 0, std::numeric_limits<int32_t>::max())));
  return ids;
}

// "prompt": a string, a list of strings, a list of token ids, or a list of token id lists.
std::vector<PromptInput> read_prompts(const json& body) {
  const json* v = field(body, "prompt");
  if (!v) throw bad_param("prompt", "is required");
  std::vector<PromptInput> prompts;
  auto text = [](const json& s) {
    PromptInput p;
    p.text = s.get<std::string>();
    return p;
  };
  auto ids = [](const json& s) {
    PromptInput p;
    p.is_text = false;
    p.token_ids = token_ids(s, "prompt");
    return p;
  };
  if (v->is_string()) {
    prompts.push_back(text(*v));
  } else if (!v->is_array() || v->empty()) {
    throw bad_param("prompt", "must be a string, a list of strings, a list of token ids or a list of token id lists");
  } else if ((*v)[0].is_number()) {
    prompts.push_back(ids(*v));
  } else {
    if (v->size() > static_cast<size_t>(kMaxPrompts)) {
      throw bad_param("prompt", "at most " + std::to_string(kMaxPrompts) + " prompts per request, got " +
                                    std::to_string(v->size()));
    }
    for (const json& p : *v) {
      if (p.is_string()) {
        prompts.push_back(text(p));
      } else if (p.is_array()) {
        prompts.push_back(ids(p));
      } else {
        throw bad_param("prompt", "a list of prompts must hold strings or token id lists only");
      }
    }
  }
  for (const PromptInput& p : prompts) {
    if (p.is_text && p.text.empty()) throw bad_param("prompt", "must not be empty");
  }
  return prompts;
}

// "stop": a string or a list of strings.
std::vector<std::string> read_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > static_cast<size_t>(kMaxStopStrings)) {
      throw bad_param("stop", "at most " + std::to_string(kMaxStopStrings) + " stop strings");
    }
    for (const json& s : *v) {
      if (!s.is_string()) throw bad_param("stop", "must be a string or a list of strings");
      stops.push_back(s.get<std::string>());
    }
  } else {
    throw bad_param("stop", "must be a string or a list of strings");
  }
  for (const std::string& s : stops) {
    if (s.empty()) throw bad_param("stop", "stop strings must not be empty");
  }
  return stops;
}

// The parameters both endpoints share.
void read_common(const json& body, GenerationRequest& r) {
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw bad_param("model", "must be a string");
    r.model = m->get<std::string>();
  }
  SamplingParams& p = r.params;
  p.temperature = read_float(body, "temperature", 1.0f, 0.0, 1e6);
  p.top_p = read_float(body, "top_p", 1.0f, 0.0, 1.0, /*lo_open=*/true);
  p.min_p = read_float(body, "min_p", 0.0f, 0.0, 1.0);
  if (auto k = read_int(body, "top_k", -1, std::numeric_limits<int32_t>::max())) p.top_k = static_cast<int>(*k);
  if (auto s = read_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    p.seed = static_cast<uint64_t>(*s);
  }
  p.stop = read_stop(body);
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) throw bad_param("stop_token_ids", "must be a list of token ids");
    for (const json& x : *ids) p.stop_token_ids.push_back(as_integer(x, "stop_token_ids", 0, std::numeric_limits<int32_t>::max()));
  }
  p.ignore_eos = read_bool(body, "ignore_eos", false);
  r.n = static_cast<int>(read_int(body, "n", 1, SamplingParams::kMaxN).value_or(1));
  p.n = r.n;
  p.presence_penalty = read_float(body, "presence_penalty", 0.0f, -2.0, 2.0);
  p.frequency_penalty = read_float(body, "frequency_penalty", 0.0f, -2.0, 2.0);
  p.repetition_penalty = read_float(body, "repetition_penalty", 1.0f, 0.0, 2.0, /*lo_open=*/true);
  r.tokens_as_ids = read_bool(body, "return_tokens_as_token_ids", false);
  r.stream = read_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!r.stream) throw bad_param("stream_options", "is only allowed when stream is true");
    if (!so->is_object()) throw bad_param("stream_options", "must be an object");
    r.include_usage = read_bool(*so, "include_usage", false);
  }
}

// Sets max_tokens (when given) and logprobs on the SamplingParams, then the engine's own checks.
void finish_params(GenerationRequest& r) {
  if (r.max_tokens) r.params.max_tokens = *r.max_tokens;
  r.params.logprobs = r.logprobs;
  try {
    r.params.validate();
  } catch (const std::exception& e) {
    throw ApiError(400, public_message(e));
  }
}

// Message content: a string, or a list of parts of which the text parts are joined.
std::string content_text(const json& content, size_t message_index) {
  const std::string where = "messages[" + std::to_string(message_index) + "].content";
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_param(where, "must be a string or a list of content parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      throw bad_param(where, "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

json read_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v) throw bad_param("messages", "is required");
  if (!v->is_array() || v->empty()) throw bad_param("messages", "must be a non-empty list of messages");
  json messages = json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    if (!m.is_object()) throw bad_param("messages", "messages[" + std::to_string(i) + "] must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      throw bad_param("messages", "messages[" + std::to_string(i) + "].role must be a string");
    }
    json copy = m;
    copy["content"] = content_text(m.contains("content") ? m["content"] : json(), i);
    messages.push_back(std::move(copy));
  }
  return messages;
}

}  // namespace

GenerationRequest parse_completion_request(const json& body) {
  GenerationRequest r;
  r.prompts = read_prompts(body);
  read_common(body, r);
  if (auto m = read_int(body, "max_tokens", 1, std::numeric_limits<int32_t>::max())) r.max_tokens = static_cast<int>(*m);
  if (!r.max_tokens) r.max_tokens = kDefaultCompletionMaxTokens;
  if (auto k = read_int(body, "logprobs", 0, SamplingParams::kMaxLogprobs)) r.logprobs = static_cast<int>(*k);
  r.echo = read_bool(body, "echo", false);
  if (r.echo && r.logprobs >= 0) {
    throw bad_param("echo", "echo with logprobs is not supported (the prompt's logprobs are not computed)");
  }
  if (r.prompts.size() * static_cast<size_t>(r.n) > static_cast<size_t>(kMaxPrompts)) {
    throw bad_param("n", "prompts x n must be at most " + std::to_string(kMaxPrompts));
  }
  finish_params(r);
  return r;
}

GenerationRequest parse_chat_request(const json& body) {
  GenerationRequest r;
  r.chat = true;
  r.messages = read_messages(body);
  read_common(body, r);
  // max_completion_tokens is the newer name; it wins when both are given.
  auto max_tokens = read_int(body, "max_tokens", 1, std::numeric_limits<int32_t>::max());
  if (auto m = read_int(body, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max())) max_tokens = m;
  if (max_tokens) r.max_tokens = static_cast<int>(*max_tokens);
  const bool logprobs = read_bool(body, "logprobs", false);
  const auto top = read_int(body, "top_logprobs", 0, SamplingParams::kMaxLogprobs);
  if (top && !logprobs) throw bad_param("top_logprobs", "needs logprobs set to true");
  if (logprobs) r.logprobs = static_cast<int>(top.value_or(0));
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) throw bad_param("chat_template_kwargs", "must be an object");
    r.chat_template_kwargs = *kw;
  }
  finish_params(r);
  return r;
}

TokenizeRequest parse_tokenize_request(const json& body) {
  TokenizeRequest r;
  r.add_special_tokens = read_bool(body, "add_special_tokens", true);
  if (field(body, "messages")) {
    r.chat = true;
    r.messages = read_messages(body);
    if (const json* kw = field(body, "chat_template_kwargs")) {
      if (!kw->is_object()) throw bad_param("chat_template_kwargs", "must be an object");
      r.chat_template_kwargs = *kw;
    }
    return r;
  }
  const json* p = field(body, "prompt");
  if (!p || !p->is_string()) throw bad_param("prompt", "must be a string (or pass chat \"messages\")");
  r.prompt = p->get<std::string>();
  return r;
}

std::vector<int32_t> parse_detokenize_request(const json& body) {
  const json* t = field(body, "tokens");
  if (!t) throw bad_param("tokens", "is required");
  return token_ids(*t, "tokens");
}

}  // namespace minivllm::server
