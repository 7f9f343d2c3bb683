#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/sampling_keys.h"
#include "server/api_error.h"
#include "server/request_fields.h"

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

// A token id list: a non-empty array of integers in [0, 2^31).
std::vector<int32_t> token_ids(const json& v, const char* key) {
  if (!v.is_array() || v.empty()) throw bad_param(key, "a token id list must be a non-empty array of integers");
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& x : v) ids.push_back(static_cast<int32_t>(as_integer(x, key, 0, std::numeric_limits<int32_t>::max())));
  return ids;
}

// Sets the sampling key of `row` from body[param] (absent or null: not set). The table gives the
// type and range; a sentinel (logprobs -1) is no value here: OpenAI's "not set" is null.
void read_sampling_key(const json& body, const KeyRow<SamplingParams>& row, const char* param, SamplingParams& p) {
  const json* v = field(body, param);
  if (!v) return;
  KeyRow<SamplingParams> strict = row;
  strict.spec.has_sentinel = false;
  try {
    read_key(strict, *v, p, kSamplingKeyKind);
  } catch (const ConfigKeyError& e) {
    throw bad_param(param, e.problem());
  }
}

const KeyRow<SamplingParams>& sampling_row(std::string_view name) {
  return *find_key(sampling_rows(), name);
}

// max_tokens (and chat's max_completion_tokens) when given, with the table's range.
std::optional<int> read_max_tokens(const json& body, const char* param) {
  if (!field(body, param)) return std::nullopt;
  SamplingParams p;
  read_sampling_key(body, sampling_row("max_tokens"), param, p);
  return p.max_tokens;
}

void read_response_format(const json& body, SamplingParams& p);

// A chat's add_generation_prompt (default true) and continue_final_message (vLLM's), which exclude
// each other (ChatTemplate::render refuses them together too; here the 400 names the field).
ChatRender read_chat_render(const json& body) {
  ChatRender how;
  how.add_generation_prompt = read_bool(body, "add_generation_prompt", true);
  how.continue_final_message = read_bool(body, "continue_final_message", false);
  if (how.add_generation_prompt && how.continue_final_message) {
    throw bad_param("continue_final_message",
                    "cannot be true with add_generation_prompt true (the default): set add_generation_prompt false");
  }
  return how;
}

// The parameters both endpoints share.
void read_common(const json& body, GenerationRequest& r) {
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw bad_param("model", "must be a string");
    r.model = m->get<std::string>();
  }
  // Every sampling key is an OpenAI (or vLLM) parameter of the same name, but for the two whose
  // OpenAI forms differ per endpoint: max_tokens and logprobs (below).
  SamplingParams& p = r.params;
  for (const KeyRow<SamplingParams>& row : sampling_rows()) {
    if (row.spec.name == "max_tokens" || row.spec.name == "logprobs") continue;
    read_sampling_key(body, row, std::string(row.spec.name).c_str(), p);
  }
  // A server limit (one request must not make every step scan many stop strings), not a key's range.
  if (p.stop.size() > static_cast<size_t>(kMaxStopStrings)) {
    throw bad_param("stop", "at most " + std::to_string(kMaxStopStrings) + " stop strings");
  }
  read_response_format(body, p);
  r.n = p.n;
  r.tokens_as_ids = read_bool(body, "return_tokens_as_token_ids", false);
  r.stream = read_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!r.stream) throw bad_param("stream_options", "is only allowed when stream is true");
    if (!so->is_object()) throw bad_param("stream_options", "must be an object");
    r.include_usage = read_bool(*so, "include_usage", false);
  }
}

// OpenAI's response_format onto structured_outputs: "text" (no constraint), "json_object", or
// "json_schema" with json_schema.schema (name and strict are OpenAI's bookkeeping: the schema is
// always enforced, which is what strict asks for).
void read_response_format(const json& body, SamplingParams& p) {
  const json* rf = field(body, "response_format");
  if (!rf) return;
  if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
    throw bad_param("response_format", "must be an object with a \"type\": text, json_object or json_schema");
  }
  if (!p.structured_outputs.empty()) {
    throw bad_param("response_format", "give response_format or structured_outputs, not both");
  }
  const std::string type = (*rf)["type"].get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    p.structured_outputs.json_object = true;
    return;
  }
  if (type != "json_schema") {
    throw bad_param("response_format", "type must be text, json_object or json_schema, got '" + type.substr(0, 40) + "'");
  }
  const json* js = rf->contains("json_schema") ? &(*rf)["json_schema"] : nullptr;
  if (!js || !js->is_object() || !js->contains("schema") || !((*js)["schema"].is_object() || (*js)["schema"].is_boolean())) {
    throw bad_param("response_format", "json_schema must be an object with a \"schema\" (a JSON schema object)");
  }
  p.structured_outputs.json = (*js)["schema"].dump();
}

