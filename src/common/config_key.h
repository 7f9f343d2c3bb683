// ConfigKey: what a configuration key is, for whoever shows or fills one in (the CLI's --help, the
// Python bindings' keyword arguments and docstrings). Host-only, no JSON: the tables that define
// the keys (engine_config_keys(), sampling_keys()) hand these out; config_table.h holds the rest.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "common/check.h"

namespace minivllm {

// kTokenMap: token id -> number (OpenAI's logit_bias: a JSON object keyed by the id in decimal);
// min / max bound the numbers, the ids must be >= 0 (the engine checks them against the vocabulary).
// kObject: a JSON object of a fixed shape (structured_outputs: common/structured_outputs.h).
enum class KeyType : uint8_t { kBool, kInt, kFloat, kString, kIntList, kStringList, kTokenMap, kObject };

// Where a key appears on the command line: always, only in commands that ask for it (generate's
// --n and --logprobs, whose output only it prints), or never.
enum class CliUse : uint8_t { kFlag, kOptIn, kNone };

// One key as its table defines it (a C++20 designated initializer per row). Numbers must lie in
// [min, max] (min excluded when min_open; an int key is also bounded by its member's type), or
// equal `sentinel` when the key has one (e.g. num_kvcache_blocks -1: sized from free memory).
struct KeySpec {
  static constexpr double kNone = std::numeric_limits<double>::infinity();

  std::string_view name;
  std::string_view help;
  std::string_view alias = "";       // a second accepted name (vLLM's), e.g. tensor_parallel_size
  std::string_view value_name = "N"; // the CLI's placeholder: --block-size N
  double min = -kNone;
  double max = kNone;
  bool min_open = false;
  int64_t multiple_of = 0;  // 0: any
  bool has_sentinel = false;
  int64_t sentinel = 0;
  std::string_view sentinel_meaning = "";
  std::array<std::string_view, 4> choices = {};  // strings: the allowed values ("" ends the list)
  std::string_view range = "";                   // the range in words, when the bounds say it badly
  bool required = false;                         // must be given (and, for strings, non-empty)
  CliUse cli = CliUse::kFlag;
};

// A key with its type and its default (the config struct's own, as JSON text), as listed by
// engine_config_keys() / sampling_keys().
struct ConfigKey {
  KeySpec spec;
  KeyType type = KeyType::kInt;
  bool nullable = false;     // null (Python None) is a value: unset (seed) or the sentinel
  std::string default_json;  // e.g. "256", "\"auto\"", "null", "[]"
  std::string range_text;    // e.g. ">= 16 and a multiple of 16", "auto, cpu or cuda"; "" when any
};

// The flag of a key name: max_model_len -> --max-model-len.
std::string cli_flag(std::string_view key_name);
// The allowed values in words (what ConfigKey::range_text holds).
std::string describe_range(const KeySpec& spec, KeyType type);

// A bad key or value: which key (its canonical name) and what is wrong with it, apart, so that
// each boundary words it its own way (the CLI names the flag, the server the OpenAI parameter).
// what(): "<kind> '<key>' <problem>", e.g. "config key 'block_size' must be ... got 20", or with
// an empty kind "<key> <problem>" ("top_p must be in (0, 1], got 1.5", as sampling errors read).
class ConfigKeyError : public Error {
 public:
  ConfigKeyError(std::string_view kind, std::string key, std::string problem)
      : Error(kind.empty() ? std::string(key).append(" ").append(problem)
                           : std::string(kind).append(" '").append(key).append("' ").append(problem)),
        key_(std::move(key)),
        problem_(std::move(problem)) {}
  const std::string& key() const { return key_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string key_, problem_;
};

}  // namespace minivllm
