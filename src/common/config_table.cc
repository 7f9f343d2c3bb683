// The value side of config tables: JSON type checks, ranges and their wording, per member type.
#include "common/config_table.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/error_text.h"

namespace minivllm {

std::string cli_flag(std::string_view key_name) {
  std::string flag = "--";
  for (char c : key_name) flag += c == '_' ? '-' : c;
  return flag;
}

namespace {

std::string number_text(double v, KeyType type) {
  std::ostringstream os;
  if (type == KeyType::kFloat) os << v;
  else os << static_cast<int64_t>(v);
  return os.str();
}

// "[a, b]", "(a, b]", ">= a", "> a", "<= b" or "" for the bounds alone.
std::string bounds_text(const KeySpec& k, KeyType type) {
  const bool has_min = std::isfinite(k.min), has_max = std::isfinite(k.max);
  const std::string lo = has_min ? number_text(k.min, type) : "", hi = has_max ? number_text(k.max, type) : "";
  if (has_min && has_max) return std::string(k.min_open ? "(" : "[").append(lo).append(", ").append(hi).append("]");
  if (has_min) return std::string(k.min_open ? "> " : ">= ").append(lo);
  if (has_max) return std::string("<= ").append(hi);
  return "";
}

std::string scalar_range(const KeySpec& k, KeyType type) {
  if (!k.range.empty()) return std::string(k.range);
  std::string text = bounds_text(k, type);
  // A float with no upper bound: say that infinity is out too.
  if (type == KeyType::kFloat && !text.empty() && !std::isfinite(k.max)) text.insert(0, "finite and ");
  if (!text.empty() && text[0] == '[') text.insert(0, "in ");
  if (text.size() > 1 && text[0] == '(') text.insert(0, "in ");
  if (k.multiple_of > 0) {
    text.append(text.empty() ? "" : " and ").append("a multiple of ").append(std::to_string(k.multiple_of));
  }
  if (k.has_sentinel) {
    std::string s = std::to_string(k.sentinel);
    if (!k.sentinel_meaning.empty()) s.append(" (").append(k.sentinel_meaning).append(")");
    text = text.empty() ? s : s.append(" or ").append(text);
  }
  return text;
}

config_detail::KeyProblem problem(std::string text) { return {std::move(text)}; }

std::string excerpt(const nlohmann::json& j) {
  return text_excerpt(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

bool in_bounds(const KeySpec& k, double v) {
  return (k.min_open ? v > k.min : v >= k.min) && v <= k.max;
}

int64_t read_integer(const nlohmann::json& j, const KeySpec& k) {
  if (!j.is_number_integer()) throw problem("must be an integer, got " + excerpt(j));
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw problem("is out of the 64-bit integer range, got " + excerpt(j));
  }
  const int64_t v = j.get<int64_t>();
  config_detail::check_value(k, v);
  return v;
}

}  // namespace

std::string describe_range(const KeySpec& k, KeyType type) {
  switch (type) {
    case KeyType::kBool:
      return "";
    case KeyType::kInt:
    case KeyType::kFloat:
      return scalar_range(k, type);
    case KeyType::kString: {
      std::string text;
      size_t n = 0;
      while (n < k.choices.size() && !k.choices[n].empty()) ++n;
      for (size_t i = 0; i < n; ++i) {
        if (i > 0) text.append(i + 1 == n ? " or " : ", ");
        text.append(k.choices[i]);
      }
      if (text.empty() && k.required) text = "non-empty";
      return text;
    }
    case KeyType::kIntList: {
      const std::string each = scalar_range(k, KeyType::kInt);
      return each.empty() ? "" : "each " + each;
    }
    case KeyType::kStringList:
      return "non-empty strings";
    case KeyType::kObject:
      return "one of json (a schema), json_object (true), regex, choice (strings) or grammar (EBNF)";
    case KeyType::kTokenMap: {
      const std::string each = scalar_range(k, KeyType::kFloat);
      return "token ids >= 0" + (each.empty() ? std::string() : ", each value " + each);
    }
  }
  return "";
}

namespace config_detail {

void check_value(const KeySpec&, bool) {}

void check_value(const KeySpec& k, int64_t v) {
  if (k.has_sentinel && v == k.sentinel) return;
  const bool ok = in_bounds(k, static_cast<double>(v)) && (k.multiple_of == 0 || v % k.multiple_of == 0);
  if (!ok) throw problem("must be " + scalar_range(k, KeyType::kInt) + ", got " + std::to_string(v));
}

void check_value(const KeySpec& k, float v) {
  if (!std::isfinite(v) || !in_bounds(k, v)) {
    const std::string range = scalar_range(k, KeyType::kFloat);
    std::ostringstream got;
    got << v;
    throw problem((range.empty() ? std::string("must be finite") : "must be " + range) + ", got " + got.str());
  }
}

void check_value(const KeySpec& k, const std::string& v) {
  if (k.required && v.empty()) throw problem("must not be empty");
  if (k.choices[0].empty()) return;
  for (std::string_view c : k.choices) {
    if (!c.empty() && c == v) return;
  }
  throw problem("must be " + describe_range(k, KeyType::kString) + ", got '" + text_excerpt(v) + "'");
}

void check_value(const KeySpec& k, const std::optional<uint64_t>& v) {
  if (v) check_value(k, static_cast<int64_t>(*v));
}

void check_value(const KeySpec& k, const std::vector<int64_t>& v) {
  for (int64_t x : v) check_value(k, x);
}

void check_value(const KeySpec&, const std::vector<std::string>& v) {
  for (const std::string& s : v) {
    if (s.empty()) throw problem("strings must not be empty");
  }
}

void read_value(const nlohmann::json& j, const KeySpec&, bool& out) {
  if (!j.is_boolean()) throw problem("must be true or false, got " + excerpt(j));
  out = j.get<bool>();
}

void read_value(const nlohmann::json& j, const KeySpec& k, int& out) {
  const int64_t v = read_integer(j, k);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw problem("is out of the 32-bit integer range, got " + std::to_string(v));
  }
  out = static_cast<int>(v);
}

void read_value(const nlohmann::json& j, const KeySpec& k, int64_t& out) { out = read_integer(j, k); }

void read_value(const nlohmann::json& j, const KeySpec& k, float& out) {
  if (!j.is_number()) throw problem("must be a number, got " + excerpt(j));
  const float v = static_cast<float>(j.get<double>());
  check_value(k, v);
  out = v;
}

void read_value(const nlohmann::json& j, const KeySpec& k, std::string& out) {
  if (!j.is_string()) throw problem("must be a string, got " + excerpt(j));
  std::string v = j.get<std::string>();
  check_value(k, v);
  out = std::move(v);
}

void read_value(const nlohmann::json& j, const KeySpec& k, std::optional<uint64_t>& out) {
  out = static_cast<uint64_t>(read_integer(j, k));
}

void read_value(const nlohmann::json& j, const KeySpec& k, std::vector<int64_t>& out) {
  if (!j.is_array()) throw problem("must be a list of integers, got " + excerpt(j));
  std::vector<int64_t> v;
  v.reserve(j.size());
  for (const nlohmann::json& x : j) v.push_back(read_integer(x, k));
  out = std::move(v);
}

void read_value(const nlohmann::json& j, const KeySpec& k, std::vector<std::string>& out) {
  std::vector<std::string> v;
  if (j.is_string()) {
    v.push_back(j.get<std::string>());
  } else if (j.is_array()) {
    for (const nlohmann::json& s : j) {
      if (!s.is_string()) throw problem("must be a string or a list of strings, got " + excerpt(j));
      v.push_back(s.get<std::string>());
    }
  } else {
    throw problem("must be a string or a list of strings, got " + excerpt(j));
  }
  check_value(k, v);
  out = std::move(v);
}

// OpenAI's form: a JSON object whose keys are token ids in decimal ("50256": -100).
void read_value(const nlohmann::json& j, const KeySpec& k, std::map<int32_t, float>& out) {
  if (!j.is_object()) throw problem("must be an object of token id to number, got " + excerpt(j));
  std::map<int32_t, float> v;
  for (const auto& [key, value] : j.items()) {
    int32_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0) {
      throw problem("keys must be token ids (integers >= 0 in decimal), got '" + text_excerpt(key) + "'");
    }
    if (!value.is_number()) throw problem("value of token " + key + " must be a number, got " + excerpt(value));
    v[id] = static_cast<float>(value.get<double>());
  }
  check_value(k, v);
  out = std::move(v);
}

void check_value(const KeySpec& k, const std::map<int32_t, float>& v) {
  for (const auto& [id, value] : v) {
    if (id < 0) throw problem("keys must be token ids >= 0, got " + std::to_string(id));
    try {
      check_value(k, value);
    } catch (const KeyProblem& p) {
      throw problem("value of token " + std::to_string(id) + " " + p.problem);
    }
  }
}

nlohmann::ordered_json write_value(const std::map<int32_t, float>& v) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [id, value] : v) j[std::to_string(id)] = write_value(value);
  return j;
}