// Sets max_tokens (when given) and logprobs on the SamplingParams, then the engine's own checks.
void finish_params(GenerationRequest& r) {
  if (r.max_tokens) r.params.max_tokens = *r.max_tokens;
  r.params.logprobs = r.logprobs;
  // Prompt logprobs go in the whole response only (vLLM refuses them streamed too).
  r.prompt_logprobs = r.params.prompt_logprobs;
  if (r.stream && r.prompt_logprobs >= 0) {
    throw bad_param("prompt_logprobs", "is not available with stream: true (the prompt's logprobs come in the whole "
                                       "response)");
  }
  if (r.echo && r.logprobs >= 0) {
    if (r.stream) {
      throw bad_param("echo", "with logprobs is not available with stream: true (the prompt's logprobs come in the "
                              "whole response)");
    }
    r.params.prompt_logprobs = std::max(r.params.prompt_logprobs, r.logprobs);
  }
  try {
    r.params.validate();
  } catch (const ConfigKeyError& e) {  // a rule across keys (min_tokens <= max_tokens) names its key
    throw bad_param(e.key(), e.problem());
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

// An assistant turn's reasoning as the client got it (reasoning_content, or vLLM's newer
// `reasoning`) is also `thinking`, the name gpt-oss's template reads (it shows the model the
// analysis behind a tool call); Qwen3's reads reasoning_content itself. That template refuses
// thinking beside the content of a tool-call turn (a preamble), so such a turn keeps its content only.
void pass_back_reasoning(json& m) {
  if (m["role"] != "assistant" || m.contains("thinking")) return;
  const json* r = field(m, "reasoning_content");
  if (r == nullptr) r = field(m, "reasoning");
  if (r == nullptr || !r->is_string()) return;
  const bool preamble = m.contains("tool_calls") && m["content"].is_string() && !m["content"].get<std::string>().empty();
  if (!preamble) m["thinking"] = *r;
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
    read_tool_message_fields(m, i, copy);
    pass_back_reasoning(copy);
    messages.push_back(std::move(copy));
  }
  return messages;
}

}  // namespace

std::vector<PromptInput> read_prompts(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) throw bad_param(key, "is required");
  std::vector<PromptInput> prompts;
  auto text = [](const json& s) {
    PromptInput p;
    p.text = s.get<std::string>();
    return p;
  };
  auto ids = [key](const json& s) {
    PromptInput p;
    p.is_text = false;
    p.token_ids = token_ids(s, key);
    return p;
  };
  if (v->is_string()) {
    prompts.push_back(text(*v));
  } else if (!v->is_array() || v->empty()) {
    throw bad_param(key, "must be a string, a list of strings, a list of token ids or a list of token id lists");
  } else if ((*v)[0].is_number()) {
    prompts.push_back(ids(*v));
  } else {
    if (v->size() > static_cast<size_t>(kMaxPrompts)) {
      throw bad_param(key, "at most " + std::to_string(kMaxPrompts) + " prompts per request, got " +
                                    std::to_string(v->size()));
    }
    for (const json& p : *v) {
      if (p.is_string()) {
        prompts.push_back(text(p));
      } else if (p.is_array()) {
        prompts.push_back(ids(p));
      } else {
        throw bad_param(key, "a list of prompts must hold strings or token id lists only");
      }
    }
  }
  for (const PromptInput& p : prompts) {
    if (p.is_text && p.text.empty()) throw bad_param(key, "must not be empty");
  }
  return prompts;
}

