// The types a request's tools give their parameters, for the syntaxes whose calls write argument
// values as bare text (GLM-4.5's <arg_value>, Qwen3-Coder's and Seed-OSS's <parameter=...>): the
// chat templates write a string as it is and anything else as JSON (or Python's str of it), so a
// value is read back by its parameter's type, as vLLM's glm45 and qwen3_coder parsers do.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace minivllm::server {

class ParamTypes {
 public:
  // `tools`: OpenAI's array ({"type": "function", "function": {"name", "parameters"}}), or null.
  explicit ParamTypes(const nlohmann::json& tools);

  // The value of `function`'s parameter `key` written as `text`: a string parameter's text as it
  // is; a boolean's True / False in any case (Python's str); any other value (or an untyped
  // parameter's) JSON when it parses as JSON, else the text.
  nlohmann::ordered_json value(const std::string& function, const std::string& key, std::string_view text) const;

 private:
  std::string type_of(const std::string& function, const std::string& key) const;  // "" when untyped
  std::map<std::string, std::map<std::string, std::string>> types_;  // function -> parameter -> type
};

// s without the space at its ends.
std::string_view trim_space(std::string_view s);

}  // namespace minivllm::server
