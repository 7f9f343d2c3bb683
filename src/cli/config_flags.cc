#include "cli/config_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/error_text.h"

namespace minivllm::cli {
namespace {

bool on_cli(const ConfigKey& k, bool with_opt_in) {
  return k.spec.cli == CliUse::kFlag || (k.spec.cli == CliUse::kOptIn && with_opt_in);
}

// A default as users read it: strings unquoted, null as "unset", [] as "none".
std::string default_text(const ConfigKey& k, const nlohmann::json& defaults) {
  const auto it = defaults.find(std::string(k.spec.name));
  const nlohmann::json d = it != defaults.end() ? *it : nlohmann::json::parse(k.default_json);
  if (d.is_null()) return "unset";
  if (k.spec.has_sentinel && d.is_number_integer() && d.get<int64_t>() == k.spec.sentinel) {
    return std::string(k.spec.sentinel_meaning);
  }
  if (d.is_boolean()) return d.get<bool>() ? "on" : "off";
  if (d.is_string()) return d.get<std::string>();
  if (d.is_array() && d.empty()) return "none";
  return d.dump();
}

nlohmann::json integer_of(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError(flag + " expects an integer, got '" + text_excerpt(text) + "'");
  }
  return static_cast<int64_t>(x);
}

nlohmann::json number_of(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x)) {
    throw UsageError(flag + " expects a number, got '" + text_excerpt(text) + "'");
  }
  return x;
}

}  // namespace

std::string key_flag(const ConfigKey& k) {
  const std::string flag = cli_flag(k.spec.name);
  if (k.type == KeyType::kBool && k.default_json == "true") return "--no-" + flag.substr(2);
  return flag;
}

std::string key_help(const ConfigKey& k, const nlohmann::json& defaults) {
  std::string help(k.spec.help);
  if (k.spec.required) return help.append(" (required)");
  help.append(" (default: ").append(default_text(k, defaults));
  if (!k.range_text.empty() && k.type != KeyType::kStringList) help.append("; ").append(k.range_text);
  return help.append(")");
}

void add_key_options(ArgParser& p, std::span<const ConfigKey> keys, bool with_opt_in, const nlohmann::json& defaults) {
  for (const ConfigKey& k : keys) {
    if (!on_cli(k, with_opt_in)) continue;
    const std::string flag = key_flag(k);
    if (k.type == KeyType::kBool) {
      p.flag(flag, key_help(k, defaults));
      continue;
    }
    const std::string value(k.spec.value_name);
    p.option(flag, value, key_help(k, defaults));
    if (!k.spec.alias.empty()) p.option(cli_flag(k.spec.alias), value, "same as " + flag);
  }
}

FlagValues key_values_from(const ParsedArgs& a, std::span<const ConfigKey> keys) {
  FlagValues out;
  for (const ConfigKey& k : keys) {
    if (k.spec.cli == CliUse::kNone) continue;
    const std::string name(k.spec.name), flag = key_flag(k);
    const std::string alias = k.spec.alias.empty() ? "" : cli_flag(k.spec.alias);
    if (!alias.empty() && a.has(flag) && a.has(alias)) throw UsageError("give " + alias + " or " + flag + ", not both");
    const std::string given = !alias.empty() && a.has(alias) ? alias : flag;
    if (!a.has(given)) continue;
    out.flag_of[name] = given;
    nlohmann::json& v = out.keys[name];
    switch (k.type) {
      case KeyType::kBool: v = k.default_json != "true"; break;  // the flag sets what is not the default
      case KeyType::kInt: v = integer_of(given, *a.get(given)); break;
      case KeyType::kFloat: v = number_of(given, *a.get(given)); break;
      case KeyType::kString: v = *a.get(given); break;
      case KeyType::kIntList:
        v = nlohmann::json::array();
        for (const std::string& s : a.all(given)) v.push_back(integer_of(given, s));
        break;
      case KeyType::kStringList: v = a.all(given); break;
      case KeyType::kObject: v = nlohmann::json::parse(*a.get(given)); break;  // no such flag today
      case KeyType::kTokenMap:  // repeatable ID=VALUE, into the JSON object the key reads
        v = nlohmann::json::object();
        for (const std::string& s : a.all(given)) {
          const size_t eq = s.find('=');
          if (eq == std::string::npos) throw UsageError(given + " expects ID=VALUE, got '" + text_excerpt(s) + "'");
          v[s.substr(0, eq)] = number_of(given, s.substr(eq + 1));
        }
        break;
    }
  }
  return out;
}

}  // namespace minivllm::cli
