// ChatTemplate: the render variables and global functions of transformers' chat-template
// environment, and reading templates from tokenizer_config.json (see chat_template.h).
#include "template/chat_template.h"

#include <ctime>
#include <filesystem>

#include "common/check.h"
#include "common/file_contents.h"
#include "template/builtins.h"
#include "template/limits.h"
#include "template/parser.h"
#include "template/renderer.h"

namespace minivllm {
namespace {

using jinja::CallArgs;
using jinja::TypeError;
using jinja::Value;
using jinja::ValueDict;

Value range_fn(CallArgs& a) {
  if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3)
    throw TypeError("range() takes 1 to 3 positional arguments");
  std::vector<int64_t> p;
  for (const Value& v : a.positional) {
    if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool)
      throw TypeError("range() arguments must be integers, got " + jinja::type_name(v));
    p.push_back(v.as_int());
  }
  int64_t start = p.size() == 1 ? 0 : p[0], stop = p.size() == 1 ? p[0] : p[1], step = p.size() == 3 ? p[2] : 1;
  if (step == 0) throw TypeError("range() arg 3 must not be zero");
  jinja::ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (out.size() >= 100000) throw TypeError("range too big (jinja's sandbox allows 100000 items)");
    out.push_back(Value::integer(i));
    if (__builtin_add_overflow(i, step, &i)) break;  // the next one would be past stop
  }
  return Value::list(std::move(out));
}

// namespace(...) and dict(...): an optional mapping plus keyword arguments.
ValueDict kwargs_dict(CallArgs& a, const char* fn) {
  ValueDict d;
  if (a.positional.size() > 1) throw TypeError(std::string(fn) + "() takes at most 1 positional argument");
  if (!a.positional.empty()) {
    if (!a.positional[0].is_mapping()) throw TypeError(std::string(fn) + "() positional argument must be a mapping");
    d = a.positional[0].as_dict();
  }
  for (const auto& [k, v] : a.keyword) d.set(k, v);
  return d;
}

Value strftime_now_fn(CallArgs& a) {
  auto args = jinja::bind_args(a, {"format"}, "strftime_now");
  if (!args[0].is_string()) throw TypeError("strftime_now() expects a format string");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  size_t n = std::strftime(buf, sizeof(buf), args[0].as_string().c_str(), &local);
  return Value::string(std::string(buf, n));
}

// A special token in tokenizer_config.json: a string, {"content": ...}, or null / absent.
bool read_token(const nlohmann::ordered_json& config, const char* key, const std::string& path, std::string* out) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return false;
  if (it->is_string()) {
    *out = it->get<std::string>();
    return true;
  }
  MINIVLLM_CHECK(it->is_object() && it->contains("content") && (*it)["content"].is_string())
      << path << ": '" << key << "' must be a string or an object with a string 'content'";
  *out = (*it)["content"].get<std::string>();
  return true;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source) : source_(std::move(source)) {
  program_ = std::make_shared<const jinja::Body>(jinja::parse_template(source_));
}

template <typename Json>
std::string ChatTemplate::render_json(const Json& messages, bool add_generation_prompt, const Json& extra) const {
  MINIVLLM_CHECK(messages.is_array()) << "chat template: messages must be a JSON array, got " << messages.type_name();
  MINIVLLM_CHECK(extra.is_object()) << "chat template: extra variables must be a JSON object, got " << extra.type_name();
  ValueDict globals;
  globals.set("messages", jinja::from_json(messages, "messages"));
  globals.set("add_generation_prompt", Value::boolean(add_generation_prompt));
  globals.set("tools", Value::none());
  globals.set("documents", Value::none());
  try {
    if (has_bos_) globals.set("bos_token", Value::string(bos_token_));
    if (has_eos_) globals.set("eos_token", Value::string(eos_token_));
  } catch (const TypeError& e) {
    MINIVLLM_FAIL() << "chat template: special token: " << e.what();
  }
  globals.set("raise_exception", Value::callable("raise_exception", [](CallArgs& a) -> Value {
    auto args = jinja::bind_args(a, {"message"}, "raise_exception");
    MINIVLLM_FAIL() << "chat template raised an exception: "
                    << jinja::excerpt(jinja::to_str(args[0]), jinja::kMaxRaisedMessage);
    return Value();
  }));
  globals.set("strftime_now", Value::callable("strftime_now", strftime_now_fn));
  globals.set("range", Value::callable("range", range_fn));
  globals.set("namespace", Value::callable("namespace", [](CallArgs& a) {
    return Value::make_namespace(kwargs_dict(a, "namespace"));
  }));
  globals.set("dict", Value::callable("dict", [](CallArgs& a) { return Value::dict(kwargs_dict(a, "dict")); }));
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    MINIVLLM_CHECK(it.key() != "messages" && it.key() != "add_generation_prompt")
        << "chat template: extra variable '" << jinja::excerpt(it.key()) << "' collides with a render argument";
    globals.set(it.key(), jinja::from_json(it.value(), it.key()));
  }
  return jinja::Renderer(*program_, globals, limits_).render();
}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra) const {
  return render_json(messages, add_generation_prompt, extra);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  return render_json(messages, add_generation_prompt, extra);
}