GenerationRequest parse_completion_request(const json& body, const GenerationDefaults& defaults) {
  check_request_fields(body, Endpoint::kCompletions);
  GenerationRequest r;
  r.params = defaults.params;
  r.default_max_tokens = defaults.max_tokens();
  r.prompts = read_prompts(body, "prompt");
  read_common(body, r);
  r.max_tokens = read_max_tokens(body, "max_tokens")
                     .value_or(std::min(kDefaultCompletionMaxTokens, r.default_max_tokens.value_or(INT32_MAX)));
  read_sampling_key(body, sampling_row("logprobs"), "logprobs", r.params);
  r.logprobs = r.params.logprobs;
  r.echo = read_bool(body, "echo", false);
  if (r.prompts.size() * static_cast<size_t>(r.n) > static_cast<size_t>(kMaxPrompts)) {
    throw bad_param("n", "prompts x n must be at most " + std::to_string(kMaxPrompts));
  }
  finish_params(r);
  return r;
}

GenerationRequest parse_chat_request(const json& body, const GenerationDefaults& defaults) {
  check_request_fields(body, Endpoint::kChat);
  GenerationRequest r;
  r.params = defaults.params;
  r.default_max_tokens = defaults.max_tokens();
  r.chat = true;
  r.messages = read_messages(body);
  read_common(body, r);
  // max_completion_tokens is the newer name; it wins when both are given.
  r.max_tokens = read_max_tokens(body, "max_tokens");
  if (auto m = read_max_tokens(body, "max_completion_tokens")) r.max_tokens = m;
  // Chat's logprobs is a boolean; top_logprobs is the sampling key logprobs.
  const bool logprobs = read_bool(body, "logprobs", false);
  SamplingParams top;
  read_sampling_key(body, sampling_row("logprobs"), "top_logprobs", top);
  if (top.logprobs >= 0 && !logprobs) throw bad_param("top_logprobs", "needs logprobs set to true");
  if (logprobs) r.logprobs = std::max(top.logprobs, 0);
  r.render = read_chat_render(body);
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) throw bad_param("chat_template_kwargs", "must be an object");
    r.chat_template_kwargs = *kw;
  }
  // OpenAI's reasoning_effort: the chat template's variable of that name (gpt-oss's system message
  // says "Reasoning: low"); a model whose template has none refuses it (generation.cc).
  if (const json* e = field(body, "reasoning_effort")) {
    if (!e->is_string() || (*e != "low" && *e != "medium" && *e != "high")) {
      throw bad_param("reasoning_effort", "must be \"low\", \"medium\" or \"high\"");
    }
    r.reasoning_effort = e->get<std::string>();
    r.chat_template_kwargs["reasoning_effort"] = r.reasoning_effort;
  }
  r.tools = read_tool_request(body);
  if (r.tools.forces_calls()) {
    // The reply is the call, so the grammar of the tools' schemas is its structured output.
    if (!r.params.structured_outputs.empty()) {
      throw bad_param("tool_choice", "a required or named tool call cannot be combined with response_format or "
                             "structured_outputs (the reply is the call's JSON)");
    }
    r.params.structured_outputs.json = forced_tool_schema(r.tools);
  }
  finish_params(r);
  return r;
}

TokenizeRequest parse_tokenize_request(const json& body) {
  check_request_fields(body, Endpoint::kTokenize);
  TokenizeRequest r;
  r.add_special_tokens = read_bool(body, "add_special_tokens", true);
  r.return_token_strs = read_bool(body, "return_token_strs", false);
  if (field(body, "messages")) {
    r.chat = true;
    r.messages = read_messages(body);
    r.render = read_chat_render(body);
    if (const json* kw = field(body, "chat_template_kwargs")) {
      if (!kw->is_object()) throw bad_param("chat_template_kwargs", "must be an object");
      r.chat_template_kwargs = *kw;
    }
    const ToolRequest tools = read_tool_request(body);
    if (!tools.tools.is_null()) r.chat_template_kwargs["tools"] = tools.tools;
    return r;
  }
  const json* p = field(body, "prompt");
  if (!p || !p->is_string()) throw bad_param("prompt", "must be a string (or pass chat \"messages\")");
  r.prompt = p->get<std::string>();
  return r;
}

std::vector<int32_t> parse_detokenize_request(const json& body) {
  check_request_fields(body, Endpoint::kDetokenize);
  const json* t = field(body, "tokens");
  if (!t) throw bad_param("tokens", "is required");
  return token_ids(*t, "tokens");
}

}  // namespace minivllm::server
