// Command-line flags from a config table: one option per key (--block-size N, and its alias
// --max-model-len for max_model_length), with --help text made of the key's help, default and
// range; the flags given become a JSON object of keys, which the table's own JSON parser reads,
// so that a flag and its JSON key always give the same value and the same checks.
#pragma once

#include <map>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "common/config_key.h"

namespace minivllm::cli {

// The flag of a key: --block-size for block_size; a boolean sets the value that is not its
// default, so one that defaults to true is turned off, as vLLM's: --no-enable-chunked-prefill.
std::string key_flag(const ConfigKey& k);

// `defaults` overrides the default shown for some keys (e.g. generate's max_tokens). Opt-in keys
// (CliUse::kOptIn) are added only `with_opt_in`.
void add_key_options(ArgParser& p, std::span<const ConfigKey> keys, bool with_opt_in,
                     const nlohmann::json& defaults = nlohmann::json::object());

// The --help text of one key: "<help> (default: D; R)".
std::string key_help(const ConfigKey& k, const nlohmann::json& defaults = nlohmann::json::object());

struct FlagValues {
  nlohmann::json keys = nlohmann::json::object();  // key name -> value, for the flags given
  std::map<std::string, std::string> flag_of;      // key name -> the flag the user wrote
};

// The keys given as flags. A malformed number, or a key given under both its flags, is a
// UsageError naming the flag.
FlagValues key_values_from(const ParsedArgs& a, std::span<const ConfigKey> keys);

// Runs `parse` (a table's from_json); its ConfigKeyError becomes a UsageError naming the flag.
template <class F>
auto with_flag_names(const FlagValues& v, F&& parse) {
  try {
    return parse();
  } catch (const ConfigKeyError& e) {
    auto it = v.flag_of.find(e.key());
    throw UsageError((it != v.flag_of.end() ? it->second : cli_flag(e.key())) + " " + e.problem());
  }
}

}  // namespace minivllm::cli
