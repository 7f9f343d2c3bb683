// A config table: one row per key of a plain config struct, binding the key's KeySpec (name,
// help, range, ...) to the struct member it sets. Everything that reads or shows keys works off a
// table: the JSON parser and the validation here, the CLI flags and --help (cli/options.cc), the
// server's OpenAI parameters, the Python keyword arguments (through ConfigKey). The member's
// default initializer is the key's default; the row's name is the only place the key is named.
//
//   constexpr auto kRows = std::to_array({
//       key<&EngineConfig::block_size>({.name = "block_size", .help = "...", .min = 16, .multiple_of = 16}),
//   });
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config_key.h"
#include "common/structured_outputs.h"

namespace minivllm {

namespace config_detail {

// A bad value; the table operations add the key's name (ConfigKeyError).
struct KeyProblem {
  std::string problem;
};

// One overload per member type: read checks the JSON type and the range (throws KeyProblem),
// check the range of a value set in C++, write gives the JSON value that reads back the same.
void read_value(const nlohmann::json& j, const KeySpec& k, bool& out);
void read_value(const nlohmann::json& j, const KeySpec& k, int& out);
void read_value(const nlohmann::json& j, const KeySpec& k, int64_t& out);
void read_value(const nlohmann::json& j, const KeySpec& k, float& out);
void read_value(const nlohmann::json& j, const KeySpec& k, std::string& out);
void read_value(const nlohmann::json& j, const KeySpec& k, std::optional<uint64_t>& out);
void read_value(const nlohmann::json& j, const KeySpec& k, std::vector<int64_t>& out);
void read_value(const nlohmann::json& j, const KeySpec& k, std::vector<std::string>& out);
void read_value(const nlohmann::json& j, const KeySpec& k, std::map<int32_t, float>& out);
void read_value(const nlohmann::json& j, const KeySpec& k, StructuredOutputs& out);

void check_value(const KeySpec& k, bool v);
void check_value(const KeySpec& k, int64_t v);
void check_value(const KeySpec& k, float v);
void check_value(const KeySpec& k, const std::string& v);
void check_value(const KeySpec& k, const std::optional<uint64_t>& v);
void check_value(const KeySpec& k, const std::vector<int64_t>& v);
void check_value(const KeySpec& k, const std::vector<std::string>& v);
void check_value(const KeySpec& k, const std::map<int32_t, float>& v);
void check_value(const KeySpec& k, const StructuredOutputs& v);

// (ordered_json, as to_json() returns it: nlohmann 3.11.2 crashes converting arrays between
// json and ordered_json, so no value is converted from one to the other.)
nlohmann::ordered_json write_value(const std::optional<uint64_t>& v);
nlohmann::ordered_json write_value(float v);  // the shortest decimal that reads back as v: 0.9, not 0.89999997
nlohmann::ordered_json write_value(const std::map<int32_t, float>& v);  // {"id": value}, as it was read
nlohmann::ordered_json write_value(const StructuredOutputs& v);         // {"json": {...}} or null
template <class V>
nlohmann::ordered_json write_value(const V& v) {
  return nlohmann::ordered_json(v);
}

template <class V>
constexpr KeyType type_of() {
  if constexpr (std::is_same_v<V, bool>) return KeyType::kBool;
  else if constexpr (std::is_integral_v<V> || std::is_same_v<V, std::optional<uint64_t>>) return KeyType::kInt;
  else if constexpr (std::is_floating_point_v<V>) return KeyType::kFloat;
  else if constexpr (std::is_same_v<V, std::string>) return KeyType::kString;
  else if constexpr (std::is_same_v<V, std::vector<int64_t>>) return KeyType::kIntList;
  else if constexpr (std::is_same_v<V, std::map<int32_t, float>>) return KeyType::kTokenMap;
  else if constexpr (std::is_same_v<V, StructuredOutputs>) return KeyType::kObject;
  else {
    static_assert(std::is_same_v<V, std::vector<std::string>>, "no config key type for this member");
    return KeyType::kStringList;
  }
}

template <class M>
struct MemberTraits;
template <class S, class V>
struct MemberTraits<V S::*> {
  using Struct = S;
  using Value = V;
};

}  // namespace config_detail

template <class S>
struct KeyRow {
  KeySpec spec;
  KeyType type;
  void (*read)(const nlohmann::json&, const KeySpec&, S&);  // throws config_detail::KeyProblem
  void (*check)(const KeySpec&, const S&);                  // throws config_detail::KeyProblem
  nlohmann::ordered_json (*write)(const S&);
};

// The row of key `spec` bound to member M (e.g. &EngineConfig::block_size).
template <auto M>
constexpr auto key(KeySpec spec) {
  using S = typename config_detail::MemberTraits<decltype(M)>::Struct;
  using V = typename config_detail::MemberTraits<decltype(M)>::Value;
  return KeyRow<S>{
      spec, config_detail::type_of<V>(),
      [](const nlohmann::json& j, const KeySpec& k, S& s) { config_detail::read_value(j, k, s.*M); },
      [](const KeySpec& k, const S& s) {
        if constexpr (std::is_same_v<V, int>) config_detail::check_value(k, static_cast<int64_t>(s.*M));
        else config_detail::check_value(k, s.*M);
      },
      [](const S& s) { return config_detail::write_value(s.*M); }};
}

// The row named `name` (or its alias); nullptr when none.
template <class S>
const KeyRow<S>* find_key(std::span<const KeyRow<S>> rows, std::string_view name) {
  for (const KeyRow<S>& r : rows) {
    if (r.spec.name == name || (!r.spec.alias.empty() && r.spec.alias == name)) return &r;
  }
  return nullptr;
}

// Sets one key from a JSON value; a bad value is a ConfigKeyError "<kind> '<name>' <problem>".
template <class S>
void read_key(const KeyRow<S>& row, const nlohmann::json& v, S& s, std::string_view kind) {
  try {
    row.read(v, row.spec, s);
  } catch (const config_detail::KeyProblem& p) {
    throw ConfigKeyError(kind, std::string(row.spec.name), p.problem);
  }
}

// Keys from a JSON object onto `s`: an unknown key, a key given under both its names, a wrong type
// or an out-of-range value is a ConfigKeyError naming the key; null leaves the default; a required
// key must be there. Checks each key alone; cross-key rules are the caller's.
template <class S>
S read_object(std::span<const KeyRow<S>> rows, const nlohmann::json& j, std::string_view kind, S s = S{}) {
  if (!j.is_object()) {
    throw Error(std::string(kind.empty() ? "parameter" : kind).append("s must be a JSON object, got ").append(j.type_name()));
  }
  for (const auto& [name, v] : j.items()) {
    const KeyRow<S>* row = find_key(rows, name);
    if (row == nullptr) throw ConfigKeyError(kind, name, "is unknown");
    if (!row->spec.alias.empty() && j.contains(row->spec.name) && j.contains(row->spec.alias)) {
      throw ConfigKeyError(kind, std::string(row->spec.name),
                           std::string("is also given as '").append(row->spec.alias).append("': give one"));
    }
    if (!v.is_null()) read_key(*row, v, s, kind);
  }
  for (const KeyRow<S>& r : rows) {
    const bool given = (j.contains(r.spec.name) && !j[r.spec.name].is_null()) ||
                       (!r.spec.alias.empty() && j.contains(r.spec.alias) && !j[r.spec.alias].is_null());
    if (r.spec.required && !given) throw ConfigKeyError(kind, std::string(r.spec.name), "is required");
  }
  return s;
}

// Every key's value in range (for a struct filled in from C++).
template <class S>
void check_all(std::span<const KeyRow<S>> rows, const S& s, std::string_view kind) {
  for (const KeyRow<S>& r : rows) {
    try {
      r.check(r.spec, s);
    } catch (const config_detail::KeyProblem& p) {
      throw ConfigKeyError(kind, std::string(r.spec.name), p.problem);
    }
  }
}

// Every key under its name, in table order; read_object of it gives `s` back.
template <class S>
nlohmann::ordered_json write_object(std::span<const KeyRow<S>> rows, const S& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const KeyRow<S>& r : rows) j[std::string(r.spec.name)] = r.write(s);
  return j;
}

// The keys with their defaults (S{}'s members) and ranges in words, in table order.
template <class S>
std::vector<ConfigKey> list_keys(std::span<const KeyRow<S>> rows) {
  const S defaults{};
  std::vector<ConfigKey> keys;
  for (const KeyRow<S>& r : rows) {
    const nlohmann::ordered_json d = r.write(defaults);
    const bool nullable = d.is_null() || r.spec.has_sentinel;
    keys.push_back({r.spec, r.type, nullable, d.dump(), describe_range(r.spec, r.type)});
  }
  return keys;
}

}  // namespace minivllm