// vLLM's structured_outputs object: exactly one of json (a schema, as an object or as JSON text),
// json_object (true), regex, choice (a non-empty list of strings) or grammar (EBNF).
void read_value(const nlohmann::json& j, const KeySpec& k, StructuredOutputs& out) {
  if (!j.is_object()) throw problem("must be an object, got " + excerpt(j));
  StructuredOutputs v;
  for (const auto& [field, x] : j.items()) {
    if (x.is_null()) continue;
    auto text = [&, &field = field](std::string& dst) {
      if (!x.is_string() || x.get<std::string>().empty()) throw problem("." + field + " must be a non-empty string");
      dst = x.get<std::string>();
    };
    if (field == "json") {
      if (x.is_object() || x.is_boolean()) {
        v.json = x.dump();
      } else if (x.is_string()) {
        try {
          v.json = nlohmann::json::parse(x.get<std::string>()).dump();
        } catch (const nlohmann::json::exception&) {
          throw problem(".json is a string but not JSON text of a schema: '" + text_excerpt(x.get<std::string>()) + "'");
        }
      } else {
        throw problem(".json must be a JSON schema (an object, or its JSON text), got " + excerpt(x));
      }
    } else if (field == "json_object") {
      if (!x.is_boolean()) throw problem(".json_object must be true or false, got " + excerpt(x));
      v.json_object = x.get<bool>();
    } else if (field == "regex") {
      text(v.regex);
    } else if (field == "grammar") {
      text(v.grammar);
    } else if (field == "choice") {
      if (!x.is_array() || x.empty()) throw problem(".choice must be a non-empty list of strings");
      for (const nlohmann::json& c : x) {
        if (!c.is_string() || c.get<std::string>().empty()) throw problem(".choice must hold non-empty strings only");
        v.choice.push_back(c.get<std::string>());
      }
    } else {
      throw problem("has no field '" + text_excerpt(field) + "' (it takes " + describe_range(k, KeyType::kObject) + ")");
    }
  }
  check_value(k, v);
  out = std::move(v);
}

void check_value(const KeySpec& k, const StructuredOutputs& v) {
  if (v.num_set() > 1) throw problem("takes " + describe_range(k, KeyType::kObject) + ", not several");
}

nlohmann::ordered_json write_value(const StructuredOutputs& v) {
  if (v.empty()) return nullptr;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!v.json.empty()) j["json"] = nlohmann::ordered_json::parse(v.json);
  if (v.json_object) j["json_object"] = true;
  if (!v.regex.empty()) j["regex"] = v.regex;
  if (!v.choice.empty()) j["choice"] = v.choice;
  if (!v.grammar.empty()) j["grammar"] = v.grammar;
  return j;
}

nlohmann::ordered_json write_value(float v) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
  return std::strtod(std::string(buf, end).c_str(), nullptr);
}

nlohmann::ordered_json write_value(const std::optional<uint64_t>& v) {
  return v ? nlohmann::ordered_json(static_cast<int64_t>(*v)) : nlohmann::ordered_json(nullptr);
}

}  // namespace config_detail
}  // namespace minivllm
