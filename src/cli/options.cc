#include "cli/options.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli/cli_io.h"
#include "cli/config_flags.h"
#include "cli/json_input.h"
#include "common/check.h"
#include "engine/sampling_keys.h"

namespace minivllm::cli {
namespace {

// The whole of a file a flag names; a missing or unreadable file is a usage error naming both.
std::string read_text_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(flag + ": cannot read '" + text_excerpt(path) + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

void add_engine_options(ArgParser& p) { add_key_options(p, engine_config_keys(), /*with_opt_in=*/true); }

void add_model_option(ArgParser& p) {
  for (const ConfigKey& k : engine_config_keys()) {
    if (k.spec.name == "model") add_key_options(p, std::span(&k, 1), /*with_opt_in=*/false);
  }
}

EngineConfig engine_config_from(const ParsedArgs& a) {
  const FlagValues v = key_values_from(a, engine_config_keys());
  return with_flag_names(v, [&] { return EngineConfig::from_json(v.keys); });
}

void add_sampling_options(ArgParser& p, int default_max_tokens, bool with_opt_in) {
  add_key_options(p, sampling_keys(), with_opt_in, {{"max_tokens", default_max_tokens}});
  // The structured_outputs key as three flags (a schema or grammar is read from a file).
  p.option("--json-schema", "FILE", "the completion is JSON valid against the JSON schema in FILE");
  p.option("--regex", "REGEX", "the completion matches REGEX");
  p.option("--grammar", "FILE", "the completion matches the EBNF grammar in FILE (root rule: root)");
}

SamplingParams sampling_params_from(const ParsedArgs& a, int default_max_tokens, const GenerationDefaults& model) {
  FlagValues v = key_values_from(a, sampling_keys());
  for (const auto& [key, value] : model.keys.items()) {
    if (key != "max_tokens" && !v.keys.contains(key)) v.keys[key] = value;
  }
  if (!v.keys.contains("max_tokens")) v.keys["max_tokens"] = std::min(default_max_tokens, model.max_tokens().value_or(default_max_tokens));
  const int given = (a.has("--json-schema") ? 1 : 0) + (a.has("--regex") ? 1 : 0) + (a.has("--grammar") ? 1 : 0);
  if (given > 1) throw UsageError("give one of --json-schema, --regex and --grammar");
  if (a.has("--json-schema")) v.keys["structured_outputs"] = {{"json", read_text_file("--json-schema", *a.get("--json-schema"))}};
  if (a.has("--regex")) v.keys["structured_outputs"] = {{"regex", *a.get("--regex")}};
  if (a.has("--grammar")) v.keys["structured_outputs"] = {{"grammar", read_text_file("--grammar", *a.get("--grammar"))}};
  return with_flag_names(v, [&] { return SamplingParams::from_json(v.keys); });
}

void add_template_var_option(ArgParser& p) {
  p.option("--var", "NAME=JSON", "chat-template variable, e.g. --var enable_thinking=false (repeatable)");
}

nlohmann::json template_vars_from(const ParsedArgs& a) {
  nlohmann::json vars = nlohmann::json::object();
  for (const std::string& v : a.all("--var")) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--var expects NAME=JSON, got '" + text_excerpt(v) + "'");
    const std::string name = v.substr(0, eq);
    const std::string value = v.substr(eq + 1);
    if (json_too_deep_at(value)) {
      throw UsageError("--var " + text_excerpt(name) + ": the value is nested more than " +
                       std::to_string(kMaxJsonDepth) + " arrays or objects deep");
    }
    try {
      vars[name] = nlohmann::json::parse(value);
    } catch (const nlohmann::json::exception&) {
      throw UsageError("--var " + text_excerpt(name) + ": the value is not JSON: '" + text_excerpt(value) +
                       "' (strings need quotes: --var name='\"text\"')");
    }
  }
  return vars;
}

}  // namespace minivllm::cli
