// Chat templates: a Jinja2 interpreter sufficient for Hugging Face chat templates, rendering as
// transformers' apply_chat_template does (trim_blocks, lstrip_blocks, loopcontrols,
// raise_exception, strftime_now, tojson without HTML escaping).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "template/limits.h"

namespace minivllm {

namespace jinja {
struct Stmt;
}

// How a conversation is rendered into a prompt (vLLM's and transformers' chat parameters).
struct ChatRender {
  bool add_generation_prompt = true;    // open the assistant's turn after the messages
  // Leave the final message open (a prefilled reply the model continues): the rendered text is cut
  // right after that message's content. Not with add_generation_prompt.
  bool continue_final_message = false;
};

class ChatTemplate {
 public:
  // Parses now; parse errors throw Error naming the template line and the construct.
  explicit ChatTemplate(std::string source);

  // messages: JSON array of {"role", "content", ...}; extra: object of extra variables
  // (bos_token, eos_token, enable_thinking, date_string, tools, ...), which override the defaults.
  // As in transformers, `tools` and `documents` default to none. Render errors (including the
  // template's own raise_exception) throw Error.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& extra = nlohmann::json::object()) const;
  // Same, keeping the key order of the caller's objects (what `tojson` prints, e.g. tool schemas).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // render() as `how` says; continue_final_message is an Error when the template does not show the
  // final message's content (the only place it could be cut) or with add_generation_prompt.
  template <typename Json>
  std::string render(const Json& messages, const ChatRender& how, const Json& extra) const;

  // Reads "chat_template" (a string, or a list of {name, template}: the "default" one; or else a
  // sibling chat_template.jinja) plus bos_token / eos_token (string or {"content": ...}).
  static ChatTemplate from_tokenizer_config(const std::string& path);
  // `source` parsed, with this template's bos_token / eos_token (a replacement template, e.g.
  // --chat-template, keeps the model's special tokens).
  ChatTemplate with_source(std::string source) const;

  // The render-time limits (template/limits.h); the defaults unless changed (tests lower them).
  const jinja::RenderLimits& limits() const { return limits_; }
  void set_limits(const jinja::RenderLimits& limits) { limits_ = limits; }

  const std::string& bos_token() const { return bos_token_; }  // "" when not configured
  const std::string& eos_token() const { return eos_token_; }
  const std::string& source() const { return source_; }

 private:
  template <typename Json>
  std::string render_json(const Json& messages, bool add_generation_prompt, const Json& extra) const;

  std::string source_;
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> program_;
  std::string bos_token_, eos_token_;
  bool has_bos_ = false, has_eos_ = false;
  jinja::RenderLimits limits_;
};

}  // namespace minivllm