ChatTemplate ChatTemplate::from_tokenizer_config(const std::string& path) {
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(read_file_contents(path));
  } catch (const nlohmann::json::exception& e) {
    MINIVLLM_FAIL() << path << ": invalid JSON: " << e.what();
  }
  MINIVLLM_CHECK(config.is_object()) << path << ": expected a JSON object";
  std::string source;
  auto it = config.find("chat_template");
  if (it != config.end() && it->is_string()) {
    source = it->get<std::string>();
  } else if (it != config.end() && it->is_array()) {
    bool found = false;
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template")) {
        source = entry["template"].get<std::string>();
        found = true;
      }
    }
    MINIVLLM_CHECK(found) << path << ": 'chat_template' list has no entry named \"default\"";
  } else {
    std::filesystem::path jinja_file = std::filesystem::path(path).parent_path() / "chat_template.jinja";
    MINIVLLM_CHECK(it == config.end() && std::filesystem::exists(jinja_file))
        << path << ": no 'chat_template' string or list (and no chat_template.jinja beside it)";
    source = read_file_contents(jinja_file.string());
  }
  std::optional<ChatTemplate> tmpl;
  try {
    tmpl.emplace(std::move(source));
  } catch (const Error& e) {
    MINIVLLM_FAIL() << path << ": " << e.what();
  }
  tmpl->has_bos_ = read_token(config, "bos_token", path, &tmpl->bos_token_);
  tmpl->has_eos_ = read_token(config, "eos_token", path, &tmpl->eos_token_);
  return std::move(*tmpl);
}

ChatTemplate ChatTemplate::with_source(std::string source) const {
  ChatTemplate t(std::move(source));
  t.bos_token_ = bos_token_;
  t.eos_token_ = eos_token_;
  t.has_bos_ = has_bos_;
  t.has_eos_ = has_eos_;
  t.limits_ = limits_;
  return t;
}

template <typename Json>
std::string ChatTemplate::render(const Json& messages, const ChatRender& how, const Json& extra) const {
  if (!how.continue_final_message) return render(messages, how.add_generation_prompt, extra);
  MINIVLLM_CHECK(!how.add_generation_prompt)
      << "continue_final_message and add_generation_prompt cannot both be true (the final message is continued, "
         "not answered)";
  MINIVLLM_CHECK(messages.is_array() && !messages.empty()) << "continue_final_message needs a message to continue";
  // The final message's text: a string, or the last text part of a list of parts.
  const auto& content = messages.back().contains("content") ? messages.back()["content"] : Json();
  std::string final_text;
  if (content.is_string()) {
    final_text = content.template get<std::string>();
  } else if (content.is_array() && !content.empty() && content.back().contains("text") &&
             content.back()["text"].is_string()) {
    final_text = content.back()["text"].template get<std::string>();
  }
  const std::string rendered = render(messages, /*add_generation_prompt=*/false, extra);
  // transformers: cut after the last place the content appears, its surrounding spaces aside.
  size_t at = rendered.rfind(final_text);
  size_t len = final_text.size();
  if (at == std::string::npos) {
    const size_t b = final_text.find_first_not_of(" \t\n");
    const size_t e = final_text.find_last_not_of(" \t\n");
    const std::string stripped = b == std::string::npos ? "" : final_text.substr(b, e - b + 1);
    at = rendered.rfind(stripped);
    len = stripped.size();
  }
  MINIVLLM_CHECK(at != std::string::npos && !final_text.empty())
      << "continue_final_message: the chat template does not show the final message's content, so it cannot be "
         "left open";
  return rendered.substr(0, at + len);
}

template std::string ChatTemplate::render(const nlohmann::json&, const ChatRender&, const nlohmann::json&) const;
template std::string ChatTemplate::render(const nlohmann::ordered_json&, const ChatRender&,
                                          const nlohmann::ordered_json&) const;

}  // namespace minivllm
